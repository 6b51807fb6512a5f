"""Start Kueue on a running local cluster (install its manifests, then its process) and stop it.

Idempotent like `tj cluster up`: a Kueue that runs and answers is left alone; one that stopped (or was killed by a
test) is started again on the same ports, with its manifests re-applied, and takes over its Workloads from the API
server's state, as a restarted Kueue pod would.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml

from trainingjob.cluster import pki
from trainingjob.cluster.build import KUEUE
from trainingjob.cluster.control_plane import ClusterState, component_running, kubectl
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.kubeconfig import write_kubeconfig
from trainingjob.cluster.kueue import settings
from trainingjob.cluster.kueue.build import MANIFESTS, ensure_kueue
from trainingjob.cluster.kueue.install import install_objects
from trainingjob.cluster.kueue.settings import KueueLayout
from trainingjob.cluster.process import free_port, probe, start, stop, wait_healthy
from trainingjob.node.runtime import syscalls as sc

NAME = "kueue"
STARTUP_TIMEOUT = 120
APISERVICE = "v1beta2.visibility.kueue.x-k8s.io"


def layout_of(state: ClusterState) -> KueueLayout:
    return KueueLayout(state.root, state.layout.pki)


def is_healthy(state: ClusterState) -> bool:
    if NAME not in state.addons or not component_running(state, NAME):
        return False
    return probe(settings.health_check(state.ports), state.layout.pki / "ca.crt")[0]


def ensure_running(state: ClusterState, say: Callable[[str], None] = print) -> None:
    """Build Kueue on first use, install its manifests and start it; return once its webhooks and visibility API
    answer."""
    if is_healthy(state):
        return
    directory = ensure_kueue(say)
    check_mount_points()
    for port in settings.PORTS:
        state.ports.setdefault(port, free_port())
    layout = layout_of(state)
    write_files(state, layout)
    install(state, directory / MANIFESTS)
    state.binaries[NAME] = str(directory / NAME)
    state.versions[NAME] = KUEUE.version
    state.addons[NAME] = settings.health_check(state.ports).url
    start_process(state, layout)
    state.save()
    kubectl(state, "wait", "--for=condition=Available", f"apiservice/{APISERVICE}", f"--timeout={STARTUP_TIMEOUT}s")
    say(f"  kueue {KUEUE.version} ready")


def stop_process(state: ClusterState) -> None:
    """Stop Kueue's process (its objects stay, as when its pod is deleted)."""
    pid = state.pids.get(NAME)
    if pid is not None:
        stop(pid, state.binaries.get(NAME))


def check_mount_points() -> None:
    """The fixed certificate paths exist as empty mount points (see settings.py); making them needs root."""
    if os.geteuid() != 0:
        raise ClusterError(
            "Kueue reads its certificates from fixed paths (/visibility, /etc/kueue/metrics/certs); running it "
            "beside other clusters needs a private mount namespace for each, which needs root"
        )
    for target in settings.FIXED_CERT_PATHS.values():
        target.mkdir(parents=True, exist_ok=True)


def write_files(state: ClusterState, layout: KueueLayout) -> None:
    """Certificates from the cluster CA, Kueue's kubeconfig and its configuration."""
    ca = pki.load_ca(layout.pki)
    serving, client = settings.cert_specs()
    for spec in (serving, client):
        pki.issue_certificate(layout.pki, spec, ca)
    for use in settings.FIXED_CERT_PATHS.keys() | {"webhook"}:
        directory = layout.cert_dir(use)
        directory.mkdir(parents=True, exist_ok=True)
        for suffix in ("crt", "key"):
            target = directory / f"tls.{suffix}"
            target.write_bytes((layout.pki / f"{serving.file_stem}.{suffix}").read_bytes())
            target.chmod(0o600)
    write_kubeconfig(layout.kubeconfig, f"tj-{state.name}", state.layout.apiserver_url, layout.pki, client.file_stem)
    layout.config.write_text(yaml.safe_dump(settings.configuration(layout, state.ports), sort_keys=False))


def install(state: ClusterState, manifests: Path) -> None:
    """Apply Kueue's objects (server-side: its CRDs exceed the client-side annotation limit), then wait until its
    CRDs are served."""
    bundle = base64.b64encode((state.layout.pki / "ca.crt").read_bytes()).decode()
    objects = install_objects(
        yaml.safe_load_all(manifests.read_text()),
        webhook_url=f"https://127.0.0.1:{state.ports['kueue-webhook']}",
        visibility_port=state.ports["kueue-visibility"],
        ca_bundle=bundle,
    )
    documents = "\n---\n".join(yaml.safe_dump(o) for o in objects)
    kubectl(
        state,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=tj-cluster",
        "-f",
        "-",
        input_text=documents,
    )
    crds = [f"crd/{o['metadata']['name']}" for o in objects if o["kind"] == "CustomResourceDefinition"]
    kubectl(state, "wait", "--for=condition=Established", *crds, "--timeout=60s")


def private_mounts(binds: dict[Path, Path]) -> Callable[[], None]:
    """Runs in Kueue's process before exec: a mount namespace of its own where this cluster's certificate
    directories are bound at the fixed paths (nothing on the machine's own paths changes)."""
    pairs = [(str(source), str(target)) for source, target in binds.items()]

    def enter() -> None:
        sc.unshare(sc.CLONE_NEWNS)
        sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
        for source, target in pairs:
            sc.mount(source, target, None, sc.MS_BIND)

    return enter


def start_process(state: ClusterState, layout: KueueLayout) -> None:
    binary = state.binaries[NAME]
    command = settings.command(Path(binary), layout)
    try:
        state.pids[NAME] = start(NAME, command, layout.log, state.root, preexec=private_mounts(layout.bind_mounts()))
    except subprocess.SubprocessError as error:
        raise ClusterError(f"cannot start Kueue in a mount namespace of its own: {error}") from error
    state.save()
    check = settings.health_check(state.ports)
    wait_healthy(NAME, state.pids[NAME], binary, check, state.layout.pki / "ca.crt", layout.log, STARTUP_TIMEOUT)
