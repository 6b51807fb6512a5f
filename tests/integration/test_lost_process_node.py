"""A local process node lost for good while its workers really train (issue 41's lost node, with real training).

The XGBoost example trains on tj-local-0 (tj-local-1 is cordoned until the first checkpoint); then the machine
"crashes": its node agent is SIGKILLed and never comes back during the test, and the workers' processes die with it.
Nothing is done by hand after that: kube-controller-manager stops hearing the node's heartbeat (its Lease is no
longer renewed) and after its grace period (50 s) marks it Unknown and taints it `unreachable`; the taint eviction
controller deletes the workers after their toleration (5 s here); no kubelet is left to finish the deletions, so the
operator force-deletes them after --force-delete-after (20 s in the session's operator); the gang restarts on
tj-local-1 and resumes from the newest checkpoint (the hostPath volume outlives the node's agent). The agent is
started again after the test, so the session's cluster is whole for the tests after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import LOCAL_NODES, TEST_CLUSTER_NAME
from tests.integration.test_lost_nodes import LOST_NODE_TAINTS, NODE_GRACE_SECONDS, node_ready
from tests.jobs import create_job, event_reasons, get_job, job_pods
from tests.kill_points import PodHistory
from tests.kube import Kube, wait_until
from tests.local_node import local_node_names, worker_processes
from tests.operator_harness import FORCE_DELETE_AFTER_SECONDS, REPO
from tests.real_roles import RUN_TIMEOUT, log_of, log_tails, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
EPOCHS = 12
TOLERATION_SECONDS = 5


@pytest.fixture
def process_nodes(kube: Kube) -> Iterator[tuple[str, str]]:
    """(the node that will be lost, the spare): the spare cordoned until the test opens it; afterwards the lost
    node's agent started again (as `tj cluster up` does) and both nodes schedulable and Ready."""
    from trainingjob.cluster import control_plane

    state = control_plane.ClusterState.load(TEST_CLUSTER_NAME)
    if state is None or os.environ.get("TJ_USE_EXISTING_CLUSTER"):
        pytest.skip("needs the local cluster the tests started (a node agent is killed and restarted)")
    names = sorted(local_node_names(kube))
    assert len(names) >= 2, f"two local process nodes needed, found {names}"
    lost, spare = names[0], names[1]
    kube.core.patch_node(spare, {"spec": {"unschedulable": True}})
    try:
        yield lost, spare
    finally:
        kube.core.patch_node(spare, {"spec": {"unschedulable": False}})
        if not control_plane.component_running(state, lost):
            control_plane.up(TEST_CLUSTER_NAME, nodes=4, local_nodes=LOCAL_NODES)
        wait_until(lambda: node_ready(kube, lost) == "True", 180, f"{lost} Ready again", interval=2)


def lost_node_example(name: str, epochs: int) -> dict[str, Any]:
    """The XGBoost example as its README applies it: 2 workers, paced epochs, tolerating a lost node 5 s."""
    body = yaml.safe_load((REPO / "examples" / "xgboost" / "trainingjob-local.yaml").read_text())
    body["metadata"] = {"name": name}
    spec = body["spec"]
    spec["workers"] = 2
    spec["hyperparameters"].update(epochs=epochs, epochSeconds=3)
    spec["scheduling"]["tolerations"] += [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOLERATION_SECONDS}
        for key in LOST_NODE_TAINTS
    ]
    return body


def crash(state: Any, node: str, namespace: str, job: str, workers: int | None) -> list[int]:
    """The node's agent SIGKILLed (no shutdown code runs), and with `workers` the processes of that many workers:
    the machine crashed; without, the agent alone died and the workers train on, unseen (as behind a partition)."""
    processes = [pid for index in range(workers or 0) for pid in worker_processes(namespace, job, index)]
    victims = [state.pids[node], *processes]
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return victims


