"""What the sweep controller remembers of one sweep between reconciles; forgetting a sweep is one line.

Nothing here is needed for correctness after a restart (the trials are the record, sweeps/trials.py): the
expectations keep a lagging cache from sampling twice, `judged` saves asking the pruner again about an epoch it
has answered, `private` holds what Optuna may not write to the API (CMA-ES's optimizer, sweeps/study.py), and
`rejection` carries the API server's refusal of a trial into the next plan, which fails the sweep with it;
`status_written` spaces the writes that only carry running trials' progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainingjob.operator.runtime.expectations import Expectations

PRIVATE_KEPT = 16  # the newest trials' private attributes: CMA-ES restores from the newest completed one


@dataclass(slots=True)
class SweepMemory:
    uid: str = ""
    expectations: Expectations = field(default_factory=Expectations)
    judged: dict[str, int] = field(default_factory=dict)
    private: dict[int, dict[str, Any]] = field(default_factory=dict)
    rejection: str = ""
    status_written: float = float("-inf")  # monotonic time of the last status write (progress-only writes wait)

    def keep_private(self, new: dict[int, dict[str, Any]]) -> None:
        self.private.update(new)
        for index in sorted(self.private)[:-PRIVATE_KEPT]:
            del self.private[index]
