"""A container's resources as the values a runtime writes into its cgroup (pure): the kubelet's conversions.

- memory: `limits.memory` in bytes (memory.limit_in_bytes on v1, memory.max on v2); none means unlimited.
- CPU limit: a CFS quota per 100 ms period, `milliCPU * period / 1000` µs, at least 1 ms (MilliCPUToQuota).
- CPU request: relative weight, `milliCPU * 1024 / 1000` shares, at least 2 (MilliCPUToShares); cgroup v2's
  cpu.weight from those shares as runc converts them: `1 + (shares - 2) * 9999 / 262142`.
A request defaults to the limit when only the limit is given, as the API server defaults it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.kube.quantity import parse_quantity

CFS_PERIOD_US = 100_000
MIN_QUOTA_US = 1_000
MIN_SHARES = 2
MAX_SHARES = 262_144
# The kubelet gives a container without a CPU request the minimum weight (BestEffort).
DEFAULT_SHARES = MIN_SHARES


@dataclass(frozen=True)
class CgroupLimits:
    """What the kernel is told about one container; None means no limit."""

    memory_bytes: int | None = None
    cpu_quota_us: int | None = None
    cpu_period_us: int = CFS_PERIOD_US
    cpu_shares: int = DEFAULT_SHARES

    @property
    def cpu_weight(self) -> int:
        """cgroup v2's cpu.weight (1..10000) from v1 shares, as runc converts them."""
        return 1 + ((self.cpu_shares - 2) * 9999) // 262142

    def to_dict(self) -> dict[str, int | None]:
        return {
            "memory_bytes": self.memory_bytes,
            "cpu_quota_us": self.cpu_quota_us,
            "cpu_period_us": self.cpu_period_us,
            "cpu_shares": self.cpu_shares,
        }


def milli_cpu(value: str | int | float) -> int:
    """CPU in thousandths of a core, rounded up as the API server rounds quantities (1m is the finest step)."""
    return math.ceil(parse_quantity(value) * 1000)


def quota_us(milli: int, period_us: int = CFS_PERIOD_US) -> int:
    return max(MIN_QUOTA_US, milli * period_us // 1000)


def shares(milli: int) -> int:
    return min(MAX_SHARES, max(MIN_SHARES, milli * 1024 // 1000))


def container_limits(container: Mapping[str, Any]) -> CgroupLimits:
    """The cgroup values for `container`'s resources (quantities already validated by the API server)."""
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    memory = limits.get("memory")
    cpu_limit = limits.get("cpu")
    cpu_request = requests.get("cpu") or cpu_limit
    return CgroupLimits(
        memory_bytes=int(parse_quantity(memory)) if memory else None,
        cpu_quota_us=quota_us(milli_cpu(cpu_limit)) if cpu_limit else None,
        cpu_shares=shares(milli_cpu(cpu_request)) if cpu_request else DEFAULT_SHARES,
    )
