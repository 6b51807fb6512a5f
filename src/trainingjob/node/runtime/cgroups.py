"""Per-container cgroups (v1 and v2): the kernel enforces memory and CPU limits, and tells an OOM kill apart.

Layout, like the kubelet's (kubepods/pod<uid>/<container>): `<base>/<node>/pod<uid>/<container>.<attempt>`, where
the base is `trainingjob` under the agent's own cgroup on v1 (so pods stay inside whatever limits the machine puts
on the agent), and `trainingjob` at the top of the unified hierarchy on v2 (a v2 cgroup that holds processes, as the
agent's does, cannot give controllers to children). The agent creates the directories and writes the limits; the
container's process joins them itself before it execs (shim.py), so nothing of it ever runs unconfined, and the
shim, which stays outside, reads the OOM-kill counter when the process has ended: a kill by the OOM killer is then
reported as reason OOMKilled, as containerd reports it. On v2 `memory.oom.group` is set, so an OOM kill ends the
whole container, as the kubelet configures it.

Where cgroups cannot be used (the agent not root, no memory or cpu controller, a v2 hierarchy that refuses to
delegate them), `Cgroups.reason` says why: containers then run unconfined and the node logs it once.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from trainingjob.node.runtime.launch import read_json, write_json
from trainingjob.node.runtime.limits import CgroupLimits

log = logging.getLogger(__name__)
V1_CONTROLLERS = ("memory", "cpu", "cpuacct")
V2_CONTROLLERS = ("memory", "cpu", "pids")
BASE_NAME = "trainingjob"
# In the node's state directory: the node's cgroup directories, for `tj cluster down` to remove.
CGROUPS_FILE = "cgroups.json"


@dataclass(frozen=True)
class Mounted:
    """The cgroup hierarchies this process sees: v1 controller -> mount point, and the v2 mount (if any)."""

    v1: dict[str, str] = field(default_factory=dict)
    v2: str | None = None


def mounted_hierarchies(mountinfo: str) -> Mounted:
    """From /proc/self/mountinfo (pure): which controllers are mounted where."""
    v1: dict[str, str] = {}
    v2 = None
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 10:
            continue
        after = line.split(" - ", 1)[1].split()
        kind, options = after[0], after[2] if len(after) > 2 else ""
        if kind == "cgroup2" and v2 is None:
            v2 = fields[4]
        elif kind == "cgroup":
            for option in options.split(","):
                if option in V1_CONTROLLERS:
                    v1.setdefault(option, fields[4])
    return Mounted(v1, v2)


def own_paths(proc_cgroup: str) -> dict[str, str]:
    """From /proc/self/cgroup (pure): controller (or "" for v2) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _keyed(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values


class Cgroups:
    """The node's cgroup base directories, found once when the agent starts."""

    def __init__(self, node: str, version: int | None, bases: dict[str, Path], reason: str = "") -> None:
        self.node = node
        self.version = version
        self.bases = bases
        self.reason = reason

    @property
    def enforced(self) -> bool:
        return self.version is not None

    @classmethod
    def detect(cls, node: str, root: Path = Path("/")) -> Cgroups:
        if os.geteuid() != 0:
            return cls(node, None, {}, "the node agent does not run as root")
        mounted = mounted_hierarchies(_read(root / "proc/self/mountinfo"))
        own = own_paths(_read(root / "proc/self/cgroup"))
        if "memory" in mounted.v1 and "cpu" in mounted.v1:
            bases = {
                name: Path(mount) / own.get(name, "/").lstrip("/") / BASE_NAME / node
                for name, mount in mounted.v1.items()
            }
            try:  # a read-only cgroupfs (a container without delegation) is found here, not at every pod start
                for base in bases.values():
                    base.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                return cls(node, None, {}, f"cgroup v1 refused a directory for the node's pods: {error}")
            return cls(node, 1, bases)
        if mounted.v2 is not None:
            return cls._detect_v2(node, Path(mounted.v2))
        return cls(node, None, {}, "no cgroup hierarchy with the memory and cpu controllers is mounted")

    @classmethod
    def _detect_v2(cls, node: str, mount: Path) -> Cgroups:
        available = _read(mount / "cgroup.controllers").split()
        missing = [c for c in ("memory", "cpu") if c not in available]
        if missing:
            return cls(node, None, {}, f"cgroup v2 at {mount} does not offer the {', '.join(missing)} controller")
        base = mount / BASE_NAME
        try:
            _enable_controllers(mount, available)
            base.mkdir(exist_ok=True)
            _enable_controllers(base, available)
        except OSError as error:
            return cls(node, None, {}, f"cgroup v2 at {mount} refused to delegate controllers: {error}")
        return cls(node, 2, {"": base / node})

    def container_dirs(self, pod_uid: str, container: str, attempt: int) -> list[str]:
        leaf = f"pod{pod_uid}/{container}.{attempt}"
        return list(dict.fromkeys(str(base / leaf) for base in self.bases.values()))  # co-mounted: one directory

    def create(self, pod_uid: str, container: str, attempt: int, limits: CgroupLimits) -> list[str]:
        """Make the container's cgroups with its limits; the directories its process must join ([] unenforced)."""
        if not self.enforced:
            return []
        dirs = self.container_dirs(pod_uid, container, attempt)
        for directory in map(Path, dirs):
            if self.version == 2:
                for level in (directory.parent.parent, directory.parent):
                    level.mkdir(exist_ok=True)
                    _enable_controllers(level, _read(level / "cgroup.controllers").split())
            directory.mkdir(parents=True, exist_ok=True)
            write_limits(directory, limits)
        return dirs

    def record(self, path: Path) -> None:
        """Add this node's base directories to those recorded (an agent restarted elsewhere may have others)."""
        recorded = recorded_bases(path)
        write_json(path, {"bases": sorted({*recorded, *map(str, self.bases.values())})})

    def pod_dirs(self, pod_uid: str) -> list[Path]:
        return list(dict.fromkeys(base / f"pod{pod_uid}" for base in self.bases.values()))

    def remove_pod(self, pod_uid: str) -> None:
        """Remove the pod's cgroups (their processes have ended); what is still busy stays for a later try."""
        for directory in self.pod_dirs(pod_uid):
            remove_tree(directory)


def _enable_controllers(directory: Path, available: list[str]) -> None:
    wanted = [c for c in V2_CONTROLLERS if c in available]
    enabled = _read(directory / "cgroup.subtree_control").split()
    missing = [c for c in wanted if c not in enabled]
    if missing:
        _write(directory / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))


