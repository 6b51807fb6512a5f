"""Fixtures the SDK's unit tests share: a real local HTTPS progress endpoint (tests/sdk_server.py) with a
throwaway CA, one CA per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk_server import Pki, ProgressEndpoint, https_endpoint, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def endpoint(pki: Pki) -> Iterator[ProgressEndpoint]:
    with https_endpoint(pki) as server:
        yield server
