"""JAX: a tiny linear regression trained with jax.grad, data-parallel over a TrainingJob's workers.

Every worker runs this script as one JAX process. With JAX_NUM_PROCESSES > 1 it calls jax.distributed.initialize()
with the coordinator (worker 0), process count and process id the operator injects; each process computes gradients
on its own rows, and the processes average them (multihost_utils.process_allgather) before every update, so all
hold the same parameters. With one process it is plain single-host JAX, on a laptop as well.

What it shows:
- jax.distributed from JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID; on CPU (DISTRIBUTED_BACKEND
  gloo) the cross-process collectives use gloo, on GPUs NCCL;
- hyperparameters from the JSON file TRAININGJOB_HYPERPARAMETERS_FILE, over the defaults in DEFAULTS;
- progress (epoch, totalEpochs, loss) reported by the chief (process 0) through trainingjob.sdk;
- the parameters as a numpy .npz checkpoint every CHECKPOINT_INTERVAL epochs and after the last one, saved
  atomically by the chief with sdk.save_checkpoint and pruned to CHECKPOINT_KEEP_LAST; a restarted attempt
  (RESUME_FROM_CHECKPOINT=true) loads the newest parameters and continues with the next epoch.

The dataset is generated from `seed`, so every process builds the same one and nothing is downloaded. The functions
above `main` are pure or import JAX only when called, so tests can import this file without JAX.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own (see README.md)
    import trainingjob_sdk as sdk

log = logging.getLogger("train_jax")

EXIT_INVALID_CONFIG = 2  # a configuration error: restarting won't help (see failurePolicy in the YAML)
FINAL_REPORT_SECONDS = 30  # how long the chief waits for its last progress report to be accepted
PARAMETERS = ("w", "b")  # the arrays in every checkpoint

DEFAULTS: dict[str, Any] = {
    "epochs": 20,
    "batchSize": 128,
    "learningRate": 0.05,
    "numSamples": 4096,
    "numFeatures": 16,
    "noise": 0.1,
    "seed": 42,
}
POSITIVE = ("epochs", "batchSize", "learningRate", "numSamples", "numFeatures")

T = TypeVar("T")


ConfigError = sdk.ConfigError  # hyperparameters or launcher variables that cannot work: exit EXIT_INVALID_CONFIG


def _check(params: Mapping[str, Any]) -> None:
    """What the hyperparameters must satisfy together, beyond being positive."""
    if params["noise"] < 0:
        raise ConfigError(f"hyperparameter noise must not be negative, got {params['noise']}")


# --- hyperparameters -----------------------------------------------------------------------------------------------


def parse_hyperparameters(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """DEFAULTS, overridden by the JSON object in `path` (TRAININGJOB_HYPERPARAMETERS_FILE); see
    trainingjob.sdk.parse_hyperparameters for the conversions. A value that cannot work is a ConfigError."""
    return sdk.parse_hyperparameters(path, DEFAULTS, positive=POSITIVE, check=_check)


# --- launcher environment ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JaxProcess:
    """This process's place in the JAX cluster, from the JAX_* variables."""

    num_processes: int
    process_id: int
    coordinator_address: str = ""
    backend: str = "gloo"

    @property
    def distributed(self) -> bool:
        return self.num_processes > 1

    @property
    def is_chief(self) -> bool:
        """Process 0 (worker 0): it reports progress and writes checkpoints."""
        return self.process_id == 0


def jax_process(env: Mapping[str, str] | None = None) -> JaxProcess:
    """JAX_NUM_PROCESSES, JAX_PROCESS_ID, JAX_COORDINATOR_ADDRESS and DISTRIBUTED_BACKEND; one process when unset."""
    env = os.environ if env is None else env
    backend = env.get("DISTRIBUTED_BACKEND", "").strip().lower() or "gloo"
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"DISTRIBUTED_BACKEND must be nccl or gloo, got {backend!r}")
    num_processes = _env_int(env, "JAX_NUM_PROCESSES", 1)
    process_id = _env_int(env, "JAX_PROCESS_ID", 0)
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise ConfigError(f"inconsistent JAX_PROCESS_ID={process_id} JAX_NUM_PROCESSES={num_processes}")
    coordinator = env.get("JAX_COORDINATOR_ADDRESS", "").strip()
    if num_processes > 1 and not coordinator:
        raise ConfigError("JAX_COORDINATOR_ADDRESS must be set when JAX_NUM_PROCESSES > 1")
    return JaxProcess(num_processes, process_id, coordinator, backend)


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


# --- data ----------------------------------------------------------------------------------------------------------


