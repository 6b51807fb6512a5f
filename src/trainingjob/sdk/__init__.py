"""trainingjob.sdk: what training code inside a TrainingJob worker uses to talk to the operator.

Why it is a tiny standard-library-only package: it runs inside arbitrary training images (PyTorch, TensorFlow, JAX,
…) whose dependencies we don't control, so it imports nothing outside the standard library and nothing else from
``trainingjob``; only relative imports inside it. Copying this directory alone into an image (under any package
name) is as good as installing it.

- Progress: ``report_progress(epoch=…, step=…, loss=…)``, ``report_checkpoint(path, epoch=…)``, ``flush()`` — the
  protocol of docs/progress-protocol.md; never raise, quiet no-ops outside a TrainingJob.
- Checkpoints: ``checkpoint_dir()`` (this run's own), ``checkpoint_interval()``, ``resume_checkpoint()``,
  ``resume_point()``, ``should_resume()``, ``latest_checkpoint()``, ``save_checkpoint(write_fn, epoch)`` (atomic,
  pruned to CHECKPOINT_KEEP_LAST, reported); with an ``s3://`` CHECKPOINT_URI also uploaded to and loaded from S3
  (boto3, imported only then: ``checkpoint_store()``).
- Graceful stop: ``on_stop(save_fn)`` turns SIGTERM into save-a-checkpoint-and-exit at the next safe point;
  ``stop_requested()``.
- Hyperparameters: ``parse_hyperparameters(path, defaults)`` (the JSON file TRAININGJOB_HYPERPARAMETERS_FILE
  over a script's defaults, converted to their types), ``ConfigError``.
- Identity: ``rank()``, ``world_size()``, ``is_chief()``, ``restart_count()``.
- Under mpirun (Open MPI), importing the SDK makes an unhandled exception in any rank abort the whole MPI job
  instead of leaving the others waiting for it forever (``_mpi_abort``; ``python -m mpi4py`` does the same).
"""

from . import _mpi_abort
from ._env import in_job, is_chief, rank, restart_count, world_size
from ._fence import SupersededAttempt
from .checkpoint import (
    CheckpointInfo,
    checkpoint_dir,
    checkpoint_interval,
    checkpoint_keep_last,
    checkpoint_name,
    checkpoint_store,
    claim_checkpoints,
    latest_checkpoint,
    list_checkpoints,
    parse_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from .hyperparameters import ConfigError, hyperparameters_file, parse_hyperparameters
from .progress import flush, get_reporter, report_checkpoint, report_progress, set_default_reporter
from .reporter import ProgressReporter
from .resume import resume_checkpoint, resume_point, resume_requested, should_resume
from .stop import GracefulStop, on_stop, stop_requested

_mpi_abort.install()

__all__ = [
    "CheckpointInfo",
    "ConfigError",
    "GracefulStop",
    "ProgressReporter",
    "SupersededAttempt",
    "checkpoint_dir",
    "checkpoint_interval",
    "checkpoint_keep_last",
    "checkpoint_name",
    "checkpoint_store",
    "claim_checkpoints",
    "flush",
    "get_reporter",
    "hyperparameters_file",
    "in_job",
    "is_chief",
    "latest_checkpoint",
    "list_checkpoints",
    "on_stop",
    "parse_checkpoint",
    "parse_hyperparameters",
    "prune_checkpoints",
    "rank",
    "report_checkpoint",
    "report_progress",
    "restart_count",
    "resume_checkpoint",
    "resume_point",
    "resume_requested",
    "save_checkpoint",
    "set_default_reporter",
    "should_resume",
    "stop_requested",
    "world_size",
]
