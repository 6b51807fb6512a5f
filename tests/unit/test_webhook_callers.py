"""Only the API server may call /mutate and /validate, where it presents a client certificate (issue 41): over
real TLS, a caller without one gets 401, one with a certificate of another name 403, one signed by another CA is
refused at the handshake; /convert and /healthz, which the API server calls without a certificate, still answer."""

from __future__ import annotations

import asyncio
import datetime
import json
import socket
import ssl
from pathlib import Path

import pytest
from aiohttp import ClientConnectorError, ClientSession, TCPConnector

from tests.unit.test_webhook_metrics import admission, conversion, job
from trainingjob import certs
from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.webhooks.admission import AdmissionRequest, Verdict
from trainingjob.webhooks.client_auth import ApiServerCallers
from trainingjob.webhooks.server import WebhookServer

DAY = datetime.timedelta(days=1)
API_SERVER = "kube-apiserver-webhook-client"


async def allow(_: AdmissionRequest) -> Verdict:
    return Verdict()


def write_pair(directory: Path, stem: str, pair: certs.Pair) -> tuple[str, str]:
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert.write_text(pair.cert_pem)
    key.write_text(pair.key_pem)
    return str(cert), str(key)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def statuses(tmp_path: Path, client: str | None, ca: certs.Pair | None = None) -> dict[str, int]:
    """The status of each path for a client presenting a certificate with CN `client` (None: none), signed by
    `ca` (default: the cluster's client CA the server trusts)."""
    cluster_ca = certs.new_ca("cluster", DAY)
    serving = certs.issue(cluster_ca, certs.Leaf("webhook", server=True, ip_addresses=("127.0.0.1",)), DAY)
    ca_file, _ = write_pair(tmp_path, "ca", cluster_ca)
    context = ssl.create_default_context(cafile=ca_file)
    if client is not None:
        signer = ca or cluster_ca
        context.load_cert_chain(
            *write_pair(tmp_path, "client", certs.issue(signer, certs.Leaf(client, client=True), DAY))
        )
    v1, v1alpha1 = f"{c.GROUP}/{c.V1}", f"{c.GROUP}/{c.V1ALPHA1}"
    posts = {
        w.MUTATE_PATH: admission("a"),
        w.VALIDATE_PATH: admission("a"),
        w.CONVERT_PATH: conversion(v1, job(v1alpha1, "a")),
    }

    async def scenario() -> dict[str, int]:
        server = WebhookServer(allow, allow, callers=ApiServerCallers(ca_file, frozenset({API_SERVER})))
        server.use(serving)
        port = free_port()
        await server.start("127.0.0.1", port)
        try:
            async with ClientSession(connector=TCPConnector(ssl=context, force_close=True)) as session:
                answers = {}
                for path, body in posts.items():
                    async with session.post(f"https://127.0.0.1:{port}{path}", data=json.dumps(body)) as response:
                        answers[path] = response.status
                async with session.get(f"https://127.0.0.1:{port}{w.HEALTH_PATH}") as response:
                    answers[w.HEALTH_PATH] = response.status
                return answers
        finally:
            await server.stop()

    return asyncio.run(scenario())


def test_the_api_servers_certificate_is_let_in(tmp_path: Path) -> None:
    assert set(statuses(tmp_path, API_SERVER).values()) == {200}


def test_a_caller_without_a_certificate_only_reaches_conversion_and_health(tmp_path: Path) -> None:
    answers = statuses(tmp_path, None)
    assert answers == {w.MUTATE_PATH: 401, w.VALIDATE_PATH: 401, w.CONVERT_PATH: 200, w.HEALTH_PATH: 200}


def test_a_certificate_of_another_name_is_forbidden(tmp_path: Path) -> None:
    answers = statuses(tmp_path, "system:serviceaccount:team:default")
    assert (answers[w.MUTATE_PATH], answers[w.VALIDATE_PATH]) == (403, 403)


def test_a_certificate_of_another_ca_fails_the_handshake(tmp_path: Path) -> None:
    with pytest.raises((ClientConnectorError, ssl.SSLError, OSError)):
        statuses(tmp_path, API_SERVER, ca=certs.new_ca("someone else", DAY))
