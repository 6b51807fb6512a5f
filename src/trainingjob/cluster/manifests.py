"""Objects every local cluster starts with: fake GPU nodes for kwok and a default StorageClass."""

from __future__ import annotations

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


def bootstrap_objects(node_count: int) -> list[dict]:
    return [default_storage_class(), *(fake_node(i) for i in range(node_count))]
