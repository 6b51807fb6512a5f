"""TensorFlow: TF_CONFIG for MultiWorkerMirroredStrategy (every pod is a `worker`; worker 0 acts as chief)."""

from __future__ import annotations

import json

from trainingjob.frameworks.base import NoConfigFiles, WorkerContext


class TensorFlow(NoConfigFiles):
    name = "tensorflow"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        tf_config = {
            "cluster": {"worker": [f"{host}:{context.port}" for host in context.hosts]},
            "task": {"type": "worker", "index": context.index},
            "environment": "cloud",
        }
        return {"TF_CONFIG": json.dumps(tf_config, separators=(",", ":"))}
