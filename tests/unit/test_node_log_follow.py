"""`kubectl logs -f` on a local node where the kernel refuses an inotify instance (EMFILE once every instance of the
user is taken): the follower re-reads the log instead of failing the request, and streams to the container's end."""

from __future__ import annotations

import asyncio
from pathlib import Path

from trainingjob.node.logs import inotify
from trainingjob.node.logs.logquery import LogQuery
from trainingjob.node.logs.logserver import stream_log
from trainingjob.node.runtime.containers import ContainerProcess
from trainingjob.node.runtime.launch import EXIT_FILE, LOG_FILE, write_json


class NoInotify:
    """libc whose inotify_init1 fails, as with EMFILE."""

    def inotify_init1(self, flags: int) -> int:
        return -1


class Response:
    """Collects what the follower writes; after the first write the container writes a line and exits."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self.written.append(chunk)
        if len(self.written) == 1:
            with (self.directory / LOG_FILE).open("ab") as log:
                log.write(b"2026-11-28T20:00:01.000000000Z stdout F second\n")
            write_json(self.directory / EXIT_FILE, {"exitCode": 0})


def test_without_inotify_a_follower_polls_and_streams_to_the_end(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(inotify, "_libc", NoInotify())
    directory = tmp_path / "0"
    directory.mkdir()
    (directory / LOG_FILE).write_bytes(b"2026-11-28T20:00:00.000000000Z stdout F first\n")
    assert isinstance(inotify.directory_watch(directory), inotify.PollingWatch)
    response = Response(directory)
    asyncio.run(asyncio.wait_for(stream_log(ContainerProcess(directory), LogQuery(follow=True), response), 30))
    assert b"".join(response.written) == b"first\nsecond\n"
