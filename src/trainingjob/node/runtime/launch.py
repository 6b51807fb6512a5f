"""What the node agent hands the shim to start one container, and the files the shim leaves behind.

The agent writes `launch.json` into the container's attempt directory and starts the shim on it; the shim (its
own process, in its own session, outliving agent restarts) writes `started.json` once the container's process has
exec'd, streams its output into `container.log` (CRI log format) and writes `exit.json` when it ends. These files
are the truth the agent rebuilds its view from after a restart: no exit.json and a live pid means still running.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

LAUNCH_FILE = "launch.json"
STARTED_FILE = "started.json"
EXIT_FILE = "exit.json"
LOG_FILE = "container.log"
TERMINATION_LOG = "termination-log"


@dataclass
class Mount:
    """A bind mount of a host path (file or directory), or a fresh tmpfs, at `target` inside the container."""

    target: str
    source: str | None = None
    kind: str = "bind"  # bind | tmpfs
    read_only: bool = False
    options: str = ""


@dataclass
class LaunchSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    uid: int
    gid: int
    groups: list[int]
    capabilities: list[str]
    no_new_privs: bool
    read_only_root: bool
    hostname: str
    # Isolation: with `isolate`, the process runs in the pod's network namespace (`netns`), in new mount, UTS,
    # IPC and PID namespaces, on an overlay of the host's / (`upper`/`work` hold its writes) with `hide` masked.
    isolate: bool
    netns: str | None = None
    root: str | None = None
    upper: str | None = None
    work: str | None = None
    hide: list[str] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)
    # The container's cgroup directories (cgroups.py), joined by its process before exec; [] runs it unconfined.
    cgroups: list[str] = field(default_factory=list)

    def write(self, directory: Path) -> Path:
        path = directory / LAUNCH_FILE
        write_json(path, asdict(self))
        return path

    @classmethod
    def read(cls, path: Path) -> LaunchSpec:
        data = json.loads(path.read_text())
        data["mounts"] = [Mount(**m) for m in data.get("mounts", [])]
        return cls(**data)


def write_json(path: Path, data: Any) -> None:
    """Atomically: a reader (the agent, maybe after a crash) sees the old file or the whole new one."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), which differs for a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
