"""etcd and kube-apiserver restarted at random instants while jobs on kwok nodes are created, scaled, gang-restarted,
evicted, suspended and resumed, finished and deleted (issue 41's control-plane faults; docs/reliability.md).

The jobs' lives are the kill points' (tests/kill_points.py: the same scenarios, pod history and invariants); what is
faulted here is the control plane, not the operator: TJ_CONTROL_PLANE_RESTARTS (default 6) times, after a pause drawn
from the seed, one of
- etcd and the API server stopped and started again (the API server last down, first up),
- the API server alone,
- etcd alone, the API server answering meanwhile without its storage,
each down for 0 to 8 s more than its restart takes. One operator process (no leader election:
tests/control_plane_faults.py says why) lives through all of it and must converge by itself: its watches back off
within their bound and never spin, no pod is created twice for one worker and attempt, no job is lost or stuck,
status equals the children, counters are exact, and its log holds no error or traceback.

TJ_CONTROL_PLANE_SEED (random by default) draws the faults, the pauses and the scenarios; it is printed, and every
failure names it. The machine's timing is not reproduced.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.control_plane_faults import (
    api_requests,
    health,
    log_since,
    restart,
)
from tests.kill_invariants import logged_errors
from tests.kill_points import Driver, converge, start_scenarios
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
FAULTS = {
    "etcd and kube-apiserver": ("etcd", "kube-apiserver", "kube-scheduler"),
    "kube-apiserver": ("kube-apiserver", "kube-scheduler"),
    "etcd": ("etcd",),
}
PAUSE_SECONDS = (2.0, 10.0)  # jobs progress between faults
EXTRA_DOWN_SECONDS = 8.0
# kube/backoff.py: 1 s doubling to 30 s, jittered ±20 %. A delay above this is not that backoff.
BACKOFF_CEILING = 30 * 1.2
STARTUP_REFUSAL = "the API server refused: HTTP 403"
RETRY_LINE = re.compile(r"(?P<name>[^:]+ in [^:]+): .*; retrying in (?P<delay>[0-9.]+)s", re.DOTALL)
LISTED_LINE = re.compile(r"(?P<name>[^:]+ in [^:]+): listed \d+ object\(s\) in .*")


def restart_count() -> int:
    return int(os.environ.get("TJ_CONTROL_PLANE_RESTARTS") or 6)


def jobs_in_flight() -> int:
    """TJ_CONTROL_PLANE_JOBS (default 4): scenarios running at once, each starting the next job when it ends; more
    puts the faults under load from many jobs (docs/reliability.md has a run with 40)."""
    return int(os.environ.get("TJ_CONTROL_PLANE_JOBS") or 4)


def chosen_seed() -> int:
    return int(os.environ.get("TJ_CONTROL_PLANE_SEED") or random.SystemRandom().randrange(2**32))


@dataclass(frozen=True)
class Fault:
    what: str
    down_seconds: float  # from the first stop to the last component healthy again
    steps: tuple[str, ...]  # what the driver's jobs were doing


def inject(state: object, rng: random.Random, driver: Driver) -> Fault:
    what = rng.choice(sorted(FAULTS))
    extra = rng.uniform(0, EXTRA_DOWN_SECONDS)
    steps = tuple(sorted(driver.doing.values()))
    began = time.monotonic()
    restart(state, FAULTS[what], while_down=lambda: time.sleep(extra))
    return Fault(what, time.monotonic() - began, steps)


def log_messages(log: str) -> list[str]:
    """The messages of the operator's JSON log lines (a traceback's lines are not JSON and are left out here)."""
    messages = []
    for line in log.splitlines():
        try:
            messages.append(str(json.loads(line).get("message", "")))
        except (ValueError, AttributeError):
            continue
    return messages


def watch_retries(messages: list[str]) -> dict[str, list[float]]:
    """Each informer's logged list/watch failures: the delays it backed off by, in order."""
    delays: dict[str, list[float]] = collections.defaultdict(list)
    for message in messages:
        if match := RETRY_LINE.fullmatch(message):
            delays[match["name"]].append(float(match["delay"]))
    return delays


def informer_count(messages: list[str]) -> int:
    return len({match["name"] for message in messages if (match := LISTED_LINE.fullmatch(message))}) or 1


