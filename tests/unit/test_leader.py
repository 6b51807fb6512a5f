"""Leader election against an in-memory Lease API: expiry on our own clock (clock skew cannot steal or strand a
Lease) and attempts cut off at the renew deadline (a hung renew cannot keep a leader past its Lease)."""

from __future__ import annotations

import asyncio
import copy
import datetime
import time
from collections.abc import Callable

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.operator.runtime.leader import (
    EXPIRY_MARGIN,
    LeaderElector,
    LeaseSettings,
    Observation,
    lease_is_free,
    next_attempt_in,
    observe,
    one_line,
)

WALL = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


def held_by(holder: str | None, renewed: datetime.datetime | None, duration: int = 15) -> client.V1Lease:
    spec = client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=duration, renew_time=renewed)
    return client.V1Lease(metadata=client.V1ObjectMeta(name="trainingjob-operator"), spec=spec)


class FakeCoordination:
    """One Lease in memory; reads or replaces can be made to hang until cancelled, as on a dead connection. A
    replace carrying another resourceVersion than the stored one conflicts (409), as on the API server."""

    def __init__(self, lease: client.V1Lease | None = None) -> None:
        self.lease = lease
        self.version = 1
        self.reads = 0
        self.conflicts = 0
        self.hang_reads = False
        self.hang_replaces = False
        self.fail_replaces: list[BaseException] = []  # raised by the next replaces, one each
        self.cancelled = 0
        self.renewed_at: list[float] = []
        self.on_renew: Callable[[], object] = lambda: None

    async def _hang(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def read_namespaced_lease(self, name: str, namespace: str) -> client.V1Lease:
        self.reads += 1
        if self.hang_reads:
            await self._hang()
        if self.lease is None:
            raise ApiException(status=404)
        return copy.deepcopy(self.lease)

    def _store(self, body: client.V1Lease) -> client.V1Lease:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease.metadata.resource_version = str(self.version)
        return copy.deepcopy(self.lease)

    def write_as(self, holder: str) -> None:
        """Another replica (or a user) writes the Lease: our resourceVersion is stale from now on."""
        self._store(held_by(holder, WALL))

    async def create_namespaced_lease(self, namespace: str, body: client.V1Lease) -> client.V1Lease:
        return self._store(body)

    async def replace_namespaced_lease(self, name: str, namespace: str, body: client.V1Lease) -> client.V1Lease:
        if self.hang_replaces:
            await self._hang()
        if self.fail_replaces:
            raise self.fail_replaces.pop(0)
        stored = self.lease.metadata.resource_version if self.lease is not None else None
        if body.metadata.resource_version != stored:
            self.conflicts += 1
            raise ApiException(status=409, reason="Conflict")
        self.renewed_at.append(time.monotonic())
        written = self._store(body)
        self.on_renew()
        return written


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: FakeCoordination, clock: Clock | None = None, **timing: float) -> LeaderElector:
    settings = LeaseSettings("trainingjob-system", identity="me", **timing)
    return LeaderElector(api, settings, **({"clock": clock} if clock else {}))  # type: ignore[arg-type]


def test_a_lease_expires_by_our_clock_since_we_saw_it_change() -> None:
    lease = held_by("other", WALL)
    seen = observe(Observation(), lease.spec, 100.0)
    assert observe(seen, lease.spec, 110.0) is seen  # unchanged record: the expiry clock keeps running
    assert not lease_is_free(lease, "me", seen, 110.0)
    assert lease_is_free(lease, "me", seen, 115.5)
    renewed = held_by("other", WALL + datetime.timedelta(seconds=2))
    assert observe(seen, renewed.spec, 110.0).time == 110.0  # a renewal restarts it, whatever renewTime says
    assert lease_is_free(held_by(None, None), "me", seen, 100.0)
    assert lease_is_free(held_by("me", WALL), "me", seen, 100.0)


