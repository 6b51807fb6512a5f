"""A reconcile that fails because the API server could not answer (restarting, etcd down) is a warning line and a
retry with backoff; any other failure keeps its traceback (the chaos test of control-plane restarts asserts that the
operator's log then holds no error or traceback)."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.unit.test_operator_liveness import NO_CACHES, jobs_controller
from trainingjob.kube.status import unavailable
from trainingjob.operator.runtime.manager import Manager


def refused(status: int) -> ApiException:
    error = ApiException(status=status, reason="refused")
    error.body = '{"kind": "Status", "message": "etcdserver: request timed out"}'
    return error


@pytest.mark.parametrize(
    "error",
    [
        refused(500),
        refused(503),
        refused(504),
        refused(429),
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientOSError(111, "Connect call failed"),
        TimeoutError(),
        ConnectionResetError(),
    ],
)
def test_what_a_restarting_control_plane_answers_is_unavailable(error: BaseException) -> None:
    assert unavailable(error)


@pytest.mark.parametrize("error", [refused(400), refused(403), refused(404), refused(409), refused(422), KeyError("x")])
def test_refusals_and_our_own_bugs_are_not(error: BaseException) -> None:
    assert not unavailable(error)


def failed_reconcile_records(error: BaseException, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The log records of one reconcile that raises `error`, run by the controller's real workers."""

    async def scenario() -> None:
        failed = asyncio.Event()

        async def failing(_: tuple[str, str]) -> None:
            failed.set()
            raise error

        controller = jobs_controller(failing, workers=1)
        manager = Manager(NO_CACHES, [controller])
        controller.synced.set()
        manager.start()
        controller.queue.add(("team-a", "bert"))
        await failed.wait()
        await asyncio.sleep(0.05)
        await manager.stop()

    with caplog.at_level(logging.WARNING, logger="trainingjob.operator.runtime.controller"):
        asyncio.run(scenario())
    return [r for r in caplog.records if r.name == "trainingjob.operator.runtime.controller"]


def test_a_reconcile_the_api_server_could_not_answer_is_a_warning_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    (record,) = failed_reconcile_records(refused(500), caplog)
    assert record.levelno == logging.WARNING and record.exc_info is None
    message = record.getMessage()
    assert "team-a/bert" in message and "etcdserver: request timed out" in message and "retrying in" in message


def test_any_other_failed_reconcile_is_an_error_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    (record,) = failed_reconcile_records(KeyError("spec"), caplog)
    assert record.levelno == logging.ERROR and record.exc_info is not None


def test_a_refusal_is_an_error_line_with_the_api_servers_words_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    (record,) = failed_reconcile_records(refused(403), caplog)
    assert record.levelno == logging.ERROR and record.exc_info is None
    assert "the API server refused: HTTP 403: etcdserver: request timed out" in record.getMessage()
