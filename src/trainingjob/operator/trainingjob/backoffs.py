"""How long a job waits before it is planned again, per cause; each delay doubles per occurrence in a row
(kube/backoff.py). A reconcile that raised is retried by the work queue's own rate limit (runtime/queue.py)."""

from __future__ import annotations

from trainingjob.kube.backoff import doubling

# A job whose creates admission refused is planned again after this backoff (doubling per refusal in a row): the
# plan records the refusal, and creates it does not gate on the restart backoff (its Service, its ConfigMap) are
# tried again no sooner. Requeued at once, a job in a namespace being deleted spun at tens of reconciles a second.
ADMISSION_REQUEUE_BASE = 0.5
ADMISSION_REQUEUE_MAX = 30.0
# A job whose worker name a pod that is not its worker holds (operator/namesakes.py): that pod's deletion may send
# no event (a relabelled pod is not watched), so the job looks again by itself.
NAME_TAKEN_RECHECK_BASE = 2.0
NAME_TAKEN_RECHECK_MAX = 60.0


def admission_requeue_delay(refusals_in_a_row: int) -> float:
    """Seconds until a job admission refused is planned again: 0.5, 1, 2, … up to 30."""
    return doubling(ADMISSION_REQUEUE_BASE, ADMISSION_REQUEUE_MAX, refusals_in_a_row)


def name_taken_recheck(taken_in_a_row: int) -> float:
    """Seconds until a job whose worker name is taken creates it again: 2, 4, 8, … up to 60."""
    return doubling(NAME_TAKEN_RECHECK_BASE, NAME_TAKEN_RECHECK_MAX, taken_in_a_row)
