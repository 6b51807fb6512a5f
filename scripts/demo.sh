#!/usr/bin/env bash
# `make demo`: local cluster, CRD and RBAC, the operator (as its ServiceAccount), one TrainingJob to Succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
CLUSTER=${CLUSTER:-default}
JOB=mnist-ddp
NS=demo
# The example is a v1alpha1 job, read back in that version (kubectl's default is v1, where phase is status.state).
TJ=trainingjobs.v1alpha1.ml.example.com

"$BIN/tj" cluster up --name "$CLUSTER" >/dev/null
eval "$("$BIN/tj" cluster env --name "$CLUSTER")"
state_dir=$(dirname "$KUBECONFIG")

echo "== installing the TrainingJob CRD and the operator's RBAC"
kubectl apply -f deploy/crd/ -f deploy/rbac/ >/dev/null
kubectl wait --for=condition=Established crd/trainingjobs.ml.example.com --timeout=60s >/dev/null

echo "== starting the operator as ServiceAccount trainingjob-system/trainingjob-operator"
if [ -f "$state_dir/operator.pid" ] && kill -0 "$(cat "$state_dir/operator.pid")" 2>/dev/null; then
  kill "$(cat "$state_dir/operator.pid")" && sleep 1
fi
token=$(kubectl create token trainingjob-operator -n trainingjob-system --duration=24h)
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
operator_kubeconfig="$state_dir/operator.kubeconfig"
KUBECONFIG="$operator_kubeconfig" kubectl config set-cluster local --server="$server" --certificate-authority="$ca" --embed-certs=true >/dev/null
KUBECONFIG="$operator_kubeconfig" kubectl config set-credentials operator --token="$token" >/dev/null
KUBECONFIG="$operator_kubeconfig" kubectl config set-context operator --cluster=local --user=operator >/dev/null
KUBECONFIG="$operator_kubeconfig" kubectl config use-context operator >/dev/null
free_port() { "$BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
progress_port=$(free_port)
metrics_port=$(free_port)
webhook_port=$(free_port)
# Outside the cluster the operator listens on loopback; in a cluster these are the Service's ports. It points the
# CRD's conversion and the admission webhooks at https://127.0.0.1:$webhook_port itself.
KUBECONFIG="$operator_kubeconfig" nohup "$BIN/tj" operator --all-namespaces --log-format json \
  --progress-port "$progress_port" --progress-bind 127.0.0.1 --progress-url "https://127.0.0.1:$progress_port" \
  --metrics-port "$metrics_port" --metrics-bind 127.0.0.1 --webhook-port "$webhook_port" \
  >"$state_dir/logs/operator.log" 2>&1 &
echo $! >"$state_dir/operator.pid"
for _ in $(seq 1 60); do
  curl -fs "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fs "http://127.0.0.1:$metrics_port/readyz" >/dev/null || { echo "operator not ready; see $state_dir/logs/operator.log" >&2; exit 1; }

echo "== submitting examples/pytorch-simulated.yaml to namespace $NS"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
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
  make demo-down                               # stops the operator and the cluster
MSG
