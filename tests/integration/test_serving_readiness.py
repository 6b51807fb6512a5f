"""The LLMModel's model server is gated by its readiness probe, run by the local process node: while the server
waits for a model in its volume the pod runs but is not Ready, the Service's EndpointSlice holds its address as not
ready and the model is not Available; once a checkpoint lands in the volume, the server loads it, the probe
(`GET /v2/health/ready`) passes, and the endpoint, the pod and the model all turn ready."""

from __future__ import annotations

import copy
import io
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, endpoint_ready
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

PLACEMENT = {"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]}


def npy(values: list[float] | list[int], shape: tuple[int, ...], descr: str) -> bytes:
    """One array in NumPy's .npy format (version 1.0), written without NumPy (the test's venv has none)."""
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    padding = 64 - (10 + len(header) + 1) % 64
    header += b" " * padding + b"\n"
    code = "d" if descr == "<f8" else "q"
    return (
        b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + struct.pack(f"<{len(values)}{code}", *values)
    )


def write_checkpoint(directory: Path) -> None:
    """A model the example's server can load (examples/serving/model_server.py): 64 features, 10 classes."""
    arrays = {
        "weights": npy([0.0] * 640, (64, 10), "<f8"),
        "bias": npy([0.0] * 10, (10,), "<f8"),
        "mean": npy([0.0] * 64, (64,), "<f8"),
        "scale": npy([1.0] * 64, (64,), "<f8"),
        "classes": npy(list(range(10)), (10,), "<i8"),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in arrays.items():
            archive.writestr(f"{name}.npy", data)
    temporary = directory / ".ckpt-00000001.npz.tmp"
    temporary.write_bytes(buffer.getvalue())
    temporary.chmod(0o644)
    temporary.rename(directory / "ckpt-00000001.npz")


def model_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    body = kube.custom.get_namespaced_custom_object(k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, name)
    return body.get("status") or {}


def test_the_model_servers_readiness_probe_gates_its_endpoints(kube: Kube, namespace: str) -> None:
    claim = {
        "metadata": {"name": "model"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Mi"}}},
    }
    kube.core.create_namespaced_persistent_volume_claim(namespace, claim)
    model = {
        "apiVersion": k.MODEL_API_VERSION,
        "kind": k.MODEL_KIND,
        "metadata": {"name": "gated"},
        "spec": {
            "modelName": "digits",
            "replicas": 1,
            "source": {"claimName": "model"},
            "scheduling": copy.deepcopy(PLACEMENT),
        },
    }
    kube.custom.create_namespaced_custom_object(k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, model)
    selector = f"{k.LABEL_MODEL}=gated"

    def running_pod() -> Any:
        pods = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
        return next((p for p in pods if p.status.phase == "Running"), None)

    pod = wait_until(running_pod, 300, "a running model server (its venv may be built first)")
    wait_until(lambda: endpoint_ready(kube, namespace, "gated") is False, 60, "a not-ready endpoint")
    pod = kube.core.read_namespaced_pod(pod.metadata.name, namespace)
    ready = next(c for c in pod.status.conditions if c.type == "Ready")
    assert ready.status == "False", ready
    status = model_status(kube, namespace, "gated")
    assert status.get("readyReplicas", 0) == 0 and status.get("availableReplicas", 0) == 0, status

    bound = kube.core.read_namespaced_persistent_volume_claim("model", namespace)
    volume = Path(kube.core.read_persistent_volume(bound.spec.volume_name).spec.host_path.path)
    write_checkpoint(volume)
    wait_until(lambda: endpoint_ready(kube, namespace, "gated") is True, 120, "the endpoint to become ready")
    available = wait_until(
        lambda: (s := model_status(kube, namespace, "gated")).get("availableReplicas") == 1 and s,
        60,
        "the model to be available",
    )
    assert available["readyReplicas"] == 1
