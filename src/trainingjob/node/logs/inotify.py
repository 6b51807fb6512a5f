"""inotify on one directory, awaitable: how `kubectl logs -f` learns of new lines without polling the file.

The log follower watches the container's attempt directory: the log file growing (IN_MODIFY) and exit.json
appearing (written by rename: IN_MOVED_TO) both wake it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
from pathlib import Path

IN_MODIFY = 0x00000002
IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

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
