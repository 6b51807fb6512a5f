"""/healthz: a leader whose reconcile is wedged must fail its liveness probe instead of holding the Lease silently."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from trainingjob.config import OperatorConfig
from trainingjob.operator.process import liveness
from trainingjob.operator.runtime.controller import Controller, Registration
from trainingjob.operator.runtime.informers import Caches
from trainingjob.operator.runtime.manager import Manager
from trainingjob.operator.trainingjob.watches import TRAININGJOB_BODIES, TRAININGJOBS

NO_CACHES = Caches(None, [], [], watch_timeout=60)


def jobs_controller(
    reconcile: Callable[[tuple[str, str]], Awaitable[None]], workers: int, resync: float = 0
) -> Controller:
    """The TrainingJob controller's queue and workers around `reconcile`, watching nothing."""
    return Controller(Registration(TRAININGJOBS, TRAININGJOB_BODIES, ()), reconcile, workers, resync)


def probes_around_a_wedged_reconcile(stuck_after: float) -> list[tuple[bool, str]]:
    """Liveness before, during and after one reconcile that blocks until released, run by the real workers."""

    async def scenario() -> list[tuple[bool, str]]:
        entered, release = asyncio.Event(), asyncio.Event()

        async def wedged(_: tuple[str, str]) -> None:
            entered.set()
            await release.wait()

        controller = jobs_controller(wedged, workers=2)
        manager = Manager(NO_CACHES, [controller])
        controller.synced.set()
        manager.start()
        probes = [liveness(manager, stuck_after)]
        controller.queue.add(("team-a", "bert"))
        await entered.wait()
        await asyncio.sleep(0.3)
        probes.append(liveness(manager, stuck_after))
        release.set()
        await asyncio.sleep(0.05)
        probes.append(liveness(manager, stuck_after))
        await manager.stop()
        return probes

    return asyncio.run(scenario())


def test_a_reconcile_running_past_the_bound_fails_liveness_until_it_ends() -> None:
    before, during, after = probes_around_a_wedged_reconcile(stuck_after=0.1)
    assert before == (True, "ok")
    assert during[0] is False and "TrainingJob team-a/bert" in during[1] and "bound 0s" in during[1]
    assert after == (True, "ok")


def test_a_reconcile_within_the_bound_is_healthy() -> None:
    _, during, _ = probes_around_a_wedged_reconcile(stuck_after=60)
    assert during == (True, "ok")


def test_a_dead_reconcile_worker_fails_liveness() -> None:
    async def scenario() -> tuple[bool, str]:
        manager = Manager(NO_CACHES, [jobs_controller(lambda key: asyncio.sleep(0), workers=1)])
        manager.start()
        manager.tasks[0].cancel()
        await asyncio.gather(*manager.tasks, return_exceptions=True)
        return liveness(manager, 300)

    assert asyncio.run(scenario()) == (False, "1 reconcile workers died")


def test_a_job_admission_refuses_is_requeued_with_backoff_not_at_once() -> None:
    """Requeued at once, a job whose Service create a terminating namespace refuses spun at tens of reconciles a
    second until the namespace was gone."""
    from trainingjob.operator.trainingjob.backoffs import admission_requeue_delay

    assert [admission_requeue_delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert admission_requeue_delay(50) == 30.0


def test_every_cached_job_is_planned_again_each_resync_period_without_events() -> None:
    async def scenario() -> dict[tuple[str, str], int]:
        jobs = {("team-a", "bert"): [{}], ("team-b", "gpt"): [{}]}
        planned: dict[tuple[str, str], int] = {}

        async def count(key: tuple[str, str]) -> None:
            planned[key] = planned.get(key, 0) + 1

        controller = jobs_controller(count, workers=2, resync=0.1)
        controller.indexes = {TRAININGJOB_BODIES: jobs}
        controller.synced.set()
        controller.start()
        await asyncio.sleep(0.35)
        await controller.stop()
        return planned

    planned = asyncio.run(scenario())
    assert set(planned) == {("team-a", "bert"), ("team-b", "gpt")}
    assert all(2 <= n <= 4 for n in planned.values()), planned


def test_watches_end_within_half_the_liveness_bound_even_for_small_bounds() -> None:
    """A quiet watch hears from the API server when it ends and resumes: at most every watch_timeout seconds,
    which must stay well below the bound, or an idle healthy operator fails /healthz."""
    from trainingjob.operator.process import WATCH_TIMEOUT_MAX, watch_timeout

    for bound in range(2, 1000):
        assert 1 <= watch_timeout(bound) <= bound / 2, bound
    assert watch_timeout(300) == 150 and watch_timeout(10_000) == WATCH_TIMEOUT_MAX


def test_the_writers_pool_has_room_for_every_create_slot_and_two_writes_per_reconcile_worker() -> None:
    """With one connection per reconcile worker, the pods were created 7-26 % slower (bench/findings.md)."""
    from trainingjob.operator.process import writer_connections

    for creates, reconciles in ((32, 16), (1, 1), (1024, 512)):
        config = OperatorConfig(max_concurrent_creates=creates, max_concurrent_reconciles=reconciles)
        assert writer_connections(config) > creates + 2 * reconciles


def test_each_reconcile_is_counted_under_its_controllers_kind_failed_ones_too() -> None:
    """trainingjob_reconciles_total{controller}: what the bench's sweep scenario divides by its trials."""
    from trainingjob.operator.metrics import OperatorMetrics

    metrics = OperatorMetrics()

    async def scenario() -> None:
        async def flaky(key: tuple[str, str]) -> None:
            if key[1] == "broken":
                raise RuntimeError("refused")

        controller = Controller(Registration(TRAININGJOBS, TRAININGJOB_BODIES, ()), flaky, 1, metrics=metrics)
        controller.synced.set()
        controller.start()
        controller.queue.add(("team-a", "bert"))
        controller.queue.add(("team-a", "broken"))
        for _ in range(200):  # both reconciled (the failed one's retry waits a second: it is not among them)
            if metrics.reconciles.labels("TrainingJob")._value.get() >= 2:
                break
            await asyncio.sleep(0.01)
        await controller.stop()

    asyncio.run(scenario())
    assert metrics.reconciles.labels("TrainingJob")._value.get() == 2
    assert metrics.reconcile_errors.labels("RuntimeError")._value.get() == 1


def test_an_admission_refusal_is_a_warning_with_the_api_servers_words_not_a_traceback(caplog) -> None:
    """Quota refusing a child for now is expected and retried: no error, no stack trace in the operator's log."""
    from trainingjob.operator.runtime.writer import AdmissionRefused

    async def scenario() -> None:
        async def refused(_: tuple[str, str]) -> None:
            raise AdmissionRefused("exceeded quota: gpus")

        controller = jobs_controller(refused, workers=1)
        controller.synced.set()
        controller.start()
        controller.queue.add(("team-a", "bert"))
        for _ in range(200):
            if controller.queue._failures:
                break
            await asyncio.sleep(0.01)
        await controller.stop()

    with caplog.at_level("INFO", logger="trainingjob.operator.runtime.controller"):
        asyncio.run(scenario())
    records = [r for r in caplog.records if "bert" in r.getMessage()]
    assert records and all(r.levelname == "WARNING" and r.exc_info is None for r in records)
    assert "admission refused a child for now: exceeded quota: gpus" in records[0].getMessage()
