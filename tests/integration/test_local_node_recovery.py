"""A node agent that dies and comes back (as `tj cluster up` restarts it) adopts the pods still running, reports
those that ended while it was away, and kills the processes of pods deleted meanwhile: nothing orphaned, nothing
left Running or Pending wrongly."""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from tests.conftest import LOCAL_NODES, TEST_CLUSTER_NAME
from tests.kube import Kube, wait_until
from tests.local_node import (
    container_state,
    local_node_names,
    local_pod,
    pod_status,
    processes_with,
    python_container,
    wait_for_phase,
)

pytestmark = pytest.mark.integration


def sleeper(marker: str, seconds: int = 300, exit_code: int = 0) -> str:
    return (
        f"import time; tag = {marker!r}; print('up', flush=True); time.sleep({seconds}); raise SystemExit({exit_code})"
    )


def test_a_restarted_agent_adopts_reports_and_cleans_up(kube: Kube, namespace: str) -> None:
    from trainingjob.cluster import control_plane

    state = control_plane.ClusterState.load(TEST_CLUSTER_NAME)
    if state is None or os.environ.get("TJ_USE_EXISTING_CLUSTER"):
        pytest.skip("needs the local cluster the tests started (its node agents are killed and restarted)")
    node = local_node_names(kube)[0]
    markers = {name: f"{name}-{uuid.uuid4().hex}" for name in ("long", "short", "doomed")}
    scripts = {
        "long": sleeper(markers["long"]),
        "short": sleeper(markers["short"], seconds=4, exit_code=4),
        "doomed": sleeper(markers["doomed"]),
    }
    for name, script in scripts.items():
        kube.core.create_namespaced_pod(namespace, local_pod(name, python_container(script), node=node))
    for name in scripts:
        wait_for_phase(kube, namespace, name, ("Running",))
    container_id = pod_status(kube, namespace, "long")["containerStatuses"][0]["containerID"]

    os.kill(state.pids[node], signal.SIGKILL)
    wait_until(lambda: not control_plane.component_running(state, node), 30, "the node agent to die")
    kube.core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=0)  # gone from the API at once
    wait_until(lambda: not processes_with(markers["short"]), 60, "the short pod's process to end unobserved")
    assert processes_with(markers["doomed"]), "the agent's death must not take pods down with it"

    control_plane.up(TEST_CLUSTER_NAME, nodes=4, local_nodes=LOCAL_NODES)

    short = wait_for_phase(kube, namespace, "short", ("Succeeded", "Failed"))
    assert short["phase"] == "Failed" and container_state(short)["terminated"]["exitCode"] == 4
    wait_until(lambda: not processes_with(markers["doomed"]), 60, "the deleted pod's process to be killed")
    long = pod_status(kube, namespace, "long")
    assert long["phase"] == "Running"
    entry = long["containerStatuses"][0]
    assert entry["containerID"] == container_id and entry["restartCount"] == 0 and "running" in entry["state"]
    assert len(processes_with(markers["long"])) == 1
    kube.core.delete_namespaced_pod("long", namespace, grace_period_seconds=1)
    wait_until(lambda: kube.pod_or_none(namespace, "long") is None, 60, "the adopted pod to be deleted")
    assert not processes_with(markers["long"])
