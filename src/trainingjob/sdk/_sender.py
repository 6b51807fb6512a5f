"""A background daemon thread with a queue of one: the training loop hands over, the thread does the slow part.

Why a queue of exactly one: a progress report is only interesting until a newer one exists, so when the endpoint is
slow (a blackholed Service costs retries x timeout, seconds per report) the reports waiting behind it are merged into
one slot, newest winning, instead of piling up in memory or, worse, being sent synchronously from the loop.
Why a daemon thread: a hung endpoint must never keep a finished training process alive; ``flush_at_exit`` gives
the last report a short, bounded chance at interpreter exit instead.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

EXIT_FLUSH_SECONDS = 2.0  # all reporters together, at interpreter exit

log = logging.getLogger("trainingjob.sdk")


class BackgroundSender(Generic[T]):
    """Runs `send(item)` on its own daemon thread for the newest submitted item; `submit` never waits for it."""

    def __init__(self, send: Callable[[T], None], combine: Callable[[T, T], T], name: str) -> None:
        """`combine(waiting, newer)` decides what is sent when a newer item replaces one still waiting."""
        self._send = send
        self._combine = combine
        self._name = name
        self._cond = threading.Condition()
        self._slot: T | None = None
        self._busy = False
        self._thread: threading.Thread | None = None

    def submit(self, item: T) -> None:
        """Put `item` in the slot (merged with one still waiting) and wake the thread; returns at once."""
        with self._cond:
            self._slot = item if self._slot is None else self._combine(self._slot, item)
            self._ensure_thread()
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until nothing is waiting or in flight; True if it got there."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._slot is not None or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _ensure_thread(self) -> None:
        # Also restarts the thread in a child process after fork(), where the parent's thread does not exist.
        if self._thread is None or not self._thread.is_alive():
            self._busy = False
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._slot is None:
                    self._cond.wait()
                item, self._slot, self._busy = self._slot, None, True
            try:
                self._send(item)
            except Exception:  # the thread must survive anything one send does
                log.debug("progress sender failed unexpectedly", exc_info=True)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


_exit_lock = threading.Lock()
_exit_hooks: list[weakref.WeakMethod[Callable[[float], object]]] = []


def flush_at_exit(flush: Callable[[float], object]) -> None:
    """Call the bound method `flush(timeout)` at interpreter exit; all of them share EXIT_FLUSH_SECONDS."""
    with _exit_lock:
        if not _exit_hooks:
            atexit.register(_flush_all)
        _exit_hooks[:] = [hook for hook in _exit_hooks if hook() is not None]  # reporters since collected
        _exit_hooks.append(weakref.WeakMethod(flush))  # type: ignore[arg-type]


def _flush_all() -> None:
    deadline = time.monotonic() + EXIT_FLUSH_SECONDS
    with _exit_lock:
        hooks = [hook() for hook in _exit_hooks]
    for flush in hooks:
        if flush is not None:
            try:
                flush(max(0.0, deadline - time.monotonic()))
            except Exception:
                log.debug("progress flush at exit failed", exc_info=True)
