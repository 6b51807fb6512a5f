"""Resource limits on the local node (pure parts): the kubelet's conversions, the cgroup files written for v1 and
v2, which hierarchies a machine mounts, and the exit reason an OOM kill gives. The kernel enforcing them is proven
by tests/integration/test_local_node_limits.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainingjob.node.runtime import cgroups
from trainingjob.node.runtime.limits import CgroupLimits, container_limits, quota_us, shares
from trainingjob.node.runtime.shim import exit_reason


def with_resources(limits: dict | None = None, requests: dict | None = None) -> dict:
    return {"name": "main", "resources": {"limits": limits or {}, "requests": requests or {}}}


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (with_resources(), CgroupLimits(None, None, 100_000, 2)),
        (with_resources({"memory": "128Mi"}), CgroupLimits(128 * 2**20, None, 100_000, 2)),
        (with_resources({"cpu": "500m"}), CgroupLimits(None, 50_000, 100_000, 512)),
        (with_resources({"cpu": "2"}, {"cpu": "250m"}), CgroupLimits(None, 200_000, 100_000, 256)),
        (with_resources({"memory": "1G", "cpu": "1m"}), CgroupLimits(10**9, 1_000, 100_000, 2)),
        (with_resources(requests={"cpu": "100m"}), CgroupLimits(None, None, 100_000, 102)),
    ],
)
def test_container_limits_follow_the_kubelets_conversions(container: dict, expected: CgroupLimits) -> None:
    assert container_limits(container) == expected


def test_quota_and_shares_have_the_kubelets_floors_and_ceilings() -> None:
    assert quota_us(0) == 1_000 and quota_us(1) == 1_000 and quota_us(1500) == 150_000
    assert shares(0) == 2 and shares(1000) == 1024 and shares(10**6) == 262_144


@pytest.mark.parametrize(("shares_", "weight"), [(2, 1), (1024, 39), (262_144, 10_000)])
def test_cpu_weight_is_converted_from_shares_as_runc_does(shares_: int, weight: int) -> None:
    assert CgroupLimits(cpu_shares=shares_).cpu_weight == weight


V1_MOUNTINFO = """\
25 20 0:22 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 / /sys/fs/cgroup/memory rw shared:15 - cgroup cgroup rw,memory
32 25 0:29 / /sys/fs/cgroup/pids rw shared:16 - cgroup cgroup rw,pids
"""
V2_MOUNTINFO = "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"


def test_mounted_hierarchies_are_read_from_mountinfo() -> None:
    v1 = cgroups.mounted_hierarchies(V1_MOUNTINFO)
    assert v1.v1 == {
        "cpu": "/sys/fs/cgroup/cpu,cpuacct",
        "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
        "memory": "/sys/fs/cgroup/memory",
    }
    assert v1.v2 == "/sys/fs/cgroup/unified"
    v2 = cgroups.mounted_hierarchies(V2_MOUNTINFO)
    assert v2.v1 == {} and v2.v2 == "/sys/fs/cgroup"


def test_own_paths_name_each_controllers_cgroup() -> None:
    text = "4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/user.slice\n"
    assert cgroups.own_paths(text) == {"memory": "/process_api/abc", "cpu": "/", "cpuacct": "/", "": "/user.slice"}


def test_co_mounted_controllers_give_one_directory_per_container() -> None:
    base = Path("/sys/fs/cgroup/cpu,cpuacct/trainingjob/c.n")
    node = cgroups.Cgroups("c.n", 1, {"cpu": base, "cpuacct": base, "memory": Path("/m/trainingjob/c.n")})
    assert node.container_dirs("u1", "main", 3) == [f"{base}/podu1/main.3", "/m/trainingjob/c.n/podu1/main.3"]


def fake_dir(tmp_path: Path, *files: str) -> Path:
    for name in files:
        (tmp_path / name).write_text("")
    return tmp_path


def test_v1_limits_are_written_into_the_v1_files(tmp_path: Path) -> None:
    directory = fake_dir(tmp_path, "memory.limit_in_bytes", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares")
    cgroups.write_limits(directory, CgroupLimits(64 * 2**20, 20_000, 100_000, 204))
    written = {p.name: p.read_text() for p in directory.iterdir()}
    assert written == {
        "memory.limit_in_bytes": str(64 * 2**20),
        "cpu.cfs_quota_us": "20000",
        "cpu.cfs_period_us": "100000",
        "cpu.shares": "204",
    }


def test_v2_limits_kill_the_whole_group_and_allow_no_swap(tmp_path: Path) -> None:
    directory = fake_dir(tmp_path, "memory.max", "memory.swap.max", "memory.oom.group", "cpu.max", "cpu.weight")
    cgroups.write_limits(directory, CgroupLimits(None, 50_000, 100_000, 1024))
    written = {p.name: p.read_text() for p in directory.iterdir()}
    assert written == {
        "memory.max": "max",
        "memory.swap.max": "0",
        "memory.oom.group": "1",
        "cpu.max": "50000 100000",
        "cpu.weight": "39",
    }


def test_oom_kills_are_counted_from_either_version(tmp_path: Path) -> None:
    (v1 := tmp_path / "v1").mkdir()
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (v2 := tmp_path / "v2").mkdir()
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 1\n")
    (quiet := tmp_path / "quiet").mkdir()
    (quiet / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert cgroups.oom_kills([str(v1)]) == 2
    assert cgroups.oom_kills([str(v2)]) == 1
    assert cgroups.oom_kills([str(quiet)]) == 0
    assert cgroups.oom_kills([]) == 0


@pytest.mark.parametrize(
    ("exit_code", "oom_kills", "reason"),
    [
        (0, 0, "Completed"),
        (0, 1, "Completed"),
        (1, 0, "Error"),
        (137, 0, "Error"),
        (137, 1, "OOMKilled"),
        (1, 1, "OOMKilled"),
    ],
)
def test_an_oom_kill_is_the_reason_of_a_failed_exit(exit_code: int, oom_kills: int, reason: str) -> None:
    assert exit_reason(exit_code, oom_kills) == reason


def test_a_node_that_cannot_use_cgroups_confines_nothing_and_says_why() -> None:
    node = cgroups.Cgroups("c.n", None, {}, "the node agent does not run as root")
    assert not node.enforced
    assert node.create("u1", "main", 0, CgroupLimits(1)) == []
