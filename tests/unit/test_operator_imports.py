"""`tj operator` loads neither Kopf nor the sync clients (memory the operator never uses): its informers read raw
JSON through kubernetes_asyncio's ApiClient."""

from __future__ import annotations

import ast
import subprocess
import sys

PROBE = """
import sys
import trainingjob.cli.operator
import trainingjob.operator.runner
import trainingjob.operator.process
print(sorted(name for name in ("kopf", "kubernetes", "kubernetes.client", "pykube") if sys.modules.get(name)))
"""


def test_the_operator_process_loads_neither_kopf_nor_the_sync_kubernetes_client() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert ast.literal_eval(result.stdout.strip()) == []