def make_dataset(
    num_samples: int, num_features: int, noise: float, seed: int
) -> tuple[list[list[float]], list[float], list[float], float]:
    """A synthetic linear regression set: (features, targets, true weights, true bias); same seed, same data."""
    rng = random.Random(seed)
    weights = [rng.gauss(0.0, 1.0) for _ in range(num_features)]
    bias = rng.gauss(0.0, 1.0)
    features, targets = [], []
    for _ in range(num_samples):
        row = [rng.gauss(0.0, 1.0) for _ in range(num_features)]
        features.append(row)
        targets.append(sum(w * x for w, x in zip(weights, row, strict=True)) + bias + rng.gauss(0.0, noise))
    return features, targets, weights, bias


def shard(rows: Sequence[T], index: int, count: int) -> list[T]:
    """Process `index`'s rows out of `count`: every count-th row, so the shards differ by one row at most."""
    return list(rows[index::count])


def epoch_plan(num_samples: int, num_processes: int, batch_size: int) -> tuple[int, int]:
    """(batch size, steps per epoch) that every process can run on its shard: all processes must take the same
    number of steps, since each step averages gradients over all of them."""
    smallest_shard = max(1, num_samples // num_processes)
    batch = min(batch_size, smallest_shard)
    return batch, smallest_shard // batch


# --- checkpoints ---------------------------------------------------------------------------------------------------


# (first epoch to train, checkpoint to load): a restarted or resumed attempt continues after its newest checkpoint,
# a new run starts at epoch 1 unless spec.checkpoint.resumeFrom names an earlier run's (sdk.resume_point).
resume_point = sdk.resume_point


def should_checkpoint(epoch: int, interval: int, total_epochs: int) -> bool:
    """Every `interval` epochs (CHECKPOINT_INTERVAL), and after the last epoch so the final model is kept."""
    return epoch % max(interval, 1) == 0 or epoch == total_epochs


# --- JAX -----------------------------------------------------------------------------------------------------------


def _jax() -> Any:
    try:
        import jax
    except ImportError as error:
        raise RuntimeError("this example needs JAX: pip install 'jax[cpu]' (or 'jax[cuda12]' for GPUs)") from error
    return jax


def initialize(process: JaxProcess) -> None:
    """jax.distributed.initialize() for more than one process; call it before any other JAX computation."""
    if not process.distributed:
        return
    jax = _jax()
    if process.backend == "gloo":
        try:  # cross-process collectives on CPU; the default in recent JAX, an option since 0.4.23
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        except (AttributeError, ValueError) as error:
            log.warning("cannot select gloo for CPU collectives: %s", error)
    jax.distributed.initialize(
        coordinator_address=process.coordinator_address,
        num_processes=process.num_processes,
        process_id=process.process_id,
    )


def init_params(num_features: int) -> dict[str, Any]:
    jnp = _jax().numpy
    return {"w": jnp.zeros((num_features,), dtype=jnp.float32), "b": jnp.zeros((), dtype=jnp.float32)}


@functools.cache
def _loss_and_grad() -> Any:
    jax = _jax()
    jnp = jax.numpy

    def mse(params: Mapping[str, Any], x: Any, y: Any) -> Any:
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    return jax.jit(jax.value_and_grad(mse))


def _mean_over_processes(tree: Any) -> Any:
    """Every process's `tree`, averaged leaf by leaf (each process gets the same result)."""
    jax = _jax()
    from jax.experimental import multihost_utils

    gathered = multihost_utils.process_allgather(tree)  # each leaf stacked along a new axis 0, one row per process
    return jax.tree_util.tree_map(lambda leaf: leaf.mean(axis=0), gathered)


def train_epoch(
    params: dict[str, Any],
    x: Any,
    y: Any,
    batch: int,
    steps: int,
    learning_rate: float,
    seed: int | Sequence[int],
    num_processes: int,
) -> tuple[dict[str, Any], dict[str, float]]:
    """`steps` minibatch SGD steps over this process's rows (`x`, `y`: numpy arrays) in an order drawn from `seed`;
    gradients are averaged over all processes. The new parameters and the epoch's mean squared error."""
    jax = _jax()
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(y))
    loss_and_grad = _loss_and_grad()
    losses = []
    for step in range(steps):
        index = order[step * batch : (step + 1) * batch]
        loss, grads = loss_and_grad(params, x[index], y[index])
        if num_processes > 1:
            loss, grads = _mean_over_processes((loss, grads))
        params = jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)
        losses.append(float(loss))
    mse = sum(losses) / max(len(losses), 1)
    return params, {"loss": mse, "rmse": math.sqrt(mse)}


