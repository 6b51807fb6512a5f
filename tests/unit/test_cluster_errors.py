"""Failures of the local control plane are reported clearly and quickly, never as a hang."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from trainingjob.cluster import build
from trainingjob.cluster.components import HealthCheck
from trainingjob.cluster.control_plane import allocate_ports
from trainingjob.cluster.errors import ClusterError, log_tail
from trainingjob.cluster.process import is_running, start, stop, wait_healthy


def test_missing_go_is_reported_with_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError, match="Go is not installed"):
        build.check_go_toolchain((1, 26))


def test_too_old_go_is_reported_with_the_version_found() -> None:
    with pytest.raises(ClusterError, match=r"Go 99\.0 or newer is needed, found go\d"):
        build.check_go_toolchain((99, 0))


def test_a_module_download_failure_shows_the_log_tail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A wrapper pinned like ours (go.mod and go.sum, built with -mod=readonly) whose module cannot be fetched.

    The go.sum entry matters: without it `-mod=readonly` stops at "missing go.sum entry" before any download.
    """
    wrapper = tmp_path / "tools" / "broken"
    wrapper.mkdir(parents=True)
    (wrapper / "go.mod").write_text("module example.test/broken\n\ngo 1.21\n\nrequire example.test/nothing v1.0.0\n")
    fake_hash = "h1:" + "A" * 43 + "="
    (wrapper / "go.sum").write_text(
        f"example.test/nothing v1.0.0 {fake_hash}\nexample.test/nothing v1.0.0/go.mod {fake_hash}\n"
    )
    monkeypatch.setenv("TJ_TOOLS_DIR", str(tmp_path / "tools"))
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "gomodcache"))  # nothing cached: the module must be fetched
    monkeypatch.setenv("GOPROXY", "off")  # … and fetching fails, as with no network
    broken = build.ComponentSet("broken", "example.test/nothing", {"nothing": "example.test/nothing/cmd"})
    with pytest.raises(ClusterError) as error:
        build.build_component_set(broken, say=lambda _: None)
    message = str(error.value)
    assert "building broken v1.0.0 failed" in message
    tail = message.split("last lines of", 1)[1]
    assert "example.test/nothing" in tail and "module lookup disabled by GOPROXY=off" in tail
    assert "missing go.sum entry" not in tail
    assert not (tmp_path / "cache" / "bin" / "broken-v1.0.0").exists()


def test_component_exiting_early_shows_its_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    script = "import sys; print('bind: address already in use', flush=True); sys.exit(3)"
    pid = start("component", [sys.executable, "-c", script], log, tmp_path)
    with pytest.raises(ClusterError, match=r"exited during startup(.|\n)*address already in use"):
        wait_healthy(
            "component",
            pid,
            sys.executable,
            HealthCheck("http://127.0.0.1:1/healthz"),
            tmp_path / "ca",
            log,
            timeout=30,
        )


def test_readiness_timeout_is_an_error_not_a_hang(tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    pid = start("slow", [sys.executable, "-c", "import time; time.sleep(60)"], log, tmp_path)
    started = time.monotonic()
    try:
        with pytest.raises(ClusterError, match="not ready within 1s"):
            wait_healthy(
                "slow",
                pid,
                sys.executable,
                HealthCheck("http://127.0.0.1:1/healthz"),
                tmp_path / "ca",
                log,
                timeout=1,
            )
        assert time.monotonic() - started < 10
    finally:
        stop(pid, sys.executable, grace_seconds=2)
    assert not is_running(pid)


def test_stop_leaves_a_pid_alone_that_runs_another_binary(tmp_path: Path) -> None:
    pid = start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log", tmp_path)
    try:
        stop(pid, "/usr/bin/not-our-binary", grace_seconds=1)
        assert is_running(pid)
    finally:
        stop(pid, sys.executable, grace_seconds=2)
    assert not is_running(pid)


def test_stop_leaves_a_pid_alone_that_runs_our_binary_for_something_else(tmp_path: Path) -> None:
    """A node agent runs on sys.executable like the operator: a dead agent's pid that another Python process got is
    told apart by the agent's config path in the command line."""
    pid = start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log", tmp_path)
    try:
        assert not is_running(pid, sys.executable, marker="/agents/tj-local-0.json")
        stop(pid, sys.executable, grace_seconds=1, marker="/agents/tj-local-0.json")
        assert is_running(pid)
        assert is_running(pid, sys.executable, marker="time.sleep(60)")
    finally:
        stop(pid, sys.executable, grace_seconds=2, marker="time.sleep(60)")
    assert not is_running(pid)


def test_requested_apiserver_port_in_use_is_reported() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ClusterError, match=f"port {port} on 127.0.0.1 is already in use"):
            allocate_ports(port)


def test_log_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    tail = log_tail(log, lines=3)
    assert tail.splitlines() == ["    line 97", "    line 98", "    line 99"]
    assert "no log" in log_tail(tmp_path / "missing.log")
    assert os.path.exists(log)


def mark_built(component_sets: list[build.ComponentSet]) -> None:
    for component_set in component_sets:
        target = build.binaries_dir(component_set.name, component_set.version)
        target.mkdir(parents=True)
        (target / build.COMPLETE_MARKER).write_text("test\n")
        for name in component_set.packages:
            (target / name).write_text("#!/bin/sh\n")


def finishes_while_locked(builder: str) -> bool:
    """Whether `builder` returns while another process holds the build lock."""
    finished = threading.Event()
    worker = threading.Thread(target=lambda: (getattr(build, builder)(say=lambda _: None), finished.set()))
    with build.build_lock():
        worker.start()
        returned_under_lock = finished.wait(0.5)
    assert finished.wait(10)
    worker.join()
    return returned_under_lock


@pytest.mark.parametrize("builder", ["ensure_promtool", "ensure_binaries"])
def test_built_sets_never_wait_for_another_build(builder: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`tj cluster up` beside another checkout's long build (Kueue: minutes) starts at once once its own binaries are
    built: a test session once timed out waiting on the lock for a build it did not need."""
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path))
    mark_built([*build.COMPONENT_SETS, build.PROMETHEUS])
    assert finishes_while_locked(builder)


def test_a_missing_set_waits_for_the_build_lock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A set not built yet is built only under the lock (two builds of one set would race on its directories); here
    the lock holder "finishes" the build, so the waiter finds it complete and builds nothing itself."""
    monkeypatch.setenv("TJ_CACHE_DIR", str(tmp_path))
    mark_built(list(build.COMPONENT_SETS))
    finished = threading.Event()
    worker = threading.Thread(target=lambda: (build.ensure_promtool(say=lambda _: None), finished.set()))
    with build.build_lock():
        worker.start()
        assert not finished.wait(0.5)
        mark_built([build.PROMETHEUS])
    assert finished.wait(10)
    worker.join()