@pytest.mark.parametrize("holder_clock_offset", [-86400.0, 0.0, 3600.0])
def test_standby_takes_over_after_lease_duration_whatever_the_holders_clock(holder_clock_offset: float) -> None:
    """A holder whose wall clock is a day behind or an hour ahead: renewTime means nothing to us, only change."""
    skewed = WALL + datetime.timedelta(seconds=holder_clock_offset)
    api, clock = FakeCoordination(held_by("other", skewed)), Clock()
    standby = elector(api, clock)

    async def scenario() -> list[bool]:
        outcomes = [await standby.try_acquire_or_renew()]  # first sight: a full lease_duration to wait
        clock.now += 10
        outcomes.append(await standby.try_acquire_or_renew())
        clock.now += 6
        outcomes.append(await standby.try_acquire_or_renew())
        return outcomes

    assert asyncio.run(scenario()) == [False, False, True]
    assert api.lease.spec.holder_identity == "me" and api.lease.spec.lease_transitions == 1


def test_standby_leaves_a_lease_alone_while_the_holder_keeps_renewing() -> None:
    """The holder's renewTime is a day old by our wall clock, but it changes: the holder is alive."""
    api, clock = FakeCoordination(held_by("other", WALL - datetime.timedelta(days=1))), Clock()
    standby = elector(api, clock)

    async def scenario() -> list[bool]:
        outcomes = []
        for step in range(1, 6):
            outcomes.append(await standby.try_acquire_or_renew())
            clock.now += 10
            api.lease.spec.renew_time = WALL - datetime.timedelta(days=1) + datetime.timedelta(seconds=step * 2)
        return outcomes

    assert asyncio.run(scenario()) == [False] * 5
    assert api.lease.spec.holder_identity == "other"


def test_a_hung_renew_ends_leadership_within_the_renew_deadline() -> None:
    api = FakeCoordination()
    leader = elector(api, lease_duration=2.0, renew_deadline=0.5, retry_period=0.1)
    edges: list[str] = []

    async def scenario() -> float:
        renewing = asyncio.Event()
        api.on_renew = lambda: len(api.renewed_at) >= 2 and renewing.set()
        task = asyncio.create_task(leader.run(lambda: edges.append("started"), lambda: edges.append("stopped")))
        await asyncio.wait_for(renewing.wait(), 5)  # leading, and renewed at least once
        api.hang_replaces = True
        await asyncio.wait_for(task, 5)
        return time.monotonic()

    stopped_at = asyncio.run(scenario())
    assert edges == ["started", "stopped"] and not leader.is_leader
    assert stopped_at - api.renewed_at[-1] <= 0.5 + 0.25  # renew_deadline plus scheduling slack < lease_duration
    assert api.cancelled >= 1  # the hung request itself was abandoned


def test_a_hung_acquire_is_abandoned_and_retried() -> None:
    api = FakeCoordination()
    api.hang_reads = True
    candidate = elector(api, lease_duration=2.0, renew_deadline=0.1, retry_period=0.05)

    async def scenario() -> None:
        leading = asyncio.Event()
        task = asyncio.create_task(candidate.run(leading.set, lambda: None))
        await asyncio.sleep(0.6)
        assert api.cancelled >= 2 and not leading.is_set()  # each attempt cut off, then tried again
        api.hang_reads = False
        await asyncio.wait_for(leading.wait(), 5)
        task.cancel()

    asyncio.run(scenario())
    assert candidate.is_leader and api.lease.spec.holder_identity == "me"


def test_a_leader_renews_without_reading_the_lease_first() -> None:
    """One request per renewal: under a busy API server a renewal has one request to get through, not two."""
    api = FakeCoordination()
    leader = elector(api, lease_duration=2.0, renew_deadline=1.0, retry_period=0.02)

    async def scenario() -> None:
        renewed = asyncio.Event()
        api.on_renew = lambda: len(api.renewed_at) >= 5 and renewed.set()
        task = asyncio.create_task(leader.run(lambda: None, lambda: None))
        await asyncio.wait_for(renewed.wait(), 5)
        task.cancel()

    asyncio.run(scenario())
    assert api.reads == 1  # the acquisition's read (no Lease yet); none of the five renewals read
    assert api.lease.spec.holder_identity == "me"


def renew_after_a_write_by(holder: str) -> tuple[list[bool], FakeCoordination, LeaderElector]:
    """Lead, let `holder` write the Lease, renew once more: (both attempts' outcomes, the API, the elector)."""
    api = FakeCoordination()
    leader = elector(api, Clock())

    async def scenario() -> list[bool]:
        outcomes = [await leader.try_acquire_or_renew()]
        leader.is_leader = True
        api.write_as(holder)
        outcomes.append(await leader.try_acquire_or_renew())
        return outcomes

    return asyncio.run(scenario()), api, leader


