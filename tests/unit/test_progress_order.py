"""Which reports of one pod are behind what it already reported (progress/order.py): the pure rule."""

from __future__ import annotations

import pytest

from trainingjob.progress.order import ReportOrder, advanced, behind
from trainingjob.progress.report import Report, ReportError


@pytest.mark.parametrize(
    ("new", "furthest", "is_behind"),
    [
        ((1, 100), (3, 300), True),
        ((3, 120), (3, 300), True),
        ((3, 300), (3, 300), False),  # a duplicate
        ((4, 0), (3, 300), False),  # steps counted per epoch
        ((None, 50), (None, 80), True),
        ((None, 50), (3, 300), False),  # not comparable
        ((2, None), (3, 300), True),
        ((3, None), (3, 300), False),  # the same epoch, no step: a checkpoint-only or metrics-only report
        ((1, 1), (None, None), False),  # the first report
    ],
)
def test_behind(new: tuple, furthest: tuple, is_behind: bool) -> None:
    assert behind(new, furthest) is is_behind


def test_the_furthest_position_moves_forward_only() -> None:
    assert advanced((3, 300), (4, 10)) == (4, 10)
    assert advanced((3, 300), (3, None)) == (3, 300)
    assert advanced((3, 300), (None, 50)) == (3, 300)
    assert advanced((None, None), (None, 50)) == (None, 50)


def test_each_pod_has_its_own_order_and_checkpoints_theirs() -> None:
    order = ReportOrder()
    order.admit("pod-a", Report(epoch=3, step=300, checkpoint={"path": "/c/3", "epoch": 3}))
    order.admit("pod-b", Report(epoch=1))  # a new attempt's worker, resumed from an older checkpoint
    order.admit("pod-a", Report(epoch=3, step=300, checkpoint={"path": "/c/3", "epoch": 3}))  # a duplicate
    for late in (Report(epoch=2), Report(checkpoint={"path": "/c/2", "epoch": 2})):
        with pytest.raises(ReportError) as refused:
            order.admit("pod-a", late)
        assert refused.value.status == 409
    order.admit("pod-a", Report(checkpoint={"path": "/c/x"}))  # a checkpoint that says no epoch: not judged
