"""A small real inference server for the serving example, KServe V1 style, standard library plus numpy.

It loads the newest checkpoint (by the SDK's naming scheme, ``ckpt-<epoch>.npz``) from MODEL_DIR, the TrainingJob's
checkpoint volume the operator mounts read-only, or, when the operator sets CHECKPOINT_URI (checkpoints in S3), the
newest one there, which the SDK downloads into MODEL_DIR (boto3 is in examples/serving/requirements.txt); it answers:

- ``GET /v2/health/ready``: 200 once the model is loaded (the Deployment's readiness probe), 503 before;
- ``GET /v1/models/<MODEL_NAME>``: ``{"name": …, "ready": true, "checkpoint": …}``;
- ``POST /v1/models/<MODEL_NAME>:predict`` with ``{"instances": [[64 pixel values], …]}``:
  ``{"predictions": [digit, …]}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from trainingjob_sdk import latest_checkpoint


class Model:
    def __init__(self, path: Path) -> None:
        with np.load(path) as saved:
            self.weights, self.bias = saved["weights"], saved["bias"]
            self.mean, self.scale, self.classes = saved["mean"], saved["scale"], saved["classes"]
        self.path = path

    def predict(self, instances: Any) -> list[int]:
        features = np.asarray(instances, dtype=np.float64)
        if features.ndim != 2 or features.shape[1] != self.weights.shape[0]:
            raise ValueError(f"instances must be a list of {self.weights.shape[0]} numbers each")
        logits = ((features - self.mean) / self.scale) @ self.weights + self.bias
        return [int(self.classes[i]) for i in np.argmax(logits, axis=1)]


def wait_for_model(directory: Path, timeout: float = 300.0) -> Model:
    """The newest checkpoint in `directory`; waits a while for one (a volume may be mounted before it is filled)."""
    deadline = time.monotonic() + timeout
    in_s3 = bool(os.environ.get("CHECKPOINT_URI", "").strip())  # the model is in S3: downloaded into `directory`
    while True:
        found = latest_checkpoint() if in_s3 else latest_checkpoint(directory)
        if found is not None:
            return Model(found)
        if time.monotonic() > deadline:
            raise SystemExit(f"no checkpoint in {directory}")
        time.sleep(1)


def handler_for(name: str, model: Model) -> type[BaseHTTPRequestHandler]:
    predict_path, model_path = f"/v1/models/{name}:predict", f"/v1/models/{name}"

    class Handler(BaseHTTPRequestHandler):
        def answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v2/health/ready":
                self.answer(200, {"ready": True})
            elif self.path == model_path:
                self.answer(200, {"name": name, "ready": True, "checkpoint": model.path.name})
            else:
                self.answer(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            if self.path != predict_path:
                self.answer(404, {"error": f"no route {self.path}"})
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.answer(200, {"predictions": model.predict(request["instances"])})
            except (ValueError, KeyError, TypeError) as error:
                self.answer(400, {"error": str(error)})

        def log_message(self, format: str, *args: Any) -> None:
            print(f"{self.address_string()} {format % args}", flush=True)

    return Handler


def main() -> int:
    name = os.environ.get("MODEL_NAME", "model")
    directory = Path(os.environ.get("MODEL_DIR", "/model"))
    port = int(os.environ.get("PORT", "8080"))
    model = wait_for_model(directory)
    print(f"serving {name} from {model.path} on port {port}", flush=True)
    ThreadingHTTPServer(("0.0.0.0", port), handler_for(name, model)).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