def test_a_conflicting_renewal_reads_the_lease_and_renews_it_if_still_ours() -> None:
    """Someone wrote our Lease (a label, say) since our last renewal: the unread write conflicts, the read that
    follows shows it still ours, and the renewal goes through in the same attempt."""
    outcomes, api, _ = renew_after_a_write_by("me")
    assert outcomes == [True, True]
    assert api.conflicts == 1 and api.reads == 2  # the acquisition's read, and the one after the conflict
    assert api.lease.spec.holder_identity == "me" and len(api.renewed_at) == 1


def test_a_leader_whose_lease_another_replica_took_does_not_renew_over_it() -> None:
    outcomes, api, leader = renew_after_a_write_by("other")
    assert outcomes == [True, False]
    assert api.conflicts == 1 and api.renewed_at == []
    assert api.lease.spec.holder_identity == "other" and leader.held is None


def test_api_errors_are_logged_as_one_line() -> None:
    error = ApiException(status=404, reason="Not Found")
    error.body = '{"kind":"Status","message":"namespaces \\"trainingjob-system\\" not found","code":404}'
    assert one_line(error) == 'HTTP 404 Not Found: namespaces "trainingjob-system" not found'
    assert "\n" not in one_line(ApiException(status=500, reason="boom"))


def test_a_renewal_cut_off_by_the_server_is_one_failed_attempt_not_the_end_of_the_elector() -> None:
    """aiohttp's ServerDisconnectedError (the API server closed the connection mid-request) is no OSError: it
    once ended the election task, leaving a replica reconciling on a Lease nobody renewed."""
    api = FakeCoordination()
    leader = elector(api, lease_duration=2.0, renew_deadline=1.0, retry_period=0.05)
    edges: list[str] = []

    async def scenario() -> None:
        task = asyncio.create_task(leader.run(lambda: edges.append("started"), lambda: edges.append("stopped")))
        await asyncio.sleep(0.2)
        renewals = len(api.renewed_at)
        api.fail_replaces = [aiohttp.ServerDisconnectedError(), aiohttp.ClientPayloadError("cut"), ValueError("?")]
        await asyncio.sleep(0.5)
        assert not task.done()
        assert not api.fail_replaces and len(api.renewed_at) > renewals  # all failed, renewals went on
        task.cancel()

    asyncio.run(scenario())
    assert edges == ["started"] and leader.is_leader


def test_a_standby_attempts_again_as_the_lease_it_watches_expires_not_a_retry_period_later() -> None:
    """A replacement pod's takeover: the next attempt lands just past the expiry by our clock, and an attempt
    that failed on an already expired Lease waits the whole retry period (no tight loop against the API)."""
    seen = observe(Observation(), held_by("other", WALL).spec, 100.0)
    assert next_attempt_in(seen, 2.0, 105.0) == 2.0  # 10 s to go: the usual period
    assert next_attempt_in(seen, 2.0, 114.5) == pytest.approx(0.5 + EXPIRY_MARGIN)
    assert lease_is_free(held_by("other", WALL), "me", seen, 114.5 + next_attempt_in(seen, 2.0, 114.5))
    assert next_attempt_in(seen, 2.0, 115.0) == 2.0  # expired, yet not taken: a conflict or an error
    assert next_attempt_in(Observation(), 2.0, 0.0) == 2.0  # nothing observed yet (an error before any read)


def test_a_replacement_takes_over_just_past_the_lease_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    """The elector's own loop, its sleeps on a fake clock: a 15-s Lease first seen at 1000 s is taken over just past
    1015 s, not at 1016 s, the retry period's next tick."""
    api, clock = FakeCoordination(held_by("dead-pod", WALL)), Clock()
    standby = elector(api, clock)
    real_sleep, led_at = asyncio.sleep, []

    async def sleep_on_the_clock(seconds: float) -> None:
        clock.now += seconds
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep_on_the_clock)

    async def scenario() -> None:
        task = asyncio.create_task(standby.run(lambda: led_at.append(clock.now), lambda: None))
        while not led_at:
            await real_sleep(0)
        task.cancel()

    asyncio.run(scenario())
    assert led_at == [pytest.approx(1015 + EXPIRY_MARGIN)] and api.lease.spec.holder_identity == "me"