def gets(running: RunningOperator) -> float:
    """GET requests the operator made so far (its lists and watches among them), answered or refused."""
    return sum(count for (verb, _, _), count in api_requests(running).items() if verb == "get")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.timeout(restart_count() * 150 + 600)
def test_jobs_converge_across_control_plane_restarts_at_random_instants(
    kube: Kube, namespace: str, faulted_operator: RunningOperator, restored_control_plane: object
) -> None:
    seed, count = chosen_seed(), restart_count()
    print(f"control-plane faults: TJ_CONTROL_PLANE_SEED={seed} TJ_CONTROL_PLANE_RESTARTS={count}", end=" ")
    print(f"TJ_CONTROL_PLANE_JOBS={jobs_in_flight()}")
    state, rng, operator = restored_control_plane, random.Random(seed), faulted_operator
    log_start = operator.log_path.stat().st_size
    gets_before, cpu_before, began = gets(operator), cpu_seconds(operator.process.pid), time.monotonic()
    history, driver = start_scenarios(kube, namespace, seed, jobs_in_flight())
    faults: list[Fault] = []
    try:
        for _ in range(count):
            time.sleep(rng.uniform(*PAUSE_SECONDS))
            faults.append(inject(state, rng, driver))
            assert operator.process.poll() is None, f"TJ_CONTROL_PLANE_SEED={seed}: the operator exited: {faults}"
        converged = converge(kube, namespace, driver, history, f"TJ_CONTROL_PLANE_SEED={seed}", f" (faults: {faults})")
        # One process throughout: it reconnected, re-listed and retried on its own.
        assert operator.process.poll() is None
        wait_until(lambda: health(operator)[0] == 200, 90, "/healthz to answer 200", interval=1)
        elapsed, log = time.monotonic() - began, log_since(operator, log_start)
        messages = log_messages(log)
        retries = watch_retries(messages)
        over = {name: max(delays) for name, delays in retries.items() if max(delays) > BACKOFF_CEILING}
        assert not over, f"TJ_CONTROL_PLANE_SEED={seed}: backoff past its bound: {over}"
        # Informers back off at least 0.8 s after every failure, and a watch that works ends every 5 s: even a
        # pessimistic informer (a failure every 0.8 s throughout) makes fewer than 2 GETs a second. A watch that
        # ended at once, again and again without an error, would make hundreds.
        informers = informer_count(log_messages(operator.log_path.read_text(errors="replace")))
        per_second = (gets(operator) - gets_before) / elapsed / informers
        assert per_second < 2, f"TJ_CONTROL_PLANE_SEED={seed}: {per_second:.1f} GETs/s per informer: a hot loop"
        # A just-started API server refuses every request with 403 until its RBAC caches sync (its /readyz says
        # so; a load balancer would wait for it, the operator here talks to it directly): one error line each.
        errors = logged_errors(operator, log_start)
        startup_refusals = [line for line in errors if STARTUP_REFUSAL in line and "Traceback" not in line]
        errors = [line for line in errors if line not in startup_refusals]
        assert not errors, f"TJ_CONTROL_PLANE_SEED={seed}: the operator logged errors:\n" + "\n".join(errors[:20])
        kinds = collections.Counter(fault.what for fault in faults)
        print(
            f"TJ_CONTROL_PLANE_SEED={seed}: {len(faults)} faults ({dict(kinds)}; down "
            f"{min(f.down_seconds for f in faults):.1f}-{max(f.down_seconds for f in faults):.1f}s); "
            f"{len(driver.finished)} jobs ({sum(len(s.done) for s in driver.finished)} steps), "
            f"{len(history.seen)} pods; converged {converged:.1f}s after the last fault; {elapsed:.0f}s in all; "
            f"{per_second:.2f} GETs/s per informer ({informers}); longest backoff "
            f"{max((max(d) for d in retries.values()), default=0):.1f}s, {sum(map(len, retries.values()))} retries; "
            f"re-lists {log.count('listing again')}; refused while RBAC synced: {len(startup_refusals)}; "
            f"operator CPU {cpu_seconds(operator.process.pid) - cpu_before:.1f}s"
        )
    finally:
        driver.stopping.set()
        history.stopping.set()
