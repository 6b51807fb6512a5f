"""`tj cluster status` and `tj cluster env`: what runs of a local cluster (each component's process, health and
version) and what a shell needs to use it. Read-only: control_plane.py starts and stops."""

from __future__ import annotations

from pathlib import Path

from trainingjob.cluster import components as c
from trainingjob.cluster import localnodes
from trainingjob.cluster.control_plane import COMPONENTS, DEFAULT_NAME, ClusterState, component_running
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.process import probe
from trainingjob.node.config import NodeConfig


def status(name: str = DEFAULT_NAME) -> list[dict[str, str]]:
    """One row per component: pid, process state and health answer."""
    state = ClusterState.load(name)
    if state is None:
        raise ClusterError(f"no cluster {name!r}; start one with `tj cluster up`")
    checks = c.health_checks(state.layout)
    for agent in state.agents:
        config = NodeConfig.load(localnodes.config_path(name, agent))
        checks[agent] = localnodes.health_check(config, state.layout)
    checks.update({name: c.HealthCheck(url) for name, url in state.addons.items()})
    rows = []
    for component in (*COMPONENTS, *state.addons, *state.agents):
        running = component_running(state, component)
        healthy, answer = probe(checks[component], state.layout.pki / "ca.crt") if running else (False, "-")
        rows.append(
            {
                "component": component,
                "pid": str(state.pids.get(component, "-")),
                "process": "running" if running else "stopped",
                "health": "ok" if healthy else f"unhealthy ({answer})" if running else "-",
                "version": _component_version(state, component),
            }
        )
    return rows


def _component_version(state: ClusterState, component: str) -> str:
    if component in state.agents:
        return "agent"
    key = component if component in ("etcd", "kwok", *state.addons) else "kubernetes"
    return state.versions.get(key, "?")


def environment_lines(state: ClusterState) -> list[str]:
    """What a shell needs to use the cluster with the kubectl we built; TJ_CLUSTER makes the next `tj cluster`
    commands (operator, status, down) act on this cluster without --name."""
    path = f'export PATH="{Path(state.binaries["kubectl"]).parent}:$PATH"'
    return [f"export KUBECONFIG={state.kubeconfig}", path, f"export TJ_CLUSTER={state.name}"]
