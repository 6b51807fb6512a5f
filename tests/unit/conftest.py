"""Fixtures the SDK's unit tests share: a real local HTTPS progress endpoint (tests/sdk_server.py) with a
throwaway CA, one CA per module; a reporter of a job's worker with a fake clock and sleep (nothing waits for real)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sdk_server import FakeClock, Pki, ProgressEndpoint, https_endpoint, job_env, make_pki
from trainingjob.sdk import ProgressReporter


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def endpoint(pki: Pki) -> Iterator[ProgressEndpoint]:
    with https_endpoint(pki) as server:
        yield server


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("token-1\n")
    return path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def reporter(
    endpoint: ProgressEndpoint, pki: Pki, token_file: Path, clock: FakeClock, sleeps: list[float]
) -> ProgressReporter:
    return ProgressReporter(env=job_env(endpoint.url, pki, token_file), clock=clock, sleep=sleeps.append)
