"""What a TrainingJob's status says at a glance, read from its body as the API holds it: shared by `tj` (cli/render.py)
and the UI (ui/store.py), which both show jobs they read with the user's credentials."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainingjob.api.status import Phase
from trainingjob.kube.phases import PodPhase


def phase_shown(job: Mapping[str, Any], absent: str = Phase.PENDING.value) -> str:
    """status.phase as stored, for showing, `absent` while the operator has written none. What is shown is what was
    read, whatever it says (printed through the sanitising of untrusted text); judging a phase goes through
    api/status.py: job_phase, the typed one."""
    return str((job.get("status") or {}).get("phase") or absent)


def running_workers(job: dict[str, Any]) -> int:
    """Workers whose status says Running (status.workerStatuses)."""
    return sum(1 for w in (job.get("status") or {}).get("workerStatuses") or [] if w.get("phase") == PodPhase.RUNNING)


def progress_percent(progress: dict[str, Any]) -> float | None:
    """status.progress as a percentage within 0-100: its own percent, else step or epoch of their totals."""
    if isinstance(progress.get("percent"), int | float):
        return max(0.0, min(100.0, float(progress["percent"])))
    for done, total in (("step", "totalSteps"), ("epoch", "totalEpochs")):
        numbers = isinstance(progress.get(done), int | float) and isinstance(progress.get(total), int | float)
        if numbers and progress[total] > 0:
            return max(0.0, min(100.0, 100.0 * progress[done] / progress[total]))
    return None


def stop_summary(stop: dict[str, Any]) -> str:
    """status.lastStop in a line: why and when, and the checkpoint saved on the way out, or that there was none."""
    saved = stop.get("checkpoint") or {}
    what = f"checkpointed {saved.get('path') or ''}".strip() if stop.get("checkpointed") else "no checkpoint saved"
    return f"{stop.get('reason', '?')} at {stop.get('time', '?')}: {what}"
