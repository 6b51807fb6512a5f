"""`tj check` (what `helm test` runs): when the operator's Lease shows a working leader."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from trainingjob.cli.check import lease_problem

NOW = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def lease(**spec: object) -> dict:
    return {"metadata": {"name": "trainingjob-operator"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"holderIdentity": "op-1", "renewTime": "2026-11-28T11:59:55Z", "leaseDurationSeconds": 15}, None),
        ({}, "no operator holds it"),
        ({"holderIdentity": ""}, "no operator holds it"),
        ({"holderIdentity": "op-1"}, "op-1 holds it but never renewed it"),
        (
            {"holderIdentity": "op-1", "renewTime": "2026-11-28T11:58:00Z", "leaseDurationSeconds": 15},
            "op-1 last renewed it 2m ago (it expires after 15s)",
        ),
    ],
)
def test_a_lease_shows_a_leader_only_while_it_is_renewed(spec: dict, problem: str | None) -> None:
    assert lease_problem(lease(**spec), NOW) == problem