# The agent alone dying leaves the old gang training on, unseen: long enough (60 epochs of 3 s) that it still
# writes checkpoints into the same volume while the new gang trains on the spare node.
@pytest.mark.parametrize(("workers_die", "epochs"), [(True, EPOCHS), (False, 60)], ids=["machine", "agent-only"])
@pytest.mark.timeout(3 * RUN_TIMEOUT)
def test_a_process_node_lost_for_good_moves_real_training_to_another_node_from_its_checkpoint(
    kube: Kube, namespace: str, process_nodes: tuple[str, str], workers_die: bool, epochs: int
) -> None:
    from trainingjob.cluster import control_plane

    lost, spare = process_nodes
    state = control_plane.ClusterState.load(TEST_CLUSTER_NAME)
    history = PodHistory(kube, namespace)  # every pod the job ever had: one per worker and attempt
    history.start()
    assert history.listed.wait(60), "the pod watch to list"
    create_job(kube, namespace, lost_node_example("xgb", epochs))
    saved = wait_status(kube, namespace, "xgb", lambda s: (s.get("lastCheckpoint") or {}).get("epoch", 0) >= 2, "ep 2")
    first = {p.metadata.name: (p.metadata.uid, p.spec.node_name) for p in job_pods(kube, namespace, "xgb")}
    assert {node for _, node in first.values()} == {lost}, first

    old_chief = worker_processes(namespace, "xgb", 0)  # the chief saves the checkpoints
    assert old_chief, "the chief's processes must be found on this machine"
    kube.core.patch_node(spare, {"spec": {"unschedulable": False}})
    victims, crashed = crash(state, lost, namespace, "xgb", 2 if workers_die else None), time.monotonic()
    assert len(victims) > 1 or not workers_die, "the workers' processes must have been found on this machine"
    wait_until(lambda: not control_plane.component_running(state, lost), 30, "the node agent to die")

    # Kubernetes notices the silence, taints the node, evicts the workers; the operator forces what no kubelet
    # finishes; the gang runs again on the spare node, a new attempt.
    def moved() -> dict[str, Any] | None:
        pods = [p for p in job_pods(kube, namespace, "xgb") if p.metadata.deletion_timestamp is None]
        status = (get_job(kube, namespace, "xgb") or {}).get("status") or {}
        on_spare = len(pods) == 2 and {p.spec.node_name for p in pods} == {spare}
        fresh = not {p.metadata.uid for p in pods} & {uid for uid, _ in first.values()}
        return status if on_spare and fresh and status.get("attempt", 0) >= 1 else None

    bound = NODE_GRACE_SECONDS + TOLERATION_SECONDS + FORCE_DELETE_AFTER_SECONDS + RUN_TIMEOUT
    wait_until(moved, bound, "the gang to be recreated on the spare node", interval=2)
    recreated = time.monotonic() - crashed
    assert node_ready(kube, lost) == "Unknown"
    assert not control_plane.component_running(state, lost), "nothing may bring the lost node back meanwhile"

    fenced_after = None if workers_die else old_chief_fenced(kube, namespace, old_chief)
    done = wait_status(kube, namespace, "xgb", lambda s: s.get("phase") == "Succeeded", "Succeeded on the spare")
    chief = log_of(kube, namespace, "xgb-worker-0")
    resumed = [line for line in chief.splitlines() if "resuming from " in line]
    assert resumed, "the new chief must resume from a checkpoint:\n" + log_tails(kube, namespace, "xgb")
    epoch = int(resumed[0].rsplit("at epoch ", 1)[1].split()[0])
    assert epoch >= saved["lastCheckpoint"]["epoch"] + 1, (resumed, saved["lastCheckpoint"])
    assert f"/checkpoints/{get_job(kube, namespace, 'xgb')['metadata']['uid']}/" in resumed[0], resumed
    assert not [e for e in range(1, epoch) if f"epoch {e}/{epochs} " in chief], "no saved epoch trained again"
    assert (done["progress"]["epoch"], done["progress"]["percent"]) == (epochs, 100.0), done["progress"]
    # A lost node is not the job's failure: a disruption, one gang restart, no pod of the old attempt left.
    assert done.get("restartCount", 0) == 0 and done["disruptionCount"] >= 1, done
    assert {p.spec.node_name for p in job_pods(kube, namespace, "xgb")} <= {spare}
    reasons = event_reasons(kube, namespace, "xgb")
    assert "PodForceDeleted" in reasons, reasons
    history.stopping.set()
    assert not history.duplicates(), f"two pods for one worker and attempt: {history.duplicates()}"
    assert len(history.seen) == 2 * (done["attempt"] + 1), (done["attempt"], history.seen)
    print(
        f"lost process node ({'machine' if workers_die else 'agent only'}): resumed at epoch {epoch} "
        f"(a checkpoint at epoch {saved['lastCheckpoint']['epoch']} before the crash); gang recreated on {spare} "
        f"{recreated:.0f}s after the crash, "
        f"Succeeded {time.monotonic() - crashed:.0f}s after it; disruptions {done['disruptionCount']}, "
        f"attempt {done['attempt']}; events {reasons}"
        + ("" if fenced_after is None else f"; the old chief stopped {fenced_after:.1f}s after the new one resumed")
    )


def old_chief_fenced(kube: Kube, namespace: str, old_chief: list[int]) -> float:
    """Seconds from the new chief's resume (which fences the old attempt out of the checkpoint volume) to the old
    chief's end: it trains on, unseen, and its next save must refuse and end it (sdk/_fence.py). Without the fence it
    would save into the same names for the rest of its 60 epochs (a minute or more after the new gang started)."""
    resumes = lambda: "resuming from " in log_of(kube, namespace, "xgb-worker-0")  # noqa: E731
    wait_until(resumes, RUN_TIMEOUT, "the new chief's resume")
    resumed = time.monotonic()
    wait_until(lambda: not [pid for pid in old_chief if alive(pid)], 30, "the old chief to be fenced out", interval=0.5)
    return time.monotonic() - resumed


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
