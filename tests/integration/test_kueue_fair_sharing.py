"""Fair sharing by a real Kueue (v0.17.0, `fairSharing` in its configuration: cluster/kueue/settings.py) between two
teams' ClusterQueues in one Cohort: neither team owns a GPU, both borrow the Cohort's 8. A team alone may take all
of them; once the other team asks, Kueue preempts until both hold the same share, and a GPU given back goes to the
team with the smaller share, not to the job that waited longest. The workers run on kwok's fake GPU nodes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.gang_support import finish
from tests.integration.test_kueue_trainingjobs import REACT, queue_status, queued_job, status_of
from tests.jobs import create_job, live_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.kueue_support import GROUP, VERSION, Queues

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kueue_operator")]
JOB_GPUS = 2  # 2 workers x 1 GPU: the Cohort's 8 GPUs hold 4 jobs


def gpu_group(flavor: str, gpus: int, cpu: str) -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    return {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": flavor, "resources": resources}]}


def team_queue(queues: Queues, team: str, cohort: str, flavor: str) -> str:
    """A team's ClusterQueue with no GPUs of its own (all borrowed from the Cohort) and its LocalQueue `team`."""
    name = queues.name(team)
    spec = {
        "cohortName": cohort,
        "namespaceSelector": {},
        "resourceGroups": [gpu_group(flavor, 0, "0")],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
    }
    queues.create("ClusterQueue", name, spec)
    queues.local_queue(team, name)
    return name


def weighted_share(queues: Queues, cluster_queue: str) -> int:
    body = queues.kube.custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cluster_queue)
    return int(((body.get("status") or {}).get("fairSharing") or {}).get("weightedShare", -1))


def phases(kube: Kube, namespace: str, names: list[str]) -> dict[str, str]:
    return {name: str(status_of(kube, namespace, name).get("phase")) for name in names}


def test_two_teams_in_one_cohort_get_equal_shares_and_freed_gpus_go_to_the_smaller_share(
    kube: Kube, namespace: str, queues: Queues
) -> None:
    flavor = queues.flavor(node_labels={"accelerator": "nvidia-gpu"})
    cohort = queues.name("research")
    queues.create("Cohort", cohort, {"resourceGroups": [gpu_group(flavor, 8, "64")]})
    queue_a, queue_b = (team_queue(queues, team, cohort, flavor) for team in ("team-a", "team-b"))

    team_a = [f"a{i}" for i in range(4)]
    for name in team_a:
        create_job(kube, namespace, queued_job(name, "team-a", workers=2, gpus=1))
    for name in team_a:  # team-b asks for nothing: team-a borrows all 8 GPUs
        wait_phase(kube, namespace, name, "Running", timeout=REACT)

    team_b = ["b0", "b1", "b2"]
    for name in team_b[:2]:
        create_job(kube, namespace, queued_job(name, "team-b", workers=2, gpus=1))
    for name in team_b[:2]:
        wait_phase(kube, namespace, name, "Running", timeout=REACT)

    def a_split() -> dict[str, list[str]] | None:
        seen = phases(kube, namespace, team_a)
        running = [n for n in team_a if seen[n] == "Running" and live_pods(kube, namespace, n)]
        queued = [n for n in team_a if seen[n] == "Queued" and not live_pods(kube, namespace, n)]
        return {"running": running, "queued": queued} if len(running) == 2 and len(queued) == 2 else None

    split = wait_until(a_split, REACT, "team-a down to 2 running jobs, 2 preempted")
    for name in split["queued"]:
        queue = queue_status(kube, namespace, name)
        assert queue["reason"] == "Preempted" and "Fair Sharing" in str(queue.get("message")), queue
    shares = wait_until(
        lambda: (lambda a, b: (a, b) if a == b > 0 else None)(
            weighted_share(queues, queue_a), weighted_share(queues, queue_b)
        ),
        REACT,
        "both ClusterQueues' weighted shares to be equal",
    )
    print(f"weighted shares at 4 + 4 GPUs: {shares}")

    create_job(kube, namespace, queued_job("b2", "team-b", workers=2, gpus=1))
    wait_phase(kube, namespace, "b2", "Queued", timeout=REACT)  # team-b at its fair share: b2 waits, nobody preempted
    finish(kube, namespace, "b0")  # 2 GPUs free: team-b's share (2) is below team-a's (4), so b2 gets them
    wait_phase(kube, namespace, "b0", "Succeeded", timeout=REACT)
    wait_phase(kube, namespace, "b2", "Running", timeout=REACT)
    seen = phases(kube, namespace, team_a)
    assert [seen[n] for n in split["queued"]] == ["Queued", "Queued"], seen  # older, but their team holds more
    assert [seen[n] for n in split["running"]] == ["Running", "Running"], seen
