"""Reports of one pod only go forward: one older than what that pod already reported is refused (issue 41).

A report is a state (the newest received wins), so a report delivered again later moved the job's status back: the
SDK retries a report whose answer it did not get (the endpoint may have taken it and answered too slowly), and
anyone holding a worker's live token could send an old body again. An older epoch or step then replaced the newer
one, and an older checkpoint became status.lastCheckpoint, the one a resume starts from. So the endpoint keeps, per
reporting pod, the furthest (epoch, step) and the furthest checkpoint it accepted, and refuses (409) a report that
is behind either; a duplicate is not behind and changes nothing.

Per pod, not per job: a new attempt's worker is a new pod, and one resumed from an older checkpoint reports older
epochs as its own word. Steps are compared within one epoch only (a script may count steps per epoch). In memory:
after an operator restart (or a change of leader) the first report of each pod is taken as it comes.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainingjob.progress.limits import BoundedMap
from trainingjob.progress.report import Report, ReportError

Position = tuple[int | None, int | None]  # (epoch, step); None where a report does not say


def behind(new: Position, furthest: Position) -> bool:
    """Whether `new` is before `furthest`: a lower epoch, or the same epoch and a lower step (or, where neither
    says its epoch, a lower step)."""
    (epoch, step), (top_epoch, top_step) = new, furthest
    if epoch is not None and top_epoch is not None and epoch != top_epoch:
        return epoch < top_epoch
    if (epoch is None) != (top_epoch is None):
        return False  # not comparable: one says only its step
    return step is not None and top_step is not None and step < top_step


def advanced(furthest: Position, new: Position) -> Position:
    """The furthest position once `new` (not behind it) is accepted: what `new` says, the rest kept while the
    epoch is the same."""
    (epoch, step), (top_epoch, top_step) = new, furthest
    if epoch is None and top_epoch is not None:
        return furthest  # a step without its epoch says nothing of where in which epoch
    if epoch != top_epoch:
        return epoch, step
    return epoch, step if step is not None else top_step


@dataclass
class Furthest:
    report: Position = (None, None)
    checkpoint: Position = (None, None)


class ReportOrder:
    """The furthest position accepted from each reporting pod (the most recently reporting 10,000 pods)."""

    def __init__(self) -> None:
        self.pods: BoundedMap[Furthest] = BoundedMap()

    def admit(self, pod: str, report: Report) -> None:
        """Record `report` as `pod`'s newest, or raise ReportError(409) when it is behind what the pod sent."""
        seen = self.pods.get(pod) or Furthest()
        position: Position = (report.epoch, report.step)
        checkpoint = report.checkpoint or {}
        saved: Position = (checkpoint.get("epoch"), checkpoint.get("step"))
        if behind(position, seen.report):
            raise ReportError(409, f"older than this pod's last report ({_shown(seen.report)}): status keeps that")
        if report.checkpoint is not None and behind(saved, seen.checkpoint):
            raise ReportError(409, f"checkpoint older than this pod's last one ({_shown(seen.checkpoint)})")
        seen.report = advanced(seen.report, position)
        if report.checkpoint is not None:
            seen.checkpoint = advanced(seen.checkpoint, saved)
        self.pods.put(pod, seen)


def _shown(position: Position) -> str:
    epoch, step = position
    return ", ".join(f"{name} {value}" for name, value in (("epoch", epoch), ("step", step)) if value is not None)
