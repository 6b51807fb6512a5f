"""A real local Kubernetes control plane built from pinned upstream Go modules.

Why: these machines have no container engine, no prebuilt Kubernetes binaries and no internet, yet every
behaviour of the operator must be proven against a real API server. So we build etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubectl and kwok from source once per machine and run them on loopback.
"""
