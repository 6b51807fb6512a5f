"""Report training progress to the operator without ever getting in the training loop's way.

Why it is built like this (the contract is docs/progress-protocol.md):

- Reports are a nice-to-have, training is what matters: nothing here raises into the caller, and nothing here
  waits for the network. The HTTP request runs on a background daemon thread with a queue of one: while it is busy,
  a newer report replaces the one waiting, keeping the fields the newer one lacks (a checkpoint, an epoch). An
  endpoint that drops packets costs that thread retries x timeout; the loop only pays for building a small dict.
- Network errors, HTTP errors and bad input are logged once per kind (repeats at DEBUG) on the ``trainingjob.sdk``
  logger and dropped.
- Training code may report every step, but the operator updates the status at most every few seconds: the reporter
  sends at most one report per ``min_interval`` seconds and drops the ones in between. The newest dropped report is
  kept, and ``flush()`` sends it (call it when training ends; it is also attempted, briefly, at interpreter exit);
  a report sent later simply replaces it (no merging).
- Checkpoint and stop reports are never throttled away: they go out even inside the throttle window. Only while the
  endpoint asked for a pause (429 Retry-After) or after it was unreachable is a checkpoint held back, and then it
  rides along with the next report that is sent (or with ``flush()``), so ``status.lastCheckpoint`` catches up.
- 5xx answers and connection errors are retried ``retries`` times with exponential backoff (``backoff``, 2 * backoff,
  …); after that, or after a 429, reports are skipped for a while (``failure_pause``, or the Retry-After).
  ``flush(timeout)`` waits out such a pause when it ends within the timeout, then sends again.
- The clock, sleep, HTTP opener and environment are injectable, so tests neither sleep nor need a cluster.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import _env
from ._body import Problem, build_body, clean_checkpoint, has_content
from ._sender import BackgroundSender, flush_at_exit
from ._transport import Opener, Outcome, Transport, progress_url

log = logging.getLogger("trainingjob.sdk")

FLUSH_SECONDS = 5.0  # how long flush() waits for the sender by default

# A report body and its sequence number: the higher one is the newer report, whichever thread holds it.
Numbered = tuple[int, dict[str, Any]]


class ProgressReporter:
    """The reporting state of one process: throttle clock, held-back reports, pause, and warnings already given."""

    def __init__(
        self,
        *,
        min_interval: float = 2.0,
        retries: int = 3,
        backoff: float = 0.25,
        timeout: float = 3.0,
        failure_pause: float = 10.0,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        opener: Opener | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """Read the endpoint, CA file, token file and worker index from `env` (default: os.environ) once."""
        env = dict(os.environ if env is None else env)
        self.min_interval = min_interval
        self.failure_pause = failure_pause
        self._in_job = _env.in_job(env)
        worker = _env.env_int(_env.WORKER_INDEX, None, env)
        self.worker = worker if worker is not None and worker >= 0 else None
        url = progress_url(env)
        self._transport = (
            None
            if url is None
            else Transport(
                url,
                ca_file=env.get(_env.PROGRESS_CA_FILE, "").strip() or None,
                token_file=env.get(_env.PROGRESS_TOKEN_FILE, "").strip() or None,
                retries=retries,
                backoff=backoff,
                timeout=timeout,
                sleep=sleep,
                opener=opener,
                once=self._once,
            )
        )
        self._clock = clock
        self._sleep = sleep
        self._log = logger or log
        self._lock = threading.RLock()
        self._seen: set[str] = set()
        self._numbers = itertools.count(1)
        self._last_sent: float | None = None
        self._paused_until: float | None = None
        self._last_outcome: Outcome | None = None
        self._pending: Numbered | None = None  # the newest report not sent (throttled, or held back)
        self._pending_checkpoint: Numbered | None = None  # (number, checkpoint) not delivered yet
        self._sender: BackgroundSender[Numbered] = BackgroundSender(self._send, _newer_wins, "trainingjob-progress")
        if self._transport is not None:
            flush_at_exit(self.flush)

    @property
    def enabled(self) -> bool:
        """Whether reports go anywhere: inside a TrainingJob that has a progress endpoint."""
        return self._transport is not None

    @property
    def url(self) -> str | None:
        """Where reports are POSTed, or None when disabled."""
        return None if self._transport is None else self._transport.url

    def report_progress(
        self,
        epoch: int | None = None,
        total_epochs: int | None = None,
        step: int | None = None,
        total_steps: int | None = None,
        metrics: Mapping[str, float] | None = None,
        **extra_metrics: float,
    ) -> bool:
        """Report where training is; True if the report was handed to the sender. Never raises, never waits.

        `metrics` and the keyword metrics (``loss=0.4``) are merged, the keywords winning. Invalid fields (NaN,
        negative counts, bad metric names, `epoch > total_epochs`, …) are dropped with one warning per kind.
        False: disabled, nothing valid, throttled (kept for ``flush()``), or paused after a 429 or an unreachable
        endpoint. Whether the endpoint accepted it shows later, in the log and in ``flush()``'s answer.
        """
        fields = {"epoch": epoch, "total_epochs": total_epochs, "step": step, "total_steps": total_steps}
        return self._guarded(lambda: self._report({**fields, "metrics": metrics, "extra_metrics": extra_metrics}))

    def report_checkpoint(
        self, path: str | os.PathLike[str], epoch: int | None = None, step: int | None = None
    ) -> bool:
        """Report a saved checkpoint, even inside the throttle window; True if handed to the sender. Never raises."""

        def report() -> bool:
            checkpoint, problems = clean_checkpoint(path, epoch, step)
            return self._report({}, checkpoint, problems)

        return self._guarded(report)

    def report_stop(
        self, path: str | os.PathLike[str] | None = None, epoch: int | None = None, step: int | None = None
    ) -> bool:
        """Tell the operator this worker stops on request (SIGTERM), with the checkpoint it saved on the way out
        (`path`; None: it saved none), so status says whether the stop was checkpointed. Never throttled away;
        True if handed to the sender. Never raises."""

        def report() -> bool:
            checkpoint, problems = (None, []) if path is None else clean_checkpoint(path, epoch, step)
            return self._report({"stopped": True}, checkpoint, problems)

        return self._guarded(report)

    def flush(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Send the newest report (and checkpoint) held back, then wait up to `timeout` s for the sender.

        Ignores the throttle window. A pause (after a 429, or after the endpoint was unreachable) is waited out
        when it ends within `timeout`, and the report is sent again: the last report of a training run is the one
        worth waiting for, and an operator restarting or a network blip lasts seconds. True if everything reported
        so far has been accepted by the endpoint, or reporting is off (outside a TrainingJob: nothing to deliver);
        False if something is held back, still in flight, or failed. Never raises.
        """

        def send_pending() -> bool:
            deadline = self._clock() + max(0.0, timeout)
            while True:
                with self._lock:
                    if self._transport is None:
                        return True  # outside a job nothing was to be delivered
                    self._queue_pending(self._clock())
                idle = self._sender.wait_idle(max(0.0, deadline - self._clock()))
                with self._lock:
                    held = self._pending is not None or self._pending_checkpoint is not None
                    if not idle or not held:
                        return idle and self._last_outcome is Outcome.SENT
                    resume = self._paused_until if self._paused_until is not None else self._clock()
                if resume >= deadline:
                    return False
                self._sleep(max(0.0, resume - self._clock()))
                if self._clock() < resume:
                    return False  # the (injected) clock did not move: waiting again would spin

        return self._guarded(send_pending)

    def _queue_pending(self, now: float) -> None:
        """Hand what is held back to the sender unless a pause still runs (caller holds the lock)."""
        paused = self._paused_until is not None and now < self._paused_until
        if not paused and (self._pending is not None or self._pending_checkpoint is not None):
            number, body = self._pending or (next(self._numbers), self._identity())
            self._queue(number, dict(body), now)

    def wait(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Wait up to `timeout` s until reports already handed to the sender are sent or given up; True if so."""
        return self._guarded(lambda: self._sender.wait_idle(timeout))

    # --- internals -------------------------------------------------------------------------------------------------

    def _guarded(self, action: Callable[[], bool]) -> bool:
        try:
            return action()
        except Exception:  # the training loop must never see our failures
            self._once("unexpected", logging.ERROR, "progress report failed unexpectedly; dropped", exc_info=True)
            return False

    def _once(self, kind: str, level: int, message: str, *args: object, exc_info: bool = False) -> None:
        """Log at `level` the first time this kind of thing happens, at DEBUG afterwards."""
        first = kind not in self._seen
        self._seen.add(kind)
        self._log.log(level if first else logging.DEBUG, message, *args, exc_info=exc_info)

    def _report(
        self, fields: dict[str, Any], checkpoint: dict[str, Any] | None = None, problems: Sequence[Problem] = ()
    ) -> bool:
        if self._transport is None:
            # A script run outside a job (no endpoint) is normal and stays quiet; a job that names an endpoint but
            # not itself is misconfigured, and says so.
            level = logging.WARNING if self._in_job else logging.DEBUG
            reason = "TRAININGJOB_NAME/TRAININGJOB_NAMESPACE unset" if self._in_job else "no progress endpoint"
            self._once("not-in-job", level, "trainingjob.sdk: %s; progress reports are ignored", reason)
            return False
        body, more = build_body(worker=self.worker, checkpoint=checkpoint, **fields)
        self._warn_invalid([*problems, *more])
        if not has_content(body):
            self._once("empty", logging.WARNING, "progress report has nothing valid to send; dropped")
            return False
        with self._lock:
            number, now = next(self._numbers), self._clock()
            if self._paused_until is not None and now < self._paused_until:
                self._hold(number, body)
                return False
            throttled = self._last_sent is not None and now - self._last_sent < self.min_interval
            if throttled and "checkpoint" not in body and "stopped" not in body:
                self._pending = (number, body)
                return False
            self._queue(number, body, now)
            return True

    def _warn_invalid(self, problems: Sequence[Problem]) -> None:
        """One warning naming every newly seen kind of invalid field; repeats of known kinds at DEBUG."""
        if not problems:
            return
        new = [message for kind, message in problems if kind not in self._seen]
        self._seen.update(kind for kind, _ in problems)
        level = logging.WARNING if new else logging.DEBUG
        shown = new or [message for _, message in problems]
        self._log.log(level, "progress report: dropped invalid fields: %s", "; ".join(shown))

    def _identity(self) -> dict[str, Any]:
        return {} if self.worker is None else {"worker": self.worker}

    def _hold(self, number: int, body: dict[str, Any]) -> None:
        """Keep `body` for later unless something newer is already kept (the sender may hand back older ones)."""
        if self._pending is None or self._pending[0] < number:
            self._pending = (number, body)
        checkpoint = body.get("checkpoint")
        if checkpoint is not None and (self._pending_checkpoint is None or self._pending_checkpoint[0] < number):
            self._pending_checkpoint = (number, checkpoint)

    def _queue(self, number: int, body: dict[str, Any], now: float) -> None:
        """Hand `body` to the sender thread, with the fields of an older report held back (throttled) under it and
        the checkpoint held back if it has none (caller holds the lock).

        Why merge: a loop that reports an epoch and then saves a checkpoint has the epoch report throttled and the
        checkpoint report sent at once; dropping the former lost every epoch after the first of a fast job, which
        then Succeeded at 25 %."""
        if self._pending is not None and self._pending[0] < number:
            body = {**self._pending[1], **body}
        if "checkpoint" not in body and self._pending_checkpoint is not None:
            body["checkpoint"] = self._pending_checkpoint[1]
        self._pending = self._pending_checkpoint = None
        self._last_sent = now
        self._sender.submit((number, body))

    def _send(self, item: Numbered) -> None:
        """On the sender thread: POST outside the lock, so report calls never wait for the network."""
        number, body = item
        with self._lock:
            if self._paused_until is not None and self._clock() < self._paused_until:
                self._hold(number, body)  # queued before the pause began: keep it for later instead
                return
        assert self._transport is not None
        outcome, retry_after = self._transport.post(body)
        with self._lock:
            self._last_outcome = outcome
            if outcome is Outcome.RATE_LIMITED:
                self._paused_until = self._clock() + retry_after
            elif outcome is Outcome.UNREACHABLE:
                self._paused_until = self._clock() + self.failure_pause
                self._log.debug("progress reports paused for %.1fs", self.failure_pause)
            if outcome in (Outcome.RATE_LIMITED, Outcome.UNREACHABLE):
                self._hold(number, body)


def _newer_wins(waiting: Numbered, newer: Numbered) -> Numbered:
    """The newer report replaces one still waiting for the sender, field by field: what the newer one lacks (the
    epoch of a progress report followed at once by a checkpoint-only report, or a checkpoint) is kept."""
    return newer[0], {**waiting[1], **newer[1]}
