"""Data-parallel logistic regression with MPI (mpi4py on Open MPI), launched by mpirun from the job's launcher pod.

mpirun (the launcher role's command) starts one rank per slot of the hostfile the operator writes (every worker,
`slots=N`), reaching the workers through the operator's remote-start agent instead of ssh. Every rank:
- says where it runs: an allgather of (rank, host) that rank 0 prints as one `MPI world: {...}` JSON line, so
  the ranks MPI started and the pods they ran in are in the launcher's log (mpirun forwards every rank's output);
- trains on its own shard of a synthetic, linearly separable data set (generated from `seed`, the same on every
  rank): each epoch, the gradients of all ranks are summed (an allgather, then the same sum on every rank), so
  every rank takes the same step and holds the same weights;
- rank 0 reports progress (epoch, loss, accuracy, ranks) to the operator through trainingjob.sdk, and in a job with
  checkpoints (CHECKPOINT_DIR) saves the weights (JSON) every CHECKPOINT_INTERVAL epochs with sdk.save_checkpoint;
  a restarted or resumed attempt starts after the newest one (rank 0 loads it and sends it to every rank);
- a graceful stop (sdk.on_stop): each epoch's allgather carries every rank's "asked to stop" flag (SIGTERM:
  suspend, scale, preemption, delete), so all ranks stop after the same epoch: rank 0 saves it and reports the stop
  with it, and every rank exits 143 together (MPI's finalize needs them all).

Plain Python and mpi4py only (no NumPy), so the image is Debian's python3-mpi4py and openmpi-bin. Without mpirun
(`python3 train_mpi.py`) it runs as a single rank.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import sys
from typing import Any

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own
    import trainingjob_sdk as sdk

log = logging.getLogger("train_mpi")

DEFAULTS: dict[str, Any] = {"epochs": 20, "samples": 4000, "features": 8, "learningRate": 0.5, "seed": 7}


def hyperparameters() -> dict[str, Any]:
    """DEFAULTS with spec.hyperparameters (the file TRAININGJOB_HYPERPARAMETERS_FILE names) over them."""
    params = dict(DEFAULTS)
    try:
        with open(os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE", "")) as handle:
            given = json.load(handle)
    except (OSError, ValueError):
        given = {}
    for key, default in DEFAULTS.items():
        if key in given:
            params[key] = type(default)(given[key])
    return params


def make_data(samples: int, features: int, seed: int) -> tuple[list[list[float]], list[int]]:
    """Points labelled by a hidden hyperplane, the same on every rank (same seed)."""
    rng = random.Random(seed)
    truth = [rng.uniform(-1, 1) for _ in range(features)]
    rows, labels = [], []
    for _ in range(samples):
        row = [rng.gauss(0, 1) for _ in range(features)]
        rows.append(row)
        labels.append(1 if sum(w * x for w, x in zip(truth, row, strict=True)) > 0 else 0)
    return rows, labels


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def local_gradient(weights: list[float], rows: list[list[float]], labels: list[int]) -> tuple[list[float], float, int]:
    """(gradient sum, loss sum, correct predictions) over this rank's shard."""
    gradient = [0.0] * len(weights)
    loss, correct = 0.0, 0
    for row, label in zip(rows, labels, strict=True):
        p = sigmoid(sum(w * x for w, x in zip(weights, row, strict=True)))
        for i, x in enumerate(row):
            gradient[i] += (p - label) * x
        loss -= math.log(max(p if label else 1 - p, 1e-12))
        correct += int((p > 0.5) == bool(label))
    return gradient, loss, correct


def checkpointing() -> bool:
    """Only a job with checkpoints saves them: CHECKPOINT_DIR (<mount>/<job uid>) under a writable mount. The
    operator sets the variable for every job, but mounts the volume only with spec.checkpoint (the local example's
    manifest has none, and `/checkpoints` is then not there to write to)."""
    directory = os.environ.get("CHECKPOINT_DIR", "").strip()
    mount = os.path.dirname(directory.rstrip("/"))
    return bool(directory) and os.path.isdir(mount) and os.access(mount, os.W_OK)


def save_checkpoint(weights: list[float], epoch: int) -> Any:
    """The weights as JSON in ckpt-<epoch>.json, atomically, pruned to CHECKPOINT_KEEP_LAST, reported (rank 0);
    None without checkpoints."""
    if not checkpointing():
        return None
    text = json.dumps({"epoch": epoch, "weights": weights})
    return sdk.save_checkpoint(lambda path: path.write_text(text), epoch=epoch, suffix=".json")


def starting_point(comm: Any, features: int) -> tuple[int, list[float]]:
    """(first epoch, weights): rank 0 reads the checkpoint a restarted or resumed attempt starts from, if any, and
    every rank gets it from rank 0 (the workers need no checkpoint volume)."""
    start, weights = 1, [0.0] * features
    if comm.Get_rank() == 0 and checkpointing():
        start, checkpoint = sdk.resume_point()
        if checkpoint is not None:
            weights = json.loads(checkpoint.read_text())["weights"]
            log.info("resuming from %s at epoch %d", checkpoint, start)
    return comm.bcast((start, weights), root=0)


def train(comm: Any, params: dict[str, Any]) -> dict[str, float]:
    rank, size = comm.Get_rank(), comm.Get_size()
    world = comm.allgather({"rank": rank, "host": socket.gethostname()})
    if rank == 0:
        print("MPI world: " + json.dumps({"size": size, "ranks": world}, sort_keys=True), flush=True)
    rows, labels = make_data(params["samples"], params["features"], params["seed"])
    shard_rows, shard_labels = rows[rank::size], labels[rank::size]
    start, weights = starting_point(comm, params["features"])
    metrics: dict[str, float] = {}
    # Ranks leave only where they all agreed to (below), never at rank 0's own progress report.
    stop = sdk.on_stop(follow_seconds=float("inf"), at_safe_points=False)
    for epoch in range(start, params["epochs"] + 1):
        gradient, loss, correct = local_gradient(weights, shard_rows, shard_labels)
        mine = [*gradient, loss, float(correct), float(stop.requested)]
        totals = [sum(column) for column in zip(*comm.allgather(mine), strict=True)]
        count = float(params["samples"])
        weights = [w - params["learningRate"] * g / count for w, g in zip(weights, totals[:-3], strict=True)]
        metrics = {"loss": totals[-3] / count, "accuracy": totals[-2] / count, "ranks": float(size)}
        if totals[-1] > 0:  # some rank was asked to stop: all stop after this epoch, rank 0 saving it
            stop.request()
            stop.check(save_checkpoint(weights, epoch) if rank == 0 else None)
        if rank == 0:
            loss, accuracy = metrics["loss"], metrics["accuracy"]
            log.info("epoch %d: loss %.4f accuracy %.4f over %d ranks", epoch, loss, accuracy, size)
            sdk.report_progress(epoch=epoch, total_epochs=params["epochs"], metrics=metrics)
            if epoch % sdk.checkpoint_interval() == 0 or epoch == params["epochs"]:
                save_checkpoint(weights, epoch)
    if rank == 0:
        sdk.flush()
    return metrics


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    metrics = train(comm, hyperparameters())
    if comm.Get_rank() == 0:
        print("final: " + json.dumps(metrics, sort_keys=True), flush=True)
        return 0 if metrics.get("accuracy", 0) > 0.9 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
