"""An LLMModel served from checkpoints in S3 (spec.source.uri) on the local cluster's real S3 server: the operator
gives the server CHECKPOINT_URI, an emptyDir to download into and the Secret's credentials; the serving example's
model server downloads the newest complete checkpoint with trainingjob.sdk and answers with exactly its weights.

The checkpoints are written here in numpy's .npz format by hand (the test environment has no numpy), with weights
that make each prediction a known function of the input, so a wrong or stale checkpoint cannot pass."""

from __future__ import annotations

import copy
import io
import json
import struct
import urllib.request
import zipfile
from typing import Any

import pytest

from tests.integration.test_serving_handoff import PLACEMENT, post
from tests.kube import Kube, wait_until
from tests.s3_support import s3_client
from trainingjob.api import constants as k
from trainingjob.cluster.control_plane import ClusterState
from trainingjob.cluster.s3 import run

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

PIXELS, CLASSES = 64, 10


def npy(values: list[float] | list[int], shape: tuple[int, ...], kind: str) -> bytes:
    """One array in numpy's .npy format, version 1.0: little-endian float64 ('<f8') or int64 ('<i8'), C order."""
    header = f"{{'descr': '<{kind}8', 'fortran_order': False, 'shape': {shape!r}, }}"
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    data = struct.pack(f"<{len(values)}{'d' if kind == 'f' else 'q'}", *values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def checkpoint(pixel_of_class: list[int]) -> bytes:
    """A softmax-regression checkpoint whose class c scores pixel pixel_of_class[c]: the prediction is the class
    whose pixel is brightest."""
    weights = [0.0] * (PIXELS * CLASSES)
    for label, pixel in enumerate(pixel_of_class):
        weights[pixel * CLASSES + label] = 1.0
    arrays = {
        "weights": npy(weights, (PIXELS, CLASSES), "f"),
        "bias": npy([0.0] * CLASSES, (CLASSES,), "f"),
        "mean": npy([0.0] * PIXELS, (PIXELS,), "f"),
        "scale": npy([1.0] * PIXELS, (PIXELS,), "f"),
        "classes": npy(list(range(CLASSES)), (CLASSES,), "i"),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in arrays.items():
            archive.writestr(f"{name}.npy", data)
    return buffer.getvalue()


def model_from_s3(uri: str) -> dict[str, Any]:
    source = {"uri": uri, "secretName": "s3-credentials"}
    spec = {"modelName": "digits", "replicas": 1, "source": source, "scheduling": copy.deepcopy(PLACEMENT)}
    return {"apiVersion": k.MODEL_API_VERSION, "kind": k.MODEL_KIND, "metadata": {"name": "digits-s3"}, "spec": spec}


def test_a_model_in_s3_is_downloaded_and_served_from_its_newest_checkpoint(
    kube: Kube, namespace: str, s3_server: ClusterState, s3_credentials: dict[str, str]
) -> None:
    run.apply_secret(s3_server, namespace, "s3-credentials")
    s3 = s3_client(s3_credentials)
    prefix = f"{namespace}/digits"
    s3.put_object(Bucket="models", Key=f"{prefix}/ckpt-00000001.npz", Body=checkpoint(list(range(10))))
    s3.put_object(Bucket="models", Key=f"{prefix}/ckpt-00000002.npz", Body=checkpoint(list(range(20, 30))))
    kube.custom.create_namespaced_custom_object(
        k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, model_from_s3(f"s3://models/{prefix}")
    )
    selector = f"{k.LABEL_MODEL}=digits-s3"

    def running_pod() -> Any:
        pods = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
        return next((p for p in pods if p.status.phase == "Running" and p.status.pod_ip), None)

    pod = wait_until(running_pod, 180, "a running model server")
    [server] = pod.spec.containers
    assert server.env_from[0].secret_ref.name == "s3-credentials"
    env = {e.name: e.value for e in server.env}
    assert (env["CHECKPOINT_URI"], env["CHECKPOINT_DIR"]) == (f"s3://models/{prefix}", k.MODEL_MOUNT_PATH)
    base = f"http://{pod.status.pod_ip}:{k.DEFAULT_SERVING_PORT}/v1/models/digits"
    instances = [[1.0 if pixel == 20 + label else 0.0 for pixel in range(PIXELS)] for label in range(CLASSES)]
    answer = wait_until(lambda: post(f"{base}:predict", {"instances": instances}), 180, "a prediction")
    assert answer["predictions"] == list(range(CLASSES)), "the newest checkpoint's weights, not the older one's"
    with urllib.request.urlopen(base, timeout=5) as response:
        assert json.loads(response.read()) == {"name": "digits", "ready": True, "checkpoint": "ckpt-00000002.npz"}
