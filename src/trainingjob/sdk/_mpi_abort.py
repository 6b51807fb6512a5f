"""Under mpirun, an unhandled exception in any rank aborts the whole MPI job, as ``python -m mpi4py`` does.

Why: without it, a rank whose training raises does not end. Python prints the traceback and exits, and on the way
out mpi4py calls MPI_Finalize, which in Open MPI waits (a PMIx fence) for every other rank to finalize too; the
other ranks meanwhile wait in their next collective for the rank that is leaving. Nobody gives up, mpirun never
exits, and the TrainingJob stays Running, training nothing, until someone notices. Measured on the local cluster
with the MPI example's rank 0 raising at epoch 3 and this hook removed: 180 s later the job was still Running with
all four pods (launcher, three workers) Running. A rank killed by a signal (SIGKILL, as the OOM killer does) needs
nothing: mpirun noticed it and exited 137 within 2.4 s in a local two-rank run. MPI_Abort instead
makes mpirun kill every rank and exit non-zero ("MPI_ABORT was invoked on rank 0"), so the launcher fails, the
operator restarts or fails the job by its failurePolicy, and the job's message names the rank.

Installed when the SDK is imported in a process Open MPI started (OMPI_COMM_WORLD_SIZE set) and acting only if
mpi4py's MPI is initialized and not finalized then: a script that never uses MPI, or runs outside mpirun, is not
touched. The previous excepthook runs first, so the traceback is printed as before. A graceful stop's exit
(SystemExit 143, every rank together) is no exception here and finalizes normally. Scripts that do not import the
SDK get the same from mpi4py itself: ``mpirun python3 -m mpi4py train.py``.

Not covered: ``sys.exit(non-zero)`` in one rank while the others train on is no exception, and hangs the same way
(measured locally with two ranks: still running after 25 s); ``python -m mpi4py`` aborts for that too. Telling it
apart from the example's own ending (rank 0 exits 1 when its accuracy is too low, after every rank finished) would
need the exit code at interpreter exit, which Python does not give an atexit handler.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

WORLD_SIZE = "OMPI_COMM_WORLD_SIZE"
WORLD_RANK = "OMPI_COMM_WORLD_RANK"
ABORT_CODE = 1

ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], Any]


def under_mpirun(env: Mapping[str, str] | None = None) -> bool:
    """Whether Open MPI started this process as one rank of several."""
    size = (os.environ if env is None else env).get(WORLD_SIZE, "")
    return size.isdigit() and int(size) > 1


def live_mpi() -> Any:
    """mpi4py's MPI module if this process uses it and MPI is initialized and not finalized yet; else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    try:
        return mpi if mpi.Is_initialized() and not mpi.Is_finalized() else None
    except Exception:
        return None


def aborting_hook(previous: ExceptHook) -> ExceptHook:
    """An excepthook that runs `previous` (the traceback) and then aborts the MPI job, when there is one."""

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        previous(kind, error, trace)
        mpi = live_mpi()
        if mpi is None or issubclass(kind, KeyboardInterrupt):
            return
        rank = os.environ.get(WORLD_RANK, "?")
        with contextlib.suppress(Exception):
            print(
                f"trainingjob.sdk: rank {rank} failed ({kind.__name__}); aborting the MPI job (MPI_Abort) so the "
                "other ranks do not wait for it forever",
                file=sys.stderr,
                flush=True,
            )
        mpi.COMM_WORLD.Abort(ABORT_CODE)

    hook.trainingjob_mpi_abort = True  # type: ignore[attr-defined]
    return hook


def install(env: Mapping[str, str] | None = None) -> bool:
    """Chain the aborting hook in front of sys.excepthook (once) when running under mpirun; whether it is in place."""
    if not under_mpirun(env):
        return False
    if not getattr(sys.excepthook, "trainingjob_mpi_abort", False):
        sys.excepthook = aborting_hook(sys.excepthook)
    return True
