#!/usr/bin/env bash
# `make demo`: local cluster, CRD and RBAC, the operator (as its ServiceAccount), then a real distributed training
# run on the local process nodes (scripts/demo_real.sh: XGBoost on 3 workers, one killed mid-run, resumed from its
# checkpoint). `make demo-simulated` (DEMO_MODE=simulated) runs the kwok variant instead: no code runs, a simulated
# worker 0 reports progress through the real endpoint (scripts/demo_simulated.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
CLUSTER=${CLUSTER:-default}
DEMO_MODE=${DEMO_MODE:-real}
NS=demo
case "$DEMO_MODE" in
  real | simulated) ;;
  *) echo "DEMO_MODE must be real or simulated, not '$DEMO_MODE'" >&2; exit 2 ;;
esac
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
# Workers on the local process nodes reach this machine at the pod network's gateway (an address of the host too),
# so the progress endpoint listens there; 127.0.0.1 when the nodes run without their own network (no root).
progress_host=$("$BIN/python" -c 'import sys; from trainingjob.cluster.control_plane import ClusterState
state = ClusterState.load(sys.argv[1]); print(state.pod_network.gateway if state and state.pod_network else "127.0.0.1")' "$CLUSTER")
# Outside the cluster the operator listens on loopback (progress: the gateway); in a cluster these are the Service's
# ports. It points the CRD's conversion and the admission webhooks at https://127.0.0.1:$webhook_port itself.
KUBECONFIG="$operator_kubeconfig" nohup "$BIN/tj" operator --all-namespaces --log-format json \
  --progress-port "$progress_port" --progress-bind "$progress_host" --progress-url "https://$progress_host:$progress_port" \
  --metrics-port "$metrics_port" --metrics-bind 127.0.0.1 --webhook-port "$webhook_port" \
  >"$state_dir/logs/operator.log" 2>&1 &
echo $! >"$state_dir/operator.pid"
for _ in $(seq 1 60); do
  curl -fs "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fs "http://127.0.0.1:$metrics_port/readyz" >/dev/null || { echo "operator not ready; see $state_dir/logs/operator.log" >&2; exit 1; }

kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
# The parts below read BIN, CLUSTER, NS, TJ, state_dir and metrics_port.
# shellcheck source=/dev/null
. "scripts/demo_$DEMO_MODE.sh"
