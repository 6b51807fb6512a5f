"""Random kill points with real training (issue 41): the kwok kill points (test_kill_points.py) prove the operator's
bookkeeping; here one real XGBoost job (the digits, 2 workers, a checkpoint every epoch) trains on the local process
nodes while the operator is SIGKILLed three times, at instants drawn from the seed (TJ_KILL_SEED, printed, as in
test_kill_points.py): while it creates the job's children, while the workers train, and around the workers' end.
Each time it stays dead for a drawn while (the workers train on, their progress reports unanswered; at the end a
worker may exit unseen) and is started again with its Lease identity.

Once the job has run to its end: Succeeded with the held-out accuracy the chief reported and its last checkpoint;
the kills cost nothing: one pod per worker over the whole run (a watch from before the create records every pod),
no restart, no disruption, attempt 0, each worker's status equal to its pod; deleted, nothing of it is left (the
finalizer cleared, no orphaned child: pods, Service, ConfigMap, EndpointSlice, the checkpoint claim); no operator
logged an error or a traceback.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration.test_leader_election import adopt, lease_holder
from tests.integration.test_real_frameworks import assert_finished_with_progress, manifest
from tests.jobs import create_job, delete_job, get_job, job_pods
from tests.kill_invariants import deleted_leftovers, logged_errors, orphans_after_collection, status_against_pods
from tests.kill_points import PodHistory, Scenario
from tests.kill_schedule import SPARES, Chaos, chosen_seed
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from tests.real_roles import RUN_TIMEOUT, log_of, log_tails, status_of, wait_status
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
JOB = "xgb-kills"
EPOCHS = 6
EPOCH_SECONDS = 1.5  # paced: the drawn instants land in training, not after it
MAX_DOWN_SECONDS = 3.0  # the longest the operator stays dead after a kill
MIN_ACCURACY = 0.85  # the digits reach 0.9 and more in 6 epochs of 10 rounds


@dataclass
class OneJob:
    """What the job is doing, for the kill log (the kwok kill points' Driver has a slot per job in flight)."""

    doing: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Moment:
    """A point of the job's life; the kill comes a drawn 0 to `window` s after the test sees it."""

    step: str
    what: str
    reached: Callable[[Kube, str], bool]  # (kube, namespace)
    window: float


def epoch_of(status: dict[str, Any]) -> int:
    return int((status.get("progress") or {}).get("epoch", 0))


def drawn_moments(rng: random.Random) -> list[Moment]:
    """Creation (the children being created), an epoch of training drawn from the seed (as the status shows it:
    written at most every 3 s), and the end, seen in the chief's log as it happens: from its last epoch's line the
    kill lands before, between or after the workers' exits, or after the job's Succeeded."""
    epoch = rng.randint(1, EPOCHS - 3)
    last = f"epoch {EPOCHS}/{EPOCHS} ("
    return [
        Moment("create", "the create answered", lambda kube, namespace: True, 1.5),
        Moment(
            "train",
            f"epoch {epoch} in the status",
            lambda kube, namespace: epoch_of(status_of(kube, namespace, JOB)) >= epoch,
            EPOCH_SECONDS,
        ),
        Moment(
            "finish",
            f"worker 0 logged {last.rstrip(' (')}",
            lambda kube, namespace: last in log_of(kube, namespace, f"{JOB}-worker-0"),
            2.5,
        ),
    ]


def job_state(kube: Kube, namespace: str) -> str:
    """The job's phase, reported epoch and each worker pod's phase: where a kill landed."""
    status = (get_job(kube, namespace, JOB) or {}).get("status") or {}
    pods = sorted((p.metadata.name.rsplit("-", 1)[1], p.status.phase) for p in job_pods(kube, namespace, JOB))
    return f"{status.get('phase')} epoch {epoch_of(status)}, pods {dict(pods)}"


def real_job() -> dict[str, Any]:
    """The XGBoost example, 2 workers, EPOCHS paced epochs; its checkpoint claim owned (deleted with the job)."""
    body = manifest("xgboost")
    body["metadata"] = {"name": JOB}
    spec = body["spec"]
    spec["workers"] = 2
    spec["hyperparameters"].update(epochs=EPOCHS, epochSeconds=EPOCH_SECONDS)
    spec["checkpoint"]["deleteOnCompletion"] = True
    return body


@pytest.mark.timeout(3 * RUN_TIMEOUT)
def test_operator_killed_while_real_training_is_created_trains_and_ends_costs_the_job_nothing(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    seed = chosen_seed()
    print(f"kill points with real training: TJ_KILL_SEED={seed}")
    rng, began, log_start = random.Random(seed), time.monotonic(), operator.log_path.stat().st_size
    history = PodHistory(kube, namespace)
    history.start()
    assert history.listed.wait(60), "the pod watch to list"
    identity = wait_until(lambda: lease_holder(kube), 60, "a lease holder")
    template = dataclasses.replace(operator, extra_args=Chaos.arguments(operator, identity))
    chaos = Chaos(template, rng, OneJob())
    chaos.current = operator  # the session's operator serves the create's webhooks and is the first killed
    chaos.spares = [chaos.spawn() for _ in range(SPARES)]  # importing while the job is created
    landed: list[str] = []
    try:
        for moment in drawn_moments(rng):
            chaos.driver.doing[0] = moment.step
            if moment.step == "create":
                create_job(kube, namespace, real_job())
            else:
                seen = moment.reached
                wait_status(kube, namespace, JOB, lambda _, seen=seen: seen(kube, namespace), moment.what, interval=0.2)
            delay, down = rng.uniform(0, moment.window), rng.uniform(0, MAX_DOWN_SECONDS)
            time.sleep(delay)  # the drawn instant, not a wait for anything
            state = job_state(kube, namespace)
            killed = chaos.kill_current(delay)
            time.sleep(down)  # dead for a drawn while: the workers go on without it
            chaos.current = chaos.start()
            landed.append(
                f"{moment.step}: {delay:.2f}s after {moment.what}, {'leading' if killed.leading else 'not leading'}, "
                f"job {state}; down {down:.1f}s, then {chaos.start_seconds[-1]:.1f}s to /healthz"
            )
        print(f"TJ_KILL_SEED={seed}:\n  " + "\n  ".join(landed))
        done = wait_status(kube, namespace, JOB, lambda s: s.get("phase") == "Succeeded", "Succeeded")
        finished = time.monotonic() - began
        check_the_kills_cost_nothing(kube, namespace, history, done, f"TJ_KILL_SEED={seed}")
        delete_job(kube, namespace, JOB)
        wait_until(lambda: get_job(kube, namespace, JOB) is None, 60, "the job to be deleted")
        left = deleted_leftovers(kube, namespace, Scenario(JOB, 2, [], "delete"))
        left += orphans_after_collection(kube, namespace)
        assert not left, f"TJ_KILL_SEED={seed}: left after the deletion: {left}"
        errors = logged_errors(operator, log_start)
        assert not errors, f"TJ_KILL_SEED={seed}: the operators logged errors:\n" + "\n".join(errors[:20])
        print(
            f"TJ_KILL_SEED={seed}: passed; Succeeded {finished:.0f}s after the start, accuracy "
            f"{done['progress']['metrics']['accuracy']:.3f}; {time.monotonic() - began:.0f}s in all"
        )
    finally:
        history.stopping.set()
        adopt(operator, chaos.last_start())


def check_the_kills_cost_nothing(
    kube: Kube, namespace: str, history: PodHistory, done: dict[str, Any], seed: str
) -> None:
    """Succeeded with the real accuracy and the last checkpoint; one pod per worker over the run; nothing counted."""
    detail = f"{seed}: {done}\n{log_tails(kube, namespace, JOB)}"
    assert_finished_with_progress(done, EPOCHS)
    assert done["progress"]["metrics"]["accuracy"] > MIN_ACCURACY, detail
    problems = status_against_pods(kube, namespace, Scenario(JOB, 2, [], "finish"))
    assert not problems, f"{seed}: " + "\n".join(problems) + f"\n{detail}"
    history.stopping.set()
    assert not history.duplicates(), f"{seed}: two pods for one worker and attempt: {history.duplicates()}"
    pods = sorted(key for key in history.seen.values() if key[0] == JOB)
    assert pods == [(JOB, k.WORKER, "0", "0"), (JOB, k.WORKER, "1", "0")], f"{seed}: pods seen {pods}\n{detail}"
