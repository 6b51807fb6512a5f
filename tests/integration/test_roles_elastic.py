"""Elastic PyTorch for real on the local process nodes: torchrun's elastic agents train on 2 workers, a third joins
when the job is scaled up (into the running gang), it leaves when the job is scaled down, and the job finishes; no
worker is restarted by the operator along the way, and every (re)start of the training resumes from the newest
checkpoint. An evicted worker (a drain, a preemption) is replaced alone, and worker 0's agent meets its replacement
in a new round.

What torchrun did is read from worker 0's log (worker 0 hosts the rendezvous, so it is in every round): one
`round` line per rendezvous with the world size torchrun gave it, one `epoch` line per epoch.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.jobs import create_job, job_pods
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from tests.real_roles import RUN_TIMEOUT, log_of, log_tails, wait_status
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

MANIFEST = REPO / "examples" / "pytorch" / "trainingjob-elastic-local.yaml"


def events(kube: Kube, namespace: str, pod: str) -> list[dict[str, Any]]:
    """The JSON lines the example prints on `pod` (its first process's view of the training)."""
    found = []
    for line in log_of(kube, namespace, pod).splitlines():
        if line.startswith('{"'):
            found.append(json.loads(line))
    return found


def worker_uids(kube: Kube, namespace: str, job: str) -> dict[str, str]:
    return {
        p.metadata.name: p.metadata.uid for p in job_pods(kube, namespace, job) if not p.metadata.deletion_timestamp
    }


def scale(kube: Kube, namespace: str, job: str, workers: int) -> None:
    kube.custom.patch_namespaced_custom_object_scale(
        k.GROUP, k.VERSION, namespace, k.PLURAL, job, {"spec": {"replicas": workers}}
    )


def trained_with(kube: Kube, namespace: str, job: str, world: int, after: int) -> int:
    """Wait until worker 0 finished an epoch with `world` workers in a round that started after event `after`;
    the index of that epoch's event."""

    def reached() -> int | None:
        seen = events(kube, namespace, f"{job}-worker-0")
        for index in range(after, len(seen)):
            if seen[index]["event"] == "epoch" and seen[index]["worldSize"] == world:
                return index + 1
        return None

    try:
        return wait_until(reached, RUN_TIMEOUT, f"an epoch on {world} workers", interval=1.0)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{log_tails(kube, namespace, job)}") from None


def test_elastic_torchrun_scales_2_3_2_without_restarts_and_resumes_from_checkpoints(
    kube: Kube, namespace: str
) -> None:
    body = yaml.safe_load(MANIFEST.read_text())
    job = body["metadata"]["name"]
    epochs = body["spec"]["hyperparameters"]["epochs"]
    # A minimum of 2 workers makes the local cluster gang them (a minimum of 1 needs no gang): the gang holds the
    # minimum, and the third worker joins the running gang instead of a new one.
    body["spec"]["elastic"]["minWorkers"] = 2
    create_job(kube, namespace, body)

    seen = trained_with(kube, namespace, job, world=2, after=0)
    before = worker_uids(kube, namespace, job)
    assert set(before) == {f"{job}-worker-0", f"{job}-worker-1"}
    scale(kube, namespace, job, 3)
    seen = trained_with(kube, namespace, job, world=3, after=seen)
    grown = worker_uids(kube, namespace, job)
    assert {name: grown[name] for name in before} == before, "scaling up replaced a worker"
    gangs = {p.metadata.name: p.metadata.labels.get(k.LABEL_GANG) for p in job_pods(kube, namespace, job)}
    assert gangs == {name: f"{job}-gang-0" for name in grown}, gangs

    scale(kube, namespace, job, 2)
    seen = trained_with(kube, namespace, job, world=2, after=seen)
    assert worker_uids(kube, namespace, job) == before, "scaling down touched another worker than the third"

    status = wait_status(kube, namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded")
    assert (status.get("restartCount", 0), status.get("disruptionCount", 0), status.get("attempt", 0)) == (0, 0, 0)
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Succeeded"] == ["Rank0Succeeded"]
    assert (status["gang"]["name"], status["gang"]["minCount"]) == (f"{job}-gang-0", 2)

    history = events(kube, namespace, f"{job}-worker-0")
    rounds = [e for e in history if e["event"] == "round"]
    sizes = [r["worldSize"] for r in rounds]
    assert [size for i, size in enumerate(sizes) if i == 0 or size != sizes[i - 1]] == [2, 3, 2], sizes
    # Every round after the first resumed from the newest checkpoint instead of starting over.
    assert rounds[0]["startEpoch"] == 1 and all(r["startEpoch"] > 1 for r in rounds[1:]), rounds
    trained = [e["epoch"] for e in history if e["event"] == "epoch"]
    assert trained == sorted(trained) and set(trained) == set(range(1, epochs + 1)), trained


def next_round(kube: Kube, namespace: str, job: str, after: int) -> int:
    """Wait until worker 0 started a new round (torchrun restarted the training) after event `after`; the index
    just past that round's event."""

    def reached() -> int | None:
        seen = events(kube, namespace, f"{job}-worker-0")
        return next((i + 1 for i in range(after, len(seen)) if seen[i]["event"] == "round"), None)

    try:
        return wait_until(reached, RUN_TIMEOUT, "a new rendezvous round", interval=1.0)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{log_tails(kube, namespace, job)}") from None


def evict(kube: Kube, namespace: str, pod: str) -> None:
    """What a drain or a preemption does: the Eviction API, which marks the pod DisruptionTarget and deletes it."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
    kube.core.create_namespaced_pod_eviction(pod, namespace, body)


def test_an_evicted_elastic_worker_is_replaced_alone_and_the_training_goes_on_from_its_checkpoint(
    kube: Kube, namespace: str
) -> None:
    body = yaml.safe_load(MANIFEST.read_text())
    job = body["metadata"]["name"]
    create_job(kube, namespace, body)

    seen = trained_with(kube, namespace, job, world=2, after=0)
    before = worker_uids(kube, namespace, job)
    evict(kube, namespace, f"{job}-worker-1")
    # torchrun's agent on worker 0 loses its peer, restarts the training and meets the replacement in a new round.
    seen = next_round(kube, namespace, job, after=seen)
    seen = trained_with(kube, namespace, job, world=2, after=seen)
    after = worker_uids(kube, namespace, job)
    assert after[f"{job}-worker-0"] == before[f"{job}-worker-0"], "the eviction of worker 1 restarted worker 0"
    assert after[f"{job}-worker-1"] != before[f"{job}-worker-1"], "worker 1 was not replaced"

    status = wait_status(kube, namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded")
    assert (status.get("disruptionCount", 0), status.get("restartCount", 0)) == (1, 0)
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Succeeded"] == ["Rank0Succeeded"]
    history = events(kube, namespace, f"{job}-worker-0")
    rounds = [e for e in history if e["event"] == "round"]
    assert len(rounds) >= 2 and rounds[-1]["worldSize"] == 2, rounds
    assert all(r["startEpoch"] > 1 for r in rounds[1:]), rounds
    trained = [e["epoch"] for e in history if e["event"] == "epoch"]
    assert trained == sorted(trained) and set(trained) == set(range(1, body["spec"]["hyperparameters"]["epochs"] + 1))
