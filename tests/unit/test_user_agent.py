"""Every request of the operator's clients names the operator in its User-Agent (the API server's field manager)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from kubernetes_asyncio import client

from tests.local_http import serving
from trainingjob import __version__
from trainingjob.config import OperatorConfig
from trainingjob.operator.process import open_clients
from trainingjob.user_agent import CLI, named, user_agent


def agents_seen_by_a_server() -> list[str]:
    """The User-Agent of each request the operator's three clients (writers, watches, Lease) make to a server."""

    async def scenario() -> list[str]:
        seen: list[str] = []

        async def pod(request: web.Request) -> web.Response:
            seen.append(request.headers.get("User-Agent", ""))
            return web.json_response({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker-0"}})

        async with serving("/api/v1/namespaces/default/pods/worker-0", pod) as url:
            default = client.Configuration.get_default_copy()
            client.Configuration.set_default(client.Configuration(host=url))
            try:
                clients = open_clients(OperatorConfig(), lambda *_: None)
            finally:
                client.Configuration.set_default(default)
            every = (clients.api, clients.watch_api, clients.lease)
            try:
                for api in every:
                    await client.CoreV1Api(api).read_namespaced_pod("worker-0", "default")
            finally:
                for api in every:
                    await api.close()
        return seen

    return asyncio.run(scenario())


def test_each_operator_client_sends_the_operators_name_and_version() -> None:
    assert agents_seen_by_a_server() == [f"trainingjob-operator/{__version__} (python)"] * 3


def test_the_field_manager_is_the_product_before_the_first_slash() -> None:
    """What the API server takes as the manager's name (prefixFromUserAgent): the CLI's writes are `tj`'s."""
    assert user_agent(CLI).split("/")[0] == "tj"


def test_named_sets_the_header_of_a_plain_client() -> None:
    async def agent() -> str:
        api = named(client.ApiClient(), CLI)
        try:
            return api.default_headers["User-Agent"]
        finally:
            await api.close()

    assert asyncio.run(agent()) == f"tj/{__version__} (python)"
