"""The report's restart targets: a kill -9 with every job Running, the same identity and a replacement pod, each
held to the bound of its scale (bench/scale.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.report import steady_section, targets


def steady_record(**figures: Any) -> dict[str, Any]:
    """A steady-state record of our operator at 1000x8 with `figures`."""
    base = {"kind": "steady", "contender": "trainingjob-operator", "jobs": 1000, "workers": 8}
    return {**base, "idle_writes_per_minute": 0.0, "pods_recreated": 0, **figures}


def test_a_restart_that_never_re_observed_is_a_miss_not_a_gap() -> None:
    steady = steady_record(restart_reobserved=False, restart_reobserved_s=918.2)
    row = next(line for line in targets({}, [steady]).splitlines() if "re-observed" in line)
    assert "not within 918.2 s" in row and "**missed**" in row


@pytest.mark.parametrize(("seconds", "verdict"), [(18.2, "| met |"), (25.0, "| **missed** |")])
def test_a_replacement_pods_restart_is_held_to_the_lease_plus_five_seconds(seconds: float, verdict: str) -> None:
    steady = steady_record(
        idle_writes_per_minute_with_lease=4.0,
        pods_deleted_after_restart=0,
        restart_ready_s=1.0,
        restart_reobserved=True,
        restart_reobserved_s=4.2,
        restarted_peak_rss_mib=130.0,
        replacement_ready_s=seconds - 2,
        replacement_reobserved=True,
        replacement_reobserved_s=seconds,
        replacement_pods_recreated=0,
        replacement_pods_deleted=0,
        replacement_peak_rss_mib=131.0,
    )
    row = next(line for line in targets({}, [steady]).splitlines() if "replacement pod" in line)
    assert "Lease + 5 s = 20 s" in row and f"| {seconds:g} s {verdict}" in row
    table = steady_section([steady])
    row = f"| trainingjob-operator, replacement pod | 1000 x 8 | — | {seconds - 2:g} s | {seconds:g} s | 0 | 0 |"
    assert row in table


def test_a_restart_at_the_scale_step_is_held_to_thirty_seconds_not_fifteen() -> None:
    """Issue 40 asks a restart at 5,000 x 8 to re-observe within 30 s; 19.7 s there is met, not a 15-s miss, and
    the replacement pod (no bound of its own there) is held to the same 30 s."""
    steady = steady_record(
        jobs=5000,
        restart_reobserved=True,
        restart_reobserved_s=19.7,
        replacement_ready_s=16.2,
        replacement_reobserved=True,
        replacement_reobserved_s=43.7,
    )
    rows = [line for line in targets({}, [steady]).splitlines() if "re-observed" in line]
    assert rows[0] == "| restart: all re-observed within 30 s (5000x8 Running) | 19.7 s | met |"
    assert rows[1].startswith("| replacement pod: re-observed within 30 s (the scale step's restart bound)")
    assert rows[1].endswith("| 43.7 s | **missed** |")
    at_1000 = steady_record(restart_reobserved=True, restart_reobserved_s=19.7)
    assert "| restart: all re-observed within 15 s (1000x8 Running) | 19.7 s | **missed** |" in targets({}, [at_1000])
