"""Restart, backoff, deadline and TTL decisions as pure functions of the spec, a worker and the clock.

Kept apart from the planner so each rule reads as one small function and is tested over event sequences without
building whole jobs.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from trainingjob.api.types import JobSpec
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.roles import restart_policy_of

RETRYABLE_EXIT_CODES = range(128, 256)  # killed by a signal: OOMKilled 137, SIGTERM 143, ...


@dataclass(frozen=True)
class FailureDecision:
    """What to do about one failed worker: Restart, Fail or Ignore, and the reason to report."""

    action: str
    reason: str


def decide_failure(spec: JobSpec, pod: PodView) -> FailureDecision:
    """Rules by exit code first, then the restart policy of the pod's role (spec.roles.<role>.restartPolicy, else
    spec.restartPolicy). Disruptions never get here (they are always retried)."""
    code = pod.exit_code
    for rule in spec.failure_policy.rules:
        if code is not None and code in rule.exit_codes:
            reason = {"Restart": "FailurePolicyRule", "Fail": "FailurePolicyRule", "Ignore": "WorkerIgnored"}
            return FailureDecision(rule.action, reason[rule.action])
    policy = restart_policy_of(spec, pod.role)
    if policy == "Never":
        return FailureDecision("Fail", "WorkerFailed")
    if policy == "ExitCode" and code is not None and code not in RETRYABLE_EXIT_CODES:
        return FailureDecision("Fail", "PermanentExitCode")
    return FailureDecision("Restart", "WorkerFailed")


def backoff_seconds(spec: JobSpec, restart_number: int) -> int:
    """Delay before restart n (1-based): min(base * 2^(n-1), max)."""
    policy = spec.failure_policy
    exponent = max(restart_number - 1, 0)
    if exponent >= 32:  # 2^32 * base exceeds any max; avoid huge integers
        return policy.backoff_max_seconds
    return min(policy.backoff_base_seconds * 2**exponent, policy.backoff_max_seconds)


def backoff_limit_reached(spec: JobSpec, restarts_so_far: int) -> bool:
    return restarts_so_far >= spec.backoff_limit


def seconds_between(start: datetime.datetime | None, now: datetime.datetime) -> float | None:
    return None if start is None else (now - start).total_seconds()


def active_seconds(
    start_time: datetime.datetime | None, suspended_seconds: int, now: datetime.datetime
) -> float | None:
    """Time since the first start, minus time spent suspended."""
    elapsed = seconds_between(start_time, now)
    return None if elapsed is None else elapsed - suspended_seconds


def remaining(limit: int | None, used: float | None) -> float | None:
    """Seconds left before `limit` is reached (≤ 0: reached); None when there is no limit or no clock yet."""
    if limit is None or used is None:
        return None
    return limit - used
