"""`tj cluster operator`: the operator of a local cluster, started with the flags a local cluster needs.

Following the README by hand used to end before the first job: the operator had to be started with a progress
endpoint the workers on the local process nodes can reach, whose address (the pod network's gateway) was only in
the cluster's state file, and with a kubeconfig of its own ServiceAccount. This does what `make demo` does, as one
command: a token of ServiceAccount trainingjob-system/trainingjob-operator (deploy/rbac/, so it acts with the
grants we ship, not as cluster-admin), free local ports for the progress endpoint (bound on the gateway), metrics
and webhooks (the operator points the CRD's conversion and the admission webhooks at itself), a log file in the
cluster's state directory, and a wait for /readyz. The process is recorded in the cluster's state as an addon, so
`tj cluster status` shows it and `tj cluster down` stops it too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainingjob import __version__
from trainingjob.cluster.components import HealthCheck
from trainingjob.cluster.control_plane import OPERATOR, ClusterState, command_marker, component_running, kubectl
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.process import free_port, start, stop, wait_healthy
from trainingjob.cluster.webhook_client import operator_flags

NAMESPACE = "trainingjob-system"
SERVICE_ACCOUNT = "trainingjob-operator"
CRD = "trainingjobs.ml.example.com"
# Bound by the API server's limit on requested token lifetimes; `tj cluster operator --restart` gets a new one.
TOKEN_DURATION = "24h"
READY_TIMEOUT = 90.0
INSTALL_FIRST = "install the CRDs and the operator's RBAC first: kubectl apply -f deploy/crd/ -f deploy/rbac/"
PORT_NAMES = {"progress": "operator-progress", "metrics": "operator-metrics", "webhook": "operator-webhook"}


@dataclass(frozen=True)
class OperatorPorts:
    progress: int
    metrics: int
    webhook: int


def progress_host(state: ClusterState) -> str:
    """Where workers on the local process nodes reach this machine: the pod network's gateway (an address of the
    host too), or loopback when the nodes run without their own network (no root)."""
    network = state.pod_network
    return network.gateway if network else "127.0.0.1"


def operator_command(state: ClusterState, ports: OperatorPorts, extra_args: Sequence[str] = ()) -> list[str]:
    """`tj operator` for this cluster: every namespace, JSON logs, progress on the gateway, metrics and webhooks on
    loopback (admission answered for this API server's client certificate only), and this cluster's identity in its
    Lease (also how `down` tells its pid from another process's)."""
    host = progress_host(state)
    return [
        sys.executable,
        "-m",
        "trainingjob.cli",
        "operator",
        "--all-namespaces",
        "--log-format=json",
        f"--progress-port={ports.progress}",
        f"--progress-bind={host}",
        f"--progress-url=https://{host}:{ports.progress}",
        f"--metrics-port={ports.metrics}",
        "--metrics-bind=127.0.0.1",
        f"--webhook-port={ports.webhook}",
        *operator_flags(state.layout),
        f"--leader-election-identity={command_marker(state, OPERATOR)}",
        *extra_args,
    ]


def token_kubeconfig(state: ClusterState, token: str) -> dict:
    """A kubeconfig that authenticates with the ServiceAccount's token against this cluster's API server."""
    cluster, user = f"tj-{state.name}", f"{NAMESPACE}:{SERVICE_ACCOUNT}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": state.layout.apiserver_url,
                    "certificate-authority": str(state.layout.pki / "ca.crt"),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": cluster, "user": user}}],
        "current-context": "operator",
    }


def operator_ports(state: ClusterState) -> OperatorPorts | None:
    if not all(name in state.ports for name in PORT_NAMES.values()):
        return None
    return OperatorPorts(**{field: state.ports[name] for field, name in PORT_NAMES.items()})


def log_path(state: ClusterState) -> Path:
    return state.layout.logs / "operator.log"


def is_running(state: ClusterState) -> bool:
    return OPERATOR in state.pids and component_running(state, OPERATOR)


def require_installed(state: ClusterState) -> None:
    """The CRD and the ServiceAccount must exist: the token is the ServiceAccount's, and an operator without the
    CRD would only wait for it."""
    try:
        kubectl(state, "get", "crd", CRD, "-o", "name")
        kubectl(state, "get", "serviceaccount", SERVICE_ACCOUNT, "-n", NAMESPACE, "-o", "name")
    except ClusterError as error:
        raise ClusterError(f"{INSTALL_FIRST} ({error})") from None
    kubectl(state, "wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")


def start_operator(state: ClusterState, extra_args: Sequence[str], say: Callable[[str], None]) -> OperatorPorts:
    """Start the operator in the background and return once it is ready (its /readyz answers)."""
    require_installed(state)
    token = kubectl(state, "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={TOKEN_DURATION}")
    config_path = state.root / "operator.kubeconfig"
    config_path.write_text(yaml.safe_dump(token_kubeconfig(state, token.strip()), sort_keys=False))
    config_path.chmod(0o600)
    ports = OperatorPorts(progress=free_port(), metrics=free_port(), webhook=free_port())
    command = operator_command(state, ports, extra_args)
    environment = {**os.environ, "KUBECONFIG": str(config_path)}
    state.pids[OPERATOR] = start(OPERATOR, command, log_path(state), state.root, env=environment)
    state.binaries[OPERATOR] = sys.executable
    state.ports.update({name: getattr(ports, field) for field, name in PORT_NAMES.items()})
    check = HealthCheck(f"http://127.0.0.1:{ports.metrics}/readyz")
    state.addons[OPERATOR], state.versions[OPERATOR] = check.url, __version__  # `tj cluster status` shows it
    state.save()
    try:
        wait_healthy(
            OPERATOR,
            state.pids[OPERATOR],
            sys.executable,
            check,
            state.layout.pki / "ca.crt",
            log_path(state),
            READY_TIMEOUT,
        )
    except ClusterError:
        stop_operator(state)
        raise
    say(f"operator ready (pid {state.pids[OPERATOR]})")
    return ports


def stop_operator(state: ClusterState) -> bool:
    """Stop the cluster's operator; False when none was recorded."""
    pid = state.pids.pop(OPERATOR, None)
    if pid is None:
        return False
    stop(pid, state.binaries.get(OPERATOR), marker=command_marker(state, OPERATOR))
    for recorded in (state.binaries, state.addons, state.versions):
        recorded.pop(OPERATOR, None)
    for name in PORT_NAMES.values():
        state.ports.pop(name, None)
    state.save()
    return True


def describe(state: ClusterState, ports: OperatorPorts) -> list[str]:
    """What to know about the running operator, one line each."""
    return [
        f"operator of cluster {state.name!r}: pid {state.pids[OPERATOR]}, as ServiceAccount "
        f"{NAMESPACE}/{SERVICE_ACCOUNT}, every namespace",
        f"  progress endpoint  https://{progress_host(state)}:{ports.progress} (what workers report to)",
        f"  metrics            http://127.0.0.1:{ports.metrics}/metrics",
        f"  webhooks           https://127.0.0.1:{ports.webhook} (conversion and admission)",
        f"  log                {log_path(state)}",
        "  stop it with `tj cluster operator --stop` (`tj cluster down` stops it too)",
    ]
