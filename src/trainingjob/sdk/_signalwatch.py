"""Seeing SIGTERM while the main thread is blocked in native code.

Why: Python runs a signal handler only on the main thread, between two bytecodes. A training loop blocked in a
framework's native call never gets there: measured with the XGBoost example, a worker sat in an allreduce whose peers
had both gone (XGBoost's Loop::Block, waiting for an event loop that had already stopped) and its SIGTERM handler
never ran, so nothing it had armed could end it before SIGKILL. The interpreter's own C-level handler does run, on
whatever thread the kernel picks, and writes the signal's number to the wakeup fd (signal.set_wakeup_fd); a daemon
thread reading that fd runs as soon as the main thread's native call releases the GIL, which every framework call
that waits does.

The wakeup fd is one per process: if something else holds it (an asyncio loop in the main thread), this watcher
stays out of its way and only the ordinary handler remains.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable

log = logging.getLogger("trainingjob.sdk")

_watched: dict[int, Callable[[int], None]] = {}
_started = False
_lock = threading.Lock()


def watch(signum: int, callback: Callable[[int], None]) -> bool:
    """Call `callback(signum)` from a daemon thread whenever `signum` arrives (its Python handler must be installed
    too: without one the interpreter does not catch the signal at all). From the main thread; True if watched."""
    global _started
    with _lock:
        _watched[signum] = callback
        if _started:
            return True
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        try:
            previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            reader.close()
            writer.close()
            return False
        if previous != -1:  # someone else's (asyncio): give it back
            signal.set_wakeup_fd(previous)
            reader.close()
            writer.close()
            return False
        _started = True
    threading.Thread(target=_read, args=(reader, writer), name="trainingjob-signals", daemon=True).start()
    return True


def _read(reader: socket.socket, writer: socket.socket) -> None:
    """Each byte is one signal's number. `writer` is an argument so that it lives as long as this thread: were it
    collected, its fd would close under the interpreter's signal handler."""
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            callback = _watched.get(signum)
            if callback is not None:
                with contextlib.suppress(Exception):
                    callback(signum)