def write_limits(directory: Path, limits: CgroupLimits) -> None:
    """The limits in the files this directory's version has (one call per controller directory on v1)."""
    files = {p.name for p in directory.iterdir()}
    if "memory.limit_in_bytes" in files and limits.memory_bytes is not None:
        _write(directory / "memory.limit_in_bytes", str(limits.memory_bytes))
    if "cpu.cfs_quota_us" in files:
        _write(directory / "cpu.cfs_period_us", str(limits.cpu_period_us))
        _write(directory / "cpu.cfs_quota_us", str(limits.cpu_quota_us or -1))
        _write(directory / "cpu.shares", str(limits.cpu_shares))
    if "memory.max" in files:
        _write(directory / "memory.max", str(limits.memory_bytes) if limits.memory_bytes is not None else "max")
        if "memory.swap.max" in files:
            _write(directory / "memory.swap.max", "0")
        if "memory.oom.group" in files:
            _write(directory / "memory.oom.group", "1")
    if "cpu.max" in files:
        quota = str(limits.cpu_quota_us) if limits.cpu_quota_us is not None else "max"
        _write(directory / "cpu.max", f"{quota} {limits.cpu_period_us}")
        _write(directory / "cpu.weight", str(limits.cpu_weight))


def join(dirs: list[str]) -> None:
    """Move the calling process into `dirs` ("0" names the writer itself, in any PID namespace)."""
    for directory in dirs:
        _write(Path(directory) / "cgroup.procs", "0")


def oom_kills(dirs: list[str]) -> int:
    """How many processes of the container the OOM killer has killed (v1 memory.oom_control, v2 memory.events)."""
    count = 0
    for directory in map(Path, dirs):
        count += _keyed(_read(directory / "memory.oom_control")).get("oom_kill", 0)
        count += _keyed(_read(directory / "memory.events")).get("oom_kill", 0)
    return count


@dataclass(frozen=True)
class Usage:
    """What the container has used: CPU time (ns, cumulative), memory now (bytes), CFS throttling counts."""

    cpu_ns: int = 0
    memory_bytes: int = 0
    throttled_periods: int = 0


def usage(dirs: list[str]) -> Usage:
    cpu_ns = memory = throttled = 0
    for directory in map(Path, dirs):
        if (text := _read(directory / "cpuacct.usage").strip()).isdigit():
            cpu_ns = int(text)
        if (text := _read(directory / "memory.usage_in_bytes").strip()).isdigit():
            memory = int(text)
        if (text := _read(directory / "memory.current").strip()).isdigit():
            memory = int(text)
        stat = _keyed(_read(directory / "cpu.stat"))
        if "usage_usec" in stat:
            cpu_ns = stat["usage_usec"] * 1000
        throttled = max(throttled, stat.get("nr_throttled", 0))
    return Usage(cpu_ns, memory, throttled)


def remove_tree(directory: Path) -> None:
    """rmdir bottom-up (cgroup directories only go with rmdir, and only once empty of processes)."""
    if not directory.is_dir():
        return
    for child in sorted((p for p in directory.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        directory.rmdir()


def recorded_bases(path: Path) -> list[str]:
    return list((read_json(path) or {}).get("bases") or [])


def remove_node(path: Path) -> None:
    """The node's base directories recorded at `path`, and `trainingjob` above them when nothing else is left."""
    for base in map(Path, recorded_bases(path)):
        remove_tree(base)
        with contextlib.suppress(OSError):
            base.parent.rmdir()


def remove_dirs(dirs: list[str]) -> None:
    for directory in dirs:
        with contextlib.suppress(OSError):
            Path(directory).rmdir()
