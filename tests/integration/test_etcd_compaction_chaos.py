"""etcd compacted to its current revision at random instants while jobs on kwok nodes are created, scaled,
gang-restarted, evicted, suspended and resumed, finished and deleted (issue 41's control-plane faults).

A compaction throws away every revision before the current one: a watch resumed from an older resourceVersion, and
a LIST at an exact older resourceVersion, are answered 410 Gone, and the client must list again. The jobs' lives are
the kill points' (tests/kill_points.py: the same scenarios, pod history and invariants); one operator lives through
TJ_COMPACTIONS (default 12) compactions, each after a pause drawn from the seed, and must converge by itself: no pod
created twice for one worker and attempt, no job lost or stuck, status equal to the children,
counters exact, no error or traceback in its log.

Twice: with the API server's watch cache, as every cluster runs it, where a compaction to the current revision
reaches no client (the cache's own watch of etcd is at that revision, and clients' watches and lists are served from
the cache: measured, no re-list at all); and with the cache off (`--watch-cache=false`), where every watch goes to
etcd and any informer that resumes from a revision before the compaction gets 410 Gone and re-lists: there the test
requires re-lists to have happened, so the fault is known to have been injected. Both use the dedicated operator
without leader election of tests/control_plane_faults.py (switching the cache restarts the API server).

TJ_COMPACTION_SEED (random by default) draws the pauses and the scenarios; it is printed, and every failure names
it. The machine's timing is not reproduced.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Iterator

import pytest

from tests.control_plane_faults import RELISTED, command_line, compact_etcd, session_cluster, start_again
from tests.integration.test_control_plane_chaos import STARTUP_REFUSAL
from tests.kill_invariants import logged_errors
from tests.kill_points import converge, start_scenarios
from tests.kube import Kube
from tests.operator_harness import RunningOperator
from trainingjob.cluster.process import stop

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
JOBS_IN_FLIGHT = 4
PAUSE_SECONDS = (0.5, 6.0)


def compaction_count() -> int:
    return int(os.environ.get("TJ_COMPACTIONS") or 12)


@contextlib.contextmanager
def watch_cache_off(state: object) -> Iterator[None]:
    """kube-apiserver (and the scheduler, see tests/control_plane_faults.py's CLIENTS) restarted with
    --watch-cache=false inside the block, and with its own command line again afterwards."""
    names = ("kube-apiserver", "kube-scheduler")
    commands = {name: command_line(state.pids[name]) for name in names}

    def restart_with(extra: dict[str, list[str]]) -> None:
        for name in reversed(names):
            stop(state.pids[name], state.binaries[name])
        for name in names:
            start_again(state, name, commands[name] + extra.get(name, []))

    restart_with({"kube-apiserver": ["--watch-cache=false"]})
    try:
        yield
    finally:
        restart_with({})


def run_compactions(kube: Kube, namespace: str, operator: RunningOperator, cache: str) -> int:
    """Jobs live their scenarios while etcd is compacted at random instants; the invariants hold at the end.
    Returns the operator's re-lists after 410 Gone."""
    seed = int(os.environ.get("TJ_COMPACTION_SEED") or random.SystemRandom().randrange(2**32))
    count = compaction_count()
    line = f"TJ_COMPACTION_SEED={seed} TJ_COMPACTIONS={count} (watch cache {cache})"
    print(f"etcd compactions: {line}")
    state, rng = session_cluster(), random.Random(seed)
    log_start, began = operator.log_path.stat().st_size, time.monotonic()
    history, driver = start_scenarios(kube, namespace, seed, JOBS_IN_FLIGHT)
    revisions: list[int] = []
    try:
        for _ in range(count):
            time.sleep(rng.uniform(*PAUSE_SECONDS))
            revisions.append(compact_etcd(state))
            assert not driver.errors, f"{line}: {driver.errors}"
        converged = converge(kube, namespace, driver, history, line, f" (at {revisions})")
        assert operator.process.poll() is None, f"{line}: the operator exited"
        # A just-started API server (the cache switched) refuses with 403 until its RBAC caches sync: one line each.
        errors = [entry for entry in logged_errors(operator, log_start) if STARTUP_REFUSAL not in entry]
        assert not errors, f"{line}: the operator logged errors:\n" + "\n".join(errors[:20])
        relists = operator.log_path.read_bytes()[log_start:].decode(errors="replace").count(RELISTED)
        print(
            f"{line}: {len(revisions)} compactions (revisions {revisions[0]}..{revisions[-1]}); "
            f"{len(driver.finished)} jobs ({sum(len(s.done) for s in driver.finished)} steps), "
            f"{len(history.seen)} pods; operator re-lists after 410: {relists}; the test's own pod watch re-listed "
            f"{history.relists} times; converged {converged:.1f}s after the last compaction; "
            f"{time.monotonic() - began:.0f}s in all"
        )
        return relists
    finally:
        driver.stopping.set()
        history.stopping.set()


@pytest.mark.timeout(compaction_count() * 10 + 900)
def test_jobs_converge_across_etcd_compactions_at_random_instants(
    kube: Kube, namespace: str, faulted_operator: RunningOperator
) -> None:
    run_compactions(kube, namespace, faulted_operator, "on")


@pytest.mark.timeout(compaction_count() * 10 + 900)
def test_every_watch_relists_after_compactions_without_the_watch_cache_and_jobs_converge(
    kube: Kube, namespace: str, faulted_operator: RunningOperator, restored_control_plane: object
) -> None:
    with watch_cache_off(restored_control_plane):
        relists = run_compactions(kube, namespace, faulted_operator, "off")
    assert relists > 0, "no informer met 410 Gone: the compactions reached no watch"
