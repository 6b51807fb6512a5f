"""Start SeaweedFS's S3 server on a running local cluster, stop it, and give a namespace its credentials.

Idempotent like `tj cluster up`: a server that runs and answers is left alone; one that stopped is started again on
the same ports, data directory and credentials, so what it stored is still there (checkpoints outlive a restart of
the server, as they outlive a job).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from trainingjob.cluster.build import SEAWEEDFS, ensure_seaweedfs
from trainingjob.cluster.control_plane import ClusterState, component_running, kubectl
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.process import free_port, probe, start, wait_healthy
from trainingjob.cluster.s3 import settings
from trainingjob.cluster.s3.settings import NAME, Credentials, S3Layout

STARTUP_TIMEOUT = 120
BUCKETS_TIMEOUT = 30.0


def address(state: ClusterState) -> str:
    """Where the server listens: the pod network's gateway (pods reach the host there), else 127.0.0.1."""
    network = state.pod_network
    return network.gateway if network is not None else "127.0.0.1"


def is_healthy(state: ClusterState) -> bool:
    if NAME not in state.addons or not component_running(state, NAME):
        return False
    return probe(settings.health_check(address(state), state.ports), state.layout.pki / "ca.crt")[0]


def credentials(state: ClusterState) -> Credentials:
    """The cluster's S3 credentials, made on first use and kept (0600) beside its data."""
    layout = S3Layout(state.root)
    if layout.credentials.exists():
        return Credentials.from_json(layout.credentials.read_text())
    made = Credentials.generate()
    layout.root.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(layout.credentials, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(made.to_json())
    return made


def ensure_running(state: ClusterState, say: Callable[[str], None] = print) -> None:
    """Build SeaweedFS on first use and start its S3 server; return once it answers."""
    if is_healthy(state):
        return
    binary = ensure_seaweedfs(say)
    for port in settings.PORTS:
        state.ports.setdefault(port, free_port())
    layout = S3Layout(state.root)
    layout.data.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(layout.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(settings.s3_config(credentials(state)), handle)
    state.binaries[NAME] = str(binary)
    state.versions[NAME] = SEAWEEDFS.version
    check = settings.health_check(address(state), state.ports)
    state.addons[NAME] = check.url
    command = settings.command(binary, layout, address(state), state.ports)
    state.pids[NAME] = start(NAME, command, layout.log, state.root)
    state.save()
    wait_healthy(NAME, state.pids[NAME], str(binary), check, state.layout.pki / "ca.crt", layout.log, STARTUP_TIMEOUT)
    wait_for_buckets(address(state), state.ports, layout.log)
    say(f"  s3 (SeaweedFS {SEAWEEDFS.version}) ready at {settings.endpoint(address(state), state.ports)}")


def wait_for_buckets(host: str, ports: dict[str, int], log: Path, timeout: float = BUCKETS_TIMEOUT) -> None:
    """SeaweedFS answers its health check before the buckets of its -bucket= flag exist (a job's first checkpoint
    in that window got NoSuchBucket; CI saw an empty ListBuckets once): return once the filer lists them all."""
    deadline, listed = time.monotonic() + timeout, set()
    request = urllib.request.Request(settings.buckets_url(host, ports), headers={"Accept": "application/json"})
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                listed = settings.bucket_names(json.load(response))
        except (OSError, ValueError):
            listed = set()
        if set(settings.BUCKETS) <= listed:
            return
        time.sleep(0.25)
    missing = ", ".join(sorted(set(settings.BUCKETS) - listed))
    raise ClusterError(f"SeaweedFS did not create the buckets {missing} within {timeout:.0f} s; see {log}")


def secret_data(state: ClusterState) -> dict[str, str]:
    """The cluster's S3 credentials and endpoint, under the names boto3 reads."""
    if NAME not in state.addons:
        raise ClusterError(f"cluster {state.name!r} runs no S3 server; start it with `tj cluster up --with-s3`")
    return settings.secret_data(credentials(state), address(state), state.ports)


def secret_manifest(state: ClusterState, namespace: str, name: str) -> dict:
    """A Secret a job names in checkpoint.storage.secretName: the cluster's S3 credentials and endpoint."""
    data = secret_data(state)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "stringData": data,
    }


def apply_secret(state: ClusterState, namespace: str, name: str) -> None:
    kubectl(state, "apply", "-f", "-", input_text=json.dumps(secret_manifest(state, namespace, name)))
