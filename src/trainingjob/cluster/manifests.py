"""Objects every local cluster starts with: fake GPU nodes for kwok, a default StorageClass, RBAC for local nodes."""

from __future__ import annotations

from trainingjob.node.devices.exporter import EXPORTER_NAMESPACE, EXPORTER_PORT, EXPORTER_SERVICE, PORT_NAME

GPUS_PER_NODE = 8
NODE_NAME_PREFIX = "tj-node-"
ACCELERATOR_LABEL = "accelerator"
ACCELERATOR_VALUE = "nvidia-gpu"
STORAGE_CLASS = "standard"


def fake_node(index: int) -> dict:
    """A node kwok manages (annotation) that advertises 8 GPUs, like a typical training machine."""
    name = f"{NODE_NAME_PREFIX}{index}"
    capacity = {
        "cpu": "32",
        "memory": "256Gi",
        "pods": "110",
        "ephemeral-storage": "1Ti",
        "nvidia.com/gpu": str(GPUS_PER_NODE),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                ACCELERATOR_LABEL: ACCELERATOR_VALUE,
                "nvidia.com/gpu.present": "true",
                "node.kubernetes.io/instance-type": "sim-8x-gpu",
                # Local process nodes say `process` here (and carry a taint; see node/config.py).
                "ml.example.com/node-runtime": "kwok",
            },
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def default_storage_class() -> dict:
    """Backed by kube-controller-manager's hostPath provisioner: PVCs bind without any CSI driver."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/host-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def node_access_objects() -> list[dict]:
    """RBAC the local process nodes need beyond what the Node authorizer grants a kubelet.

    - The API server's kubelet-client identity may use nodes' log endpoints (the built-in
      system:kubelet-api-admin role, as kubeadm binds it).
    - Each node serves its pods' cluster DNS, so it watches Services and EndpointSlices, as CoreDNS does.
    """
    dns_role = "trainingjob:local-node-dns"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "trainingjob:apiserver-kubelet-client"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:kubelet-api-admin",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kube-apiserver-kubelet-client"}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": dns_role},
            "rules": [
                {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": dns_role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": dns_role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
        },
    ]


def gpu_exporter_objects() -> list[dict]:
    """Where GPU metrics are found, as on a cluster with NVIDIA's GPU operator: the Service nvidia-dcgm-exporter
    in the namespace gpu-operator. It selects no pods: each local process node with GPUs keeps an EndpointSlice of
    it pointing at its own exporter (node/devices/exporter.py), which the nodes' group may write there."""
    role = "trainingjob:local-node-gpu-exporter"
    namespace = EXPORTER_NAMESPACE
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": EXPORTER_SERVICE, "namespace": namespace, "labels": {"app": EXPORTER_SERVICE}},
            "spec": {"clusterIP": "None", "ports": [{"name": PORT_NAME, "port": EXPORTER_PORT, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "create", "patch", "update"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
        },
    ]


def bootstrap_objects(node_count: int) -> list[dict]:
    return [
        default_storage_class(),
        *node_access_objects(),
        *gpu_exporter_objects(),
        *(fake_node(i) for i in range(node_count)),
    ]
