# Sourced by scripts/demo.sh (the default `make demo`): a real distributed training run on the local process nodes.
# examples/xgboost/trainingjob-local.yaml: 3 XGBoost workers classify scikit-learn's bundled digits, worker 0 runs
# the collective tracker, reports progress (held-out accuracy) through trainingjob.sdk to the operator's progress
# endpoint and writes the model as a checkpoint every epoch. Once a checkpoint is in the status, the demo SIGKILLs
# worker 1's process (as the OOM killer would); the operator restarts the gang, which resumes from that checkpoint,
# and the job Succeeds with its real final accuracy.
# Why XGBoost: its runtime (xgboost-cpu, scikit-learn) is about 300 MB, the cheapest cold install of the frameworks
# (PyTorch is about 2.9 GB to download); the first `make demo` builds it once into ~/.cache/trainingjob/runtimes.
JOB=xgb-digits
IMAGE=registry.example/trainingjob-examples/xgboost:0.1
MANIFEST=examples/xgboost/trainingjob-local.yaml
KILLED_WORKER=1
KILL_AFTER_CHECKPOINT=3  # the epoch whose checkpoint must be in the status before the kill

echo "== the XGBoost example's runtime: a venv standing in for $IMAGE (first use only: ~300 MB from PyPI)"
runtime_started=$(date +%s)
"$BIN/tj" cluster runtimes build "$IMAGE" >"$state_dir/logs/runtime-build.log" 2>&1 || {
  tail -n 20 "$state_dir/logs/runtime-build.log" >&2
  echo "building the runtime failed; log: $state_dir/logs/runtime-build.log" >&2
  exit 1
}
echo "   $(tail -n 1 "$state_dir/logs/runtime-build.log") in $(($(date +%s) - runtime_started))s"

echo "== submitting $MANIFEST to namespace $NS (3 workers on the local process nodes)"
kubectl delete "$TJ" "$JOB" -n "$NS" --ignore-not-found --wait=true >/dev/null
# The checkpoint claim outlives its job (so a job of the same name can resume): a new demo run starts afresh.
kubectl delete pvc "$JOB-checkpoints" -n "$NS" --ignore-not-found --wait=true >/dev/null
"$BIN/tj" submit -n "$NS" -f "$MANIFEST"

field() { kubectl get "$TJ" "$JOB" -n "$NS" -o jsonpath="{$1}"; }
# One line per change of what the operator's status says: phase, epoch, held-out accuracy, newest checkpoint.
last_line=""
show_status() {
  local line
  line=$(kubectl get "$TJ" "$JOB" -n "$NS" -o jsonpath='{.status.phase} epoch={.status.progress.epoch}/{.status.progress.totalEpochs} accuracy={.status.progress.metrics.accuracy} checkpoint={.status.lastCheckpoint.path} restarts={.status.restartCount}')
  if [ "$line" != "$last_line" ]; then
    echo "   $(date +%T) $line"
    last_line=$line
  fi
}
# Wait (showing the status) until `$1` holds; fail after $2 seconds with the operator's log named.
follow_until() {
  local condition=$1 timeout=$2 started
  started=$(date +%s)
  until eval "$condition"; do
    show_status
    if [ "$(field .status.phase)" = Failed ]; then
      echo "the job Failed; operator log: $state_dir/logs/operator.log" >&2
      "$BIN/tj" describe "$JOB" -n "$NS" >&2 || true
      exit 1
    fi
    if [ $(($(date +%s) - started)) -gt "$timeout" ]; then
      echo "timed out after ${timeout}s waiting for: $condition; operator log: $state_dir/logs/operator.log" >&2
      "$BIN/tj" describe "$JOB" -n "$NS" >&2 || true
      exit 1
    fi
    sleep 1
  done
  show_status
}
checkpoint_epoch() { field .status.lastCheckpoint.epoch; }

echo "== training: status as the operator writes it (progress and checkpoints come from worker 0 via the SDK)"
follow_until '[ "$(checkpoint_epoch)" -ge "$KILL_AFTER_CHECKPOINT" ] 2>/dev/null' 300

echo "== SIGKILL of worker $KILLED_WORKER's training process (as the OOM killer would do)"
"$BIN/python" -c "from tests.local_node import kill_worker; print('   killed pid(s)', *kill_worker('$NS', '$JOB', $KILLED_WORKER))"
follow_until '[ "$(field .status.restartCount)" -ge 1 ] 2>/dev/null' 120
echo "== the operator restarted the gang; it resumes from the newest checkpoint"
follow_until '[ "$(field .status.phase)" = Succeeded ]' 300

echo
"$BIN/tj" get -n "$NS"
echo
kubectl get events -n "$NS" --field-selector "involvedObject.uid=$(field .metadata.uid)" --sort-by=.lastTimestamp
echo
echo "== tj logs $JOB (worker 0, after the restart)"
worker_log=$("$BIN/tj" logs "$JOB" -n "$NS")
grep -E "collective check|resuming from" <<<"$worker_log" || true
grep -E " epoch [0-9]+/" <<<"$worker_log" | tail -n 3
grep -E "final:" <<<"$worker_log" || true
echo
accuracy=$(field .status.progress.metrics.accuracy)
percent=$(field .status.progress.percent)
checkpoint=$(field .status.lastCheckpoint.path)
restarts=$(field .status.restartCount)
echo "progress: $(field .status.progress)"
echo "lastCheckpoint: $(field .status.lastCheckpoint)"
if [ "${percent%.*}" != 100 ] || [ -z "$checkpoint" ] || [ "${restarts:-0}" -lt 1 ]; then
  echo "expected 100 % progress, a last checkpoint and a restart; got '$percent', '$checkpoint', '$restarts'" >&2
  exit 1
fi
if ! grep -q "resuming from" <<<"$worker_log"; then
  echo "worker 0's log after the restart does not say it resumed from a checkpoint" >&2
  exit 1
fi
cat <<MSG

The job Succeeded after a worker was killed: held-out accuracy $(printf '%.3f' "$accuracy") over $(field .status.progress.totalEpochs) epochs,
$restarts gang restart(s), resumed from a checkpoint. Try next:
  eval "\$($BIN/tj cluster env --name $CLUSTER)"
  $BIN/tj describe $JOB -n $NS
  $BIN/tj logs $JOB -n $NS --worker 1
  curl -s http://127.0.0.1:$metrics_port/metrics | grep ^trainingjob_
  tail -f $state_dir/logs/operator.log
  make demo-down CLUSTER=$CLUSTER              # stops the operator and the cluster
MSG
