"""`tj operator` leaves out the sync clients Kopf would import for nothing (memory the operator never uses)."""

from __future__ import annotations

import ast
import subprocess
import sys

PROBE = """
import sys
from trainingjob.cli.operator import skip_unused_optional_clients
{prepare}
import trainingjob.operator.handlers
loaded = sorted(name for name in ("kubernetes", "kubernetes.client", "pykube") if sys.modules.get(name) is not None)
# VmRSS, not ru_maxrss: the high-water mark survives fork and exec, so it would be pytest's own.
rss_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
print(loaded, rss_kib // 1024)
"""


def run_probe(prepare: str) -> tuple[list[str], int]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(prepare=prepare)], capture_output=True, text=True, check=True
    )
    loaded, rss_mib = result.stdout.rsplit(" ", 1)
    return ast.literal_eval(loaded), int(rss_mib)


def test_the_operator_process_loads_kopf_without_the_sync_kubernetes_client() -> None:
    with_client, rss_with = run_probe("")
    without_client, rss_without = run_probe("skip_unused_optional_clients()")
    assert "kubernetes.client" in with_client, "the test environment has the sync client, so Kopf imports it"
    assert without_client == []
    assert rss_without < rss_with, (rss_without, rss_with)
