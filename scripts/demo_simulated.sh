# Sourced by scripts/demo.sh (DEMO_MODE=simulated, `make demo-simulated`): the kwok variant. A 4-worker PyTorch job
# lands on kwok's fake nodes, which run no code; `tj cluster simulate-training` plays worker 0's progress reports
# through the real progress endpoint, then lets kwok complete the pods.
JOB=mnist-ddp
echo "== submitting examples/pytorch-simulated.yaml to namespace $NS"
kubectl delete "$TJ" "$JOB" -n "$NS" --ignore-not-found --wait=true >/dev/null
"$BIN/tj" submit -n "$NS" -f examples/pytorch-simulated.yaml

echo "== a SIMULATED worker 0 reports progress through the real endpoint (kwok pods run no code)"
for _ in $(seq 1 60); do
  [ "$(kubectl get "$TJ" "$JOB" -n "$NS" -o jsonpath='{.status.phase}')" = Running ] && break
  sleep 1
done
"$BIN/tj" cluster simulate-training "$JOB" -n "$NS" --epochs 6 --seconds-per-epoch 2 >"$state_dir/logs/simulated-worker.log" 2>&1 &
simulator=$!

echo "== tj watch $JOB"
"$BIN/tj" watch "$JOB" -n "$NS" --timeout 180 &
watcher=$!
# The simulator completes the pods only after its reports were accepted and status.progress reached 100 %;
# when it fails the job would never finish, so stop watching and say why instead of waiting for the timeout.
simulator_status=0
wait "$simulator" || simulator_status=$?
if [ "$simulator_status" != 0 ]; then
  kill "$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
  echo >&2
  tail -n 5 "$state_dir/logs/simulated-worker.log" >&2
  echo "the simulated worker failed (exit $simulator_status): no progress was recorded, so the demo stops here" >&2
  exit 1
fi
status=0
wait "$watcher" || status=$?
phase=$(kubectl get "$TJ" "$JOB" -n "$NS" -o jsonpath='{.status.phase}')
percent=$(kubectl get "$TJ" "$JOB" -n "$NS" -o jsonpath='{.status.progress.percent}')
echo
"$BIN/tj" get -n "$NS"
kubectl get pods -n "$NS" -o wide
echo
kubectl get events -n "$NS" --field-selector involvedObject.kind=TrainingJob --sort-by=.lastTimestamp
echo
echo "progress: $(kubectl get "$TJ" "$JOB" -n "$NS" -o jsonpath='{.status.progress}')"
if [ "$status" != 0 ] || [ "$phase" != "Succeeded" ]; then
  echo "demo job ended as '${phase:-unknown}'; operator log: $state_dir/logs/operator.log" >&2
  exit 1
fi
# Succeeded alone is not the point of the demo: the reported progress must have reached the status too.
if [ "${percent%.*}" != 100 ]; then
  echo "status.progress.percent is '${percent:-unset}', not 100; operator log: $state_dir/logs/operator.log" >&2
  exit 1
fi
cat <<MSG

The job Succeeded. Try next:
  eval "\$($BIN/tj cluster env --name $CLUSTER)"
  kubectl explain trainingjob.spec
  $BIN/tj describe $JOB -n $NS
  curl -s http://127.0.0.1:$metrics_port/metrics | grep ^trainingjob_
  kubectl scale tj/$JOB -n $NS --replicas=2     # (on a running job: coordinated restart)
  tail -f $state_dir/logs/operator.log
  make demo-down CLUSTER=$CLUSTER              # stops the operator and the cluster
MSG
