"""The operator SIGKILLed at TJ_KILL_POINTS (default 50) random instants while jobs on kwok nodes are created,
scaled, gang-restarted after a worker failure, evicted, suspended and resumed, finished and deleted; then, once it
runs again, nothing is lost, stuck, duplicated or counted twice (issue 41; docs/reliability.md has the figures).

The seed (TJ_KILL_SEED, random by default) draws the jobs' scenarios and the kill instants; it is printed, and
every failure names it. `make chaos` runs more kill points (KILLS=N).
"""

from __future__ import annotations

import dataclasses
import os
import random
import time

import pytest

from tests.integration.test_leader_election import adopt, lease_holder
from tests.kill_invariants import logged_errors
from tests.kill_points import Driver, PodHistory, converge
from tests.kill_schedule import Chaos, chosen_seed
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
JOBS_IN_FLIGHT = 6


def kill_count() -> int:
    return int(os.environ.get("TJ_KILL_POINTS") or 50)


# A round takes about 3 s on an idle machine and up to 17 s at load average 25 on 2 cores.
@pytest.mark.timeout(kill_count() * 20 + 300)
def test_operator_killed_at_random_instants_loses_duplicates_and_double_counts_nothing(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    seed, count = chosen_seed(), kill_count()
    print(f"kill points: TJ_KILL_SEED={seed} TJ_KILL_POINTS={count}")
    began = time.monotonic()
    log_start = operator.log_path.stat().st_size
    history = PodHistory(kube, namespace)
    history.start()
    history.listed.wait(30)
    driver = Driver(kube, namespace, seed, JOBS_IN_FLIGHT)
    identity = wait_until(lambda: lease_holder(kube), 60, "a lease holder")
    template = dataclasses.replace(operator, extra_args=Chaos.arguments(operator, identity))
    chaos = Chaos(template, random.Random(seed), driver)
    operator.stop(hard=True)
    driver.start()
    last = None
    try:
        chaos.kill_rounds(count)
        driver.stopping.set()
        last = chaos.last_start()
        converged = converge(kube, namespace, driver, history, f"TJ_KILL_SEED={seed}")
        errors = logged_errors(operator, log_start)
        assert not errors, f"TJ_KILL_SEED={seed}: the operators logged errors:\n" + "\n".join(errors[:20])
        assert not driver.held, f"TJ_KILL_SEED={seed}: jobs stored without admission's stamp: {driver.held}"
        print(
            f"TJ_KILL_SEED={seed}: {chaos.summary()}; {len(driver.finished)} jobs played "
            f"({sum(len(s.done) for s in driver.finished)} steps), {len(history.seen)} pods; converged "
            f"{converged:.1f}s after the last kill; {time.monotonic() - began:.0f}s in all; "
            f"pod watch re-listed {history.relists}x"
        )
    finally:
        driver.stopping.set()
        history.stopping.set()
        last = last or chaos.last_start()
        chaos.close()
        adopt(operator, last)
