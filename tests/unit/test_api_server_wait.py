"""A starting operator waits for the API server's /readyz instead of failing its preflight (preflight.py).

What the wait does with each answer is logic: these scripts feed it the failures a real client raises. The real
case (a replica restarted while the API server is down, and just after it starts) is
tests/integration/test_leader_outage.py.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.operator.preflight import FORBIDDEN_GRACE, api_server_not_ready, wait_for_api_server


class Answered:
    async def read(self) -> bytes:
        return b"ok"


class ScriptedReadyz:
    """/readyz answering each call with the next item of `script` (an exception is raised, None answers 200)."""

    def __init__(self, script: list[BaseException | None]) -> None:
        self.script = list(script)
        self.calls = 0

    async def call_api(self, path: str, method: str, **_: object) -> Answered:
        assert (path, method) == ("/readyz", "GET")
        self.calls += 1
        outcome = self.script.pop(0)
        if outcome is not None:
            raise outcome
        return Answered()


def refused() -> OSError:
    return ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6443)")


def waited(script: list[BaseException | None], step: float = 1.0) -> tuple[int, list[float]]:
    """Run the wait on a clock that each sleep advances: (the /readyz calls made, the delays slept)."""
    api, now, delays = ScriptedReadyz(script), [0.0], []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        now[0] += max(seconds, step)

    asyncio.run(wait_for_api_server(api, sleep=sleep, clock=lambda: now[0]))  # type: ignore[arg-type]
    return api.calls, delays


def test_connection_errors_timeouts_429_and_5xx_are_waited_out_with_a_bounded_backoff() -> None:
    failures: list[BaseException | None] = [
        refused(),
        aiohttp.ServerDisconnectedError(),
        TimeoutError(),
        ApiException(status=429, reason="Too Many Requests"),
        ApiException(status=503, reason="Service Unavailable"),
        refused(),
        refused(),
    ]
    calls, delays = waited([*failures, None])
    assert calls == len(failures) + 1
    assert len(delays) == len(failures)
    assert delays[0] <= 1.2 and max(delays) <= 5 * 1.2  # 1 s doubling to 5 s, ±20 %


def test_a_forbidden_readyz_is_waited_out_while_rbac_syncs_then_left_to_the_preflight() -> None:
    forbidden = ApiException(status=403, reason="Forbidden")
    calls, _ = waited([forbidden, forbidden, None])
    assert calls == 3  # RBAC synced: /readyz answers
    calls, delays = waited([forbidden] * 100, step=10.0)
    assert calls < 100 and sum(max(d, 10.0) for d in delays) >= FORBIDDEN_GRACE  # a cluster hiding /readyz


@pytest.mark.parametrize("status", [400, 404])
def test_other_refusals_end_the_wait_at_once(status: int) -> None:
    assert api_server_not_ready(ApiException(status=status, reason="x")) is None
    assert waited([ApiException(status=status, reason="x")]) == (1, [])


class ScriptedLeaseDryRun:
    """The preflight's dry-run Lease create answering each call with the next item of `script`."""

    client_side_validation = True

    def __init__(self, script: list[BaseException | None]) -> None:
        self.script = list(script)
        self.paths: list[str] = []

    async def call_api(self, path: str, method: str, *args: object, **kwargs: object) -> object:
        self.paths.append(f"{method} {path}")
        outcome = self.script.pop(0)
        if outcome is not None:
            raise outcome
        return {}

    def select_header_accept(self, accepts: list[str]) -> str:
        return accepts[0]

    def select_header_content_type(self, types: list[str], *args: object) -> str:
        return types[0]


def run_preflight(api: ScriptedLeaseDryRun, grace: float = FORBIDDEN_GRACE) -> list[float]:
    from trainingjob.operator.preflight import check_operator_namespace

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    asyncio.run(
        check_operator_namespace(api, "ops", "lease", grace, sleep=sleep, clock=lambda: sum(slept))  # type: ignore[arg-type]
    )
    return slept


def test_a_lease_refused_just_after_the_api_server_started_is_asked_again() -> None:
    api = ScriptedLeaseDryRun([ApiException(status=403), ApiException(status=403), None])
    assert run_preflight(api) == [2.0, 2.0]
    assert api.paths == ["POST /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"] * 3


def test_a_lease_still_refused_after_the_grace_is_missing_rbac() -> None:
    from trainingjob.operator.preflight import PreflightError

    api = ScriptedLeaseDryRun([ApiException(status=403)] * 100)
    with pytest.raises(PreflightError, match="apply deploy/rbac"):
        run_preflight(api)
    assert len(api.paths) == FORBIDDEN_GRACE / 2.0 + 1


def test_against_a_ready_api_server_missing_rbac_is_told_at_once() -> None:
    from trainingjob.operator.preflight import PreflightError

    api = ScriptedLeaseDryRun([ApiException(status=403)] * 100)
    with pytest.raises(PreflightError, match="apply deploy/rbac"):
        run_preflight(api, grace=0.0)
    assert len(api.paths) == 1
