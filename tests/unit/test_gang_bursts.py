"""The applier creates each job's gang members as one burst (operator/trainingjob/apply.py,
Applier.apply_children): two jobs' gangs reconciled at the same moment never have their pods reach the API server
interleaved, which kube-scheduler 1.35 could turn into two partial reservations waiting out its 5-minute Permit
timeout."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from tests.unit.fake_api import ANSWER, Answer, FakeApiServer
from trainingjob.operator.runtime.writer import DONE, Writer
from trainingjob.operator.trainingjob.apply import Applier
from trainingjob.planning.actions import CreateChild
from trainingjob.scheduling.gang import LABEL_GANG


class RecordingCore(FakeApiServer):
    """Pod creates that take a few event-loop turns, each start and end recorded in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    async def create_namespaced_pod(self, namespace: str, body: dict[str, Any], **_: Any) -> Answer:
        name = body["metadata"]["name"]
        self.calls.append(("start", name))
        for _ in range(3):
            await asyncio.sleep(0)
        self.calls.append(("end", name))
        return ANSWER

    async def create_namespaced_config_map(self, namespace: str, body: dict[str, Any], **_: Any) -> Answer:
        self.calls.append(("config", body["metadata"]["name"]))
        return ANSWER


def pod(job: str, index: int, gang: bool) -> CreateChild:
    labels = {LABEL_GANG: f"{job}-gang-0"} if gang else {}
    metadata = {"name": f"{job}-worker-{index}", "labels": labels}
    return CreateChild({"apiVersion": "v1", "kind": "Pod", "metadata": metadata})


def config_map(job: str) -> CreateChild:
    return CreateChild({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{job}-config"}})


def run_two_jobs(gang: bool) -> tuple[RecordingCore, list[list[str]]]:
    core = RecordingCore()
    applier = Applier(Writer(None, max_concurrent_writes=32, core=core, custom=core, discovery=core))

    async def both() -> list[list[str]]:
        return list(
            await asyncio.gather(
                *(
                    applier.apply_children(
                        SimpleNamespace(namespace="ns"), [pod(job, i, gang) for i in range(4)] + [config_map(job)]
                    )
                    for job in ("first", "second")
                )
            )
        )

    return core, asyncio.run(both())


def jobs_in_call_order(core: RecordingCore) -> list[str]:
    return [name.split("-")[0] for what, name in core.calls if what in ("start", "end")]


def test_two_gangs_are_created_one_after_the_other_and_every_outcome_keeps_its_place() -> None:
    core, outcomes = run_two_jobs(gang=True)
    order = jobs_in_call_order(core)
    first = order[0]
    assert order == [first] * 8 + [("second" if first == "first" else "first")] * 8, order
    assert outcomes == [[DONE] * 5, [DONE] * 5]
    # A job's other children do not wait for another job's gang.
    configs = [i for i, (what, _) in enumerate(core.calls) if what == "config"]
    assert max(configs) < len(core.calls) - 8


def test_pods_outside_a_gang_are_still_created_concurrently_across_jobs() -> None:
    core, _ = run_two_jobs(gang=False)
    order = jobs_in_call_order(core)
    assert order[:8] != [order[0]] * 8, order