def save_checkpoint(params: Mapping[str, Any], epoch: int) -> Path:
    """The parameters as ckpt-<epoch>.npz, atomically, pruned to CHECKPOINT_KEEP_LAST, reported."""
    import numpy as np

    arrays = {name: np.asarray(params[name]) for name in PARAMETERS}

    def write(path: Path) -> None:
        with open(path, "wb") as file:  # a file object: np.savez would append .npz to a path
            np.savez(file, **arrays)

    return sdk.save_checkpoint(write, epoch=epoch, keep_last=sdk.checkpoint_keep_last(), suffix=".npz")


def load_checkpoint(path: Path) -> dict[str, Any]:
    jnp = _jax().numpy
    import numpy as np

    with np.load(path) as data:
        return {name: jnp.asarray(data[name]) for name in PARAMETERS}


def train(params: Mapping[str, Any], process: JaxProcess) -> None:
    jax = _jax()
    import numpy as np

    log.info(
        "process %d of %d, %d local devices (%s)",
        jax.process_index(),
        jax.process_count(),
        jax.local_device_count(),
        jax.default_backend(),
    )
    if process.distributed:
        # An all-gather over every process: the sum of (index + 1) is n(n+1)/2 only if all n processes took part.
        from jax.experimental import multihost_utils

        gathered = multihost_utils.process_allgather(np.asarray([jax.process_index() + 1.0], dtype=np.float32))
        check = {"rank": jax.process_index(), "worldSize": jax.process_count(), "rankSum": int(gathered.sum())}
        log.info("collective check: %s", json.dumps(check))
    features, targets, true_weights, _ = make_dataset(
        params["numSamples"], params["numFeatures"], params["noise"], params["seed"]
    )
    x = np.asarray(shard(features, process.process_id, process.num_processes), dtype=np.float32)
    y = np.asarray(shard(targets, process.process_id, process.num_processes), dtype=np.float32)
    batch, steps = epoch_plan(params["numSamples"], process.num_processes, params["batchSize"])

    weights = init_params(params["numFeatures"])
    start, checkpoint = resume_point()
    if checkpoint is not None:
        weights = load_checkpoint(checkpoint)
        log.info("resuming from %s at epoch %d", checkpoint, start)

    epochs, interval = params["epochs"], sdk.checkpoint_interval()
    if start > epochs:
        log.info("the checkpoint already completes all %d epochs", epochs)
    done = {"weights": weights, "epoch": start - 1}  # the last whole epoch: what a stop saves

    # SIGTERM: the chief saves the last whole epoch at its next progress report and exits; the other processes leave
    # when their next collective fails because it has gone.
    def save_on_stop() -> Path:
        return save_checkpoint(done["weights"], done["epoch"])

    stop = sdk.on_stop(save_on_stop if process.is_chief else None)
    try:
        for epoch in range(start, epochs + 1):
            seed = [abs(params["seed"]), epoch, process.process_id]  # a new order for each epoch and process
            weights, metrics = train_epoch(
                weights, x, y, batch, steps, params["learningRate"], seed, process.num_processes
            )
            done.update(weights=weights, epoch=epoch)
            if not process.is_chief:
                continue
            error = float(np.linalg.norm(np.asarray(weights["w"]) - np.asarray(true_weights, dtype=np.float32)))
            log.info("epoch %d/%d: loss %.5f, distance to the true weights %.4f", epoch, epochs, metrics["loss"], error)
            sdk.report_progress(epoch=epoch, total_epochs=epochs, metrics=metrics)  # a safe point: a stop exits here
            if should_checkpoint(epoch, interval, epochs):
                log.info("saved checkpoint %s", save_checkpoint(weights, epoch))
    except Exception:
        if not stop.requested:
            raise
        log.info("stopping: the collective is gone (the chief, if it is still here, saves the last whole epoch)")
        stop.check()
    if process.is_chief:
        sdk.report_progress(epoch=epochs, total_epochs=epochs)
        # The last report carries 100 % and the final checkpoint: wait for it longer than flush's default 5 s (a
        # busy endpoint answers late, and the process exits right after).
        if not sdk.flush(timeout=FINAL_REPORT_SECONDS):
            log.warning("the final progress report was not accepted within %ds", FINAL_REPORT_SECONDS)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        params = parse_hyperparameters(os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE"))
        process = jax_process()
    except ConfigError as error:
        log.error("%s", error)
        return EXIT_INVALID_CONFIG
    log.info("hyperparameters %s", json.dumps(params, sort_keys=True))
    initialize(process)
    try:
        train(params, process)
    finally:
        if process.distributed:
            _jax().distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
