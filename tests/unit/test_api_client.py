"""The reconciler's client skips aiohttp's per-request proxy/netrc lookups only where nothing configures them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.local_http import serving
from trainingjob.operator.api_client import CountingApiClient


def session_trusts_environment() -> bool:
    async def build() -> bool:
        api = CountingApiClient(lambda *_: None)
        try:
            return api.rest_client.pool_manager.trust_env
        finally:
            await api.close()

    return asyncio.run(build())


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def test_no_proxy_and_no_netrc_means_no_lookup_per_request(clean_environment: pytest.MonkeyPatch) -> None:
    assert session_trusts_environment() is False


def test_a_configured_proxy_is_still_honoured(clean_environment: pytest.MonkeyPatch) -> None:
    clean_environment.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert session_trusts_environment() is True


def test_a_netrc_file_is_still_honoured(clean_environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".netrc").write_text("machine example login u password p\n")
    assert session_trusts_environment() is True


def test_a_hung_request_fails_within_the_client_timeout(clean_environment: pytest.MonkeyPatch) -> None:
    """A server that accepts the request and never answers must not hold a reconcile forever."""

    async def scenario() -> str:
        from aiohttp import web
        from kubernetes_asyncio import client

        async def hang(_: web.Request) -> web.Response:
            await asyncio.sleep(60)
            return web.Response(text="{}")

        async with serving("/api/v1/namespaces/default/pods/worker-0", hang) as url:
            api = CountingApiClient(lambda *_: None, client.Configuration(host=url), request_timeout=0.5)

            async def read() -> str:
                try:
                    await client.CoreV1Api(api).read_namespaced_pod("worker-0", "default")
                except TimeoutError:
                    return "timed out by the client"
                return "answered"

            try:
                async with asyncio.timeout(10):
                    return await read()
            except TimeoutError:
                return "still waiting after 10s"
            finally:
                await api.close()

    assert asyncio.run(scenario()) == "timed out by the client"
