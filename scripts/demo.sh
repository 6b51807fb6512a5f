#!/usr/bin/env bash
# `make demo`: local cluster, CRD and RBAC, the operator (as its ServiceAccount), one TrainingJob to Succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
CLUSTER=${CLUSTER:-default}
JOB=mnist-ddp
NS=demo

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
KUBECONFIG="$operator_kubeconfig" nohup "$BIN/tj" operator --all-namespaces --log-format json \
  >"$state_dir/logs/operator.log" 2>&1 &
echo $! >"$state_dir/operator.pid"

echo "== submitting examples/pytorch-simulated.yaml to namespace $NS"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
kubectl delete trainingjob "$JOB" -n "$NS" --ignore-not-found --wait=true >/dev/null
kubectl apply -n "$NS" -f examples/pytorch-simulated.yaml

deadline=$((SECONDS + 180))
phase=""
while [ $SECONDS -lt $deadline ]; do
  phase=$(kubectl get trainingjob "$JOB" -n "$NS" -o jsonpath='{.status.phase}')
  printf '   %s  phase=%-10s %s\n' "$(date +%T)" "${phase:-?}" \
    "$(kubectl get trainingjob "$JOB" -n "$NS" -o jsonpath='{.status.message}')"
  case "$phase" in Succeeded|Failed) break ;; esac
  sleep 3
done
echo
kubectl get trainingjob,pods -n "$NS" -o wide
echo
kubectl get events -n "$NS" --field-selector involvedObject.kind=TrainingJob --sort-by=.lastTimestamp
if [ "$phase" != "Succeeded" ]; then
  echo "demo job ended as '${phase:-unknown}'; operator log: $state_dir/logs/operator.log" >&2
  exit 1
fi
cat <<MSG

The job Succeeded. Try next:
  eval "\$($BIN/tj cluster env --name $CLUSTER)"
  kubectl explain trainingjob.spec
  kubectl get tj -A
  kubectl scale tj/$JOB -n $NS --replicas=2     # (on a running job: coordinated restart)
  tail -f $state_dir/logs/operator.log
  make demo-down                               # stops the operator and the cluster
MSG
