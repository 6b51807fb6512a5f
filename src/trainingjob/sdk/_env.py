"""The variables the operator injects into every worker, read at call time.

Why a module of its own: both the progress reporter and the checkpoint helpers read them, and reading them at call
time (not at import) lets tests and launchers that set the environment late still get the right answer.
Every reader tolerates a missing or malformed variable and falls back to the single-process default, so the same
training script runs on a laptop and inside a TrainingJob.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PROGRESS_URL = "TRAININGJOB_PROGRESS_URL"
PROGRESS_CA_FILE = "TRAININGJOB_PROGRESS_CA_FILE"
PROGRESS_TOKEN_FILE = "TRAININGJOB_PROGRESS_TOKEN_FILE"
JOB_NAME = "TRAININGJOB_NAME"
JOB_NAMESPACE = "TRAININGJOB_NAMESPACE"
WORKER_INDEX = "TRAININGJOB_WORKER_INDEX"
ROLE = "TRAININGJOB_ROLE"
WORLD_SIZE = "TRAININGJOB_WORLD_SIZE"
RESTART_COUNT = "TRAININGJOB_RESTART_COUNT"
CHECKPOINT_DIR = "CHECKPOINT_DIR"
CHECKPOINT_INTERVAL = "CHECKPOINT_INTERVAL"
CHECKPOINT_KEEP_LAST = "CHECKPOINT_KEEP_LAST"
CHECKPOINT_URI = "CHECKPOINT_URI"
RESUME_FROM_CHECKPOINT = "RESUME_FROM_CHECKPOINT"
GRACE_PERIOD_SECONDS = "TRAININGJOB_GRACE_PERIOD_SECONDS"


def env_int(name: str, default: int | None, env: Mapping[str, str] | None = None) -> int | None:
    """The variable as an int, or `default` when it is unset, empty or not an integer."""
    raw = (os.environ if env is None else env).get(name, "").strip()
    try:
        return int(raw)
    except ValueError:
        return default


def in_job(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs as a TrainingJob worker that can report progress."""
    return bool((os.environ if env is None else env).get(PROGRESS_URL, "").strip())


def rank() -> int:
    """This worker's index (TRAININGJOB_WORKER_INDEX); 0 outside a TrainingJob."""
    value = env_int(WORKER_INDEX, 0)
    return value if value is not None and value >= 0 else 0


def world_size() -> int:
    """How many workers the job has (TRAININGJOB_WORLD_SIZE); 1 outside a TrainingJob."""
    value = env_int(WORLD_SIZE, 1)
    return value if value is not None and value >= 1 else 1


def is_chief() -> bool:
    """Whether this is worker 0, the one that (by default) may report progress and should save checkpoints."""
    return rank() == 0


def restart_count() -> int:
    """The attempt number (TRAININGJOB_RESTART_COUNT): 0 on the first attempt, 1, 2, … after each gang restart."""
    value = env_int(RESTART_COUNT, 0)
    return value if value is not None and value >= 0 else 0
