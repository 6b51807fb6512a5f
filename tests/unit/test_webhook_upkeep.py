"""The webhooks' upkeep loop (certificate rotation, re-pointing the API server at a live operator) outlives any
failure of one check: if it ended, nothing would point the API server back at a live operator again."""

from __future__ import annotations

import asyncio

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.config import OperatorConfig
from trainingjob.webhooks.component import Webhooks, WebhookSettings


def test_every_kind_of_failed_check_is_followed_by_the_next_check() -> None:
    failures: list[BaseException] = [
        ApiException(status=500),
        aiohttp.ServerDisconnectedError(),  # no OSError: it once ended the loop silently
        ValueError("a body that is not JSON"),
    ]
    checks: list[str] = []

    async def scenario() -> None:
        webhooks = Webhooks(object(), WebhookSettings(interval=0.01), OperatorConfig())  # type: ignore[arg-type]

        async def refresh_tls() -> None:
            if failures:
                raise failures.pop(0)

        async def register() -> None:
            checks.append("registered")

        webhooks.refresh_tls = refresh_tls  # type: ignore[method-assign]
        webhooks.register = register  # type: ignore[method-assign]
        webhooks.task = asyncio.create_task(webhooks.keep_current())
        for _ in range(500):
            if checks:
                break
            await asyncio.sleep(0.01)
        assert not webhooks.task.done()
        webhooks.task.cancel()

    asyncio.run(scenario())
    assert not failures and checks  # all three failed checks were survived, and the next one registered
