"""The bench harness's watch (bench/client.py) against a real HTTP server that breaks and stalls its streams: it
must resume from the last resourceVersion instead of dying or waiting forever (a run that lost its watch used to
sit out its whole timeout, an hour, and say nothing)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bench import client
from bench.client import Api
from tests.local_http import serving

PATH = "/api/v1/namespaces/bench/pods"


def pod(name: str, version: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}}


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


class FlakyServer:
    """Lists one pod; the first watch sends one event and then breaks the connection, the second sends one event and
    then goes quiet, the third sends the last event. Records the resourceVersion each watch asked for."""

    def __init__(self) -> None:
        self.watched_from: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "1":
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": [pod("a", 1)]})
        self.watched_from.append(request.query["resourceVersion"])
        response = web.StreamResponse()
        await response.prepare(request)
        attempt = len(self.watched_from)
        if attempt == 1:
            await response.write(event("ADDED", pod("b", 2)))
            assert request.transport is not None
            request.transport.close()  # the connection breaks mid-stream
        elif attempt == 2:
            await response.write(event("ADDED", pod("c", 3)))
            await asyncio.sleep(30)  # a stalled stream: nothing more arrives
        else:
            await response.write(event("MODIFIED", pod("c", 4)))
            await asyncio.sleep(30)
        return response


async def collect(base: str, wanted: int) -> list[tuple[str, str, str]]:
    api = Api.__new__(Api)
    api.server = base
    api.session = aiohttp.ClientSession()
    seen: list[tuple[str, str, str]] = []
    try:
        async for kind, obj in api.watch(PATH):
            seen.append((kind, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))
            if len(seen) == wanted:
                return seen
    finally:
        await api.close()
    return seen


def test_a_broken_or_stalled_watch_resumes_from_the_last_resource_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "WATCH_QUIET_S", 0.5)
    monkeypatch.setattr(client, "WATCH_RETRY_S", 0.01)
    server = FlakyServer()

    async def scenario() -> list[tuple[str, str, str]]:
        async with serving(PATH, server.handle) as url:
            return await asyncio.wait_for(collect(url, 4), timeout=10)

    seen = asyncio.run(scenario())
    assert seen == [("ADDED", "a", "1"), ("ADDED", "b", "2"), ("ADDED", "c", "3"), ("MODIFIED", "c", "4")]
    assert server.watched_from == ["1", "2", "3"]


def test_a_list_waits_out_storage_reinitializing() -> None:
    """Right after a CRD is installed, a LIST meets 429 "storage is (re)initializing" for a moment; the steady run's
    harness died of it at its first LIST."""
    answers = [429, 429, 200]

    async def handle(request: web.Request) -> web.Response:
        status = answers.pop(0)
        if status == 429:
            return web.json_response({"reason": "TooManyRequests"}, status=429, headers={"Retry-After": "0"})
        return web.json_response({"metadata": {"resourceVersion": "7"}, "items": []})

    async def scenario() -> dict[str, Any]:
        async with serving(PATH, handle) as url:
            api = Api.__new__(Api)
            api.server, api.session = url, aiohttp.ClientSession()
            try:
                return await asyncio.wait_for(api.get(PATH), timeout=10)
            finally:
                await api.close()

    assert asyncio.run(scenario())["metadata"]["resourceVersion"] == "7"
    assert answers == []
