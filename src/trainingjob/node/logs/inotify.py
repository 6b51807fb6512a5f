"""inotify on one directory, awaitable: how `kubectl logs -f` learns of new lines without polling the file.

The log follower watches the container's attempt directory: the log file growing (IN_MODIFY) and exit.json
appearing (written by rename: IN_MOVED_TO) both wake it.

Where the kernel refuses an inotify instance (EMFILE: fs.inotify.max_user_instances, 128 by default, is shared by
every process of the user, and a machine running several local clusters used them all up), the follower looks
again every POLL_SECONDS instead (`directory_watch`): a follow request that failed there ended at once with an empty
200 through the API server, so `kubectl logs -f` showed nothing of a worker that was writing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
from pathlib import Path

IN_MODIFY = 0x00000002
IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
POLL_SECONDS = 0.5

logger = logging.getLogger(__name__)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]


class DirectoryWatch:
    def __init__(self, directory: Path) -> None:
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if _libc.inotify_add_watch(self.fd, str(directory).encode(), IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0:
            error = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(error, f"inotify_add_watch {directory}")
        self.changed = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.fd, self._drain)

    def _drain(self) -> None:
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass
        self.changed.set()

    async def wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), seconds)
        self.changed.clear()

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
        os.close(self.fd)


class PollingWatch:
    """A DirectoryWatch without inotify: every wait is a short sleep, so the follower re-reads the file."""

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(min(seconds, POLL_SECONDS))

    def close(self) -> None:
        pass


def directory_watch(directory: Path) -> DirectoryWatch | PollingWatch:
    """An inotify watch of `directory`, or a PollingWatch where the kernel refuses one (said in the node's log)."""
    try:
        return DirectoryWatch(directory)
    except OSError as error:
        logger.warning("no inotify watch for %s (%s): following the log by re-reading it", directory, error)
        return PollingWatch()
