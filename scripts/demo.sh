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

echo "== starting the operator as ServiceAccount trainingjob-system/trainingjob-operator (tj cluster operator)"
# A token of the ServiceAccount, the progress endpoint on the pod network's gateway (where the local nodes' workers
# reach this machine), metrics and webhooks on loopback, a wait for /readyz (src/trainingjob/cluster/local_operator.py).
"$BIN/tj" cluster operator --name "$CLUSTER" --restart | sed 's/^/   /'
metrics_port=$("$BIN/python" -c 'import sys; from trainingjob.cluster.control_plane import ClusterState
print(ClusterState.load(sys.argv[1]).ports["operator-metrics"])' "$CLUSTER")

kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
# The parts below read BIN, CLUSTER, NS, TJ, state_dir and metrics_port.
# shellcheck source=/dev/null
. "scripts/demo_$DEMO_MODE.sh"
