"""`tj operator` loads neither Kopf nor the sync clients (memory the operator never uses): its informers read raw
JSON through kubernetes_asyncio's ApiClient."""

from __future__ import annotations

import ast
import subprocess
import sys

PROBE = """
import sys
import trainingjob.cli
import trainingjob.operator.runner
import trainingjob.operator.process
unwanted = ("kopf", "kubernetes", "kubernetes.client", "pykube", "optuna", "numpy", "sqlalchemy")
print(sorted(name for name in unwanted if sys.modules.get(name)))
"""


def test_the_operator_process_loads_neither_kopf_nor_the_sync_kubernetes_client_nor_optuna() -> None:
    """Optuna (numpy, an OpenBLAS thread, SQLAlchemy: ~16 MiB) loads on the first TrainingSweep, not at start
    (operator/trainingsweep/engine.py)."""
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert ast.literal_eval(result.stdout.strip()) == []


LAZY_PROBE = """
import asyncio, sys
import trainingjob.cli  # what `python -m trainingjob.cli operator` runs first: every command module, then main()
import trainingjob.operator.process
from kubernetes_asyncio import client
before = sum(1 for name in sys.modules if name.startswith("kubernetes_asyncio.client.models."))

async def main():
    api = client.ApiClient()
    lease = api._ApiClient__deserialize(
        {"metadata": {"name": "x"}, "spec": {"holderIdentity": "me"}}, "V1Lease"
    )
    body = api.sanitize_for_serialization(client.V1ObjectMeta(name="a", labels={"k": "v"}))
    await api.close()
    return lease.spec.holder_identity, body, client.CoreV1Api.__name__, client.ApiException.__name__

print(repr((before, asyncio.run(main()))))
"""


def test_the_operator_loads_client_classes_on_first_use_and_every_name_still_resolves() -> None:
    """kube/lazy_client.py: ~850 generated modules stay unloaded until used, although the CLI's command modules
    import the client (cli/jobs.py -> queueing/visibility.py; installed in the operator command alone, the lazy
    loader came too late and cost the operator ~25 MiB at 10 x 8); deserialising a Lease by its class
    name (as the client does) and serialising a model still work."""
    result = subprocess.run([sys.executable, "-c", LAZY_PROBE], capture_output=True, text=True, check=True)
    loaded_models, outcome = ast.literal_eval(result.stdout.strip())
    assert loaded_models < 20, loaded_models
    assert outcome == ("me", {"labels": {"k": "v"}, "name": "a"}, "CoreV1Api", "ApiException")
