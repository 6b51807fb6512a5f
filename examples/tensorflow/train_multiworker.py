"""TensorFlow MultiWorkerMirroredStrategy training a small Keras classifier on synthetic data, inside a TrainingJob.

Every worker runs this script as one process. The strategy reads TF_CONFIG, which the operator writes for each
worker (the cluster's worker addresses and this task's index), and averages gradients over all workers and their
GPUs. Without TF_CONFIG it trains as a single local worker, on a laptop as well.

What it shows:
- MultiWorkerMirroredStrategy with collective communication from DISTRIBUTED_BACKEND (nccl → NCCL, gloo → RING);
- a tf.data pipeline sharded by data across workers, global batch = batchSize * replicas;
- hyperparameters from the JSON file TRAININGJOB_HYPERPARAMETERS_FILE, over the defaults in DEFAULTS;
- progress (epoch, totalEpochs, loss, accuracy) reported by the chief (worker 0) through trainingjob.sdk;
- a checkpoint every CHECKPOINT_INTERVAL epochs (and after the last one): the Keras weights written into the
  temporary path sdk.save_checkpoint hands out, renamed into place atomically and pruned to CHECKPOINT_KEEP_LAST.
  As TensorFlow requires, every worker saves; the others write to a scratch directory they delete. A restarted
  attempt (RESUME_FROM_CHECKPOINT=true) loads the newest weights and continues with the next epoch;
- a graceful stop (sdk.on_stop): on SIGTERM (suspend, scale, preemption, delete) the workers agree at the end of
  the epoch, with one all-reduce, that one of them was asked to stop; then all save that epoch together (saving
  may need every worker, so the chief cannot save alone at its own safe point), the chief reports the stop with
  it, and all exit 143. The resume starts from that checkpoint.

The dataset is generated from `seed`, so every worker builds the same one and nothing is downloaded. The functions
above `main` are pure or import TensorFlow only when called, so tests can import this file without TensorFlow.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own (see README.md)
    import trainingjob_sdk as sdk

log = logging.getLogger("train_multiworker")

EXIT_INVALID_CONFIG = 2  # a configuration error: restarting won't help (see failurePolicy in the YAML)
FINAL_REPORT_SECONDS = 30  # how long the chief waits for its last progress report to be accepted
WEIGHTS_FILE = "model.weights.h5"  # inside each checkpoint directory; Keras 3 wants this suffix

DEFAULTS: dict[str, Any] = {
    "epochs": 10,
    "batchSize": 64,
    "learningRate": 0.001,
    "hiddenSize": 64,
    "numSamples": 4096,
    "numFeatures": 20,
    "numClasses": 4,
    "seed": 42,
}
POSITIVE = ("epochs", "batchSize", "learningRate", "hiddenSize", "numSamples", "numFeatures")


ConfigError = sdk.ConfigError  # hyperparameters or launcher variables that cannot work: exit EXIT_INVALID_CONFIG


def _check(params: Mapping[str, Any]) -> None:
    """What the hyperparameters must satisfy together, beyond being positive."""
    if params["numClasses"] < 2:
        raise ConfigError(f"hyperparameter numClasses must be at least 2, got {params['numClasses']}")


# --- hyperparameters -----------------------------------------------------------------------------------------------


def parse_hyperparameters(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """DEFAULTS, overridden by the JSON object in `path` (TRAININGJOB_HYPERPARAMETERS_FILE); see
    trainingjob.sdk.parse_hyperparameters for the conversions. A value that cannot work is a ConfigError."""
    return sdk.parse_hyperparameters(path, DEFAULTS, positive=POSITIVE, check=_check)


# --- launcher environment ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TFTask:
    """This process's place in TF_CONFIG."""

    task_type: str
    index: int
    num_workers: int
    has_chief: bool = False

    @property
    def is_chief(self) -> bool:
        """The task that writes checkpoints and reports progress: `chief` if the cluster has one, else worker 0."""
        if self.has_chief:
            return self.task_type == "chief"
        return self.task_type == "worker" and self.index == 0


def parse_tf_config(raw: str | None) -> TFTask:
    """TF_CONFIG as the operator writes it (`{"cluster": {"worker": [...]}, "task": {"type": "worker", "index":
    i}}`); unset or empty: a single local worker."""
    if not raw or not raw.strip():
        return TFTask("worker", 0, 1)
    try:
        config = json.loads(raw)
        cluster, task = config["cluster"], config["task"]
        task_type, index = str(task["type"]), int(task["index"])
        num_workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
        has_chief = bool(cluster.get("chief"))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ConfigError(f"TF_CONFIG is not a valid cluster spec: {error!r}") from None
    members = cluster.get(task_type)
    if not isinstance(members, list) or not 0 <= index < len(members):
        raise ConfigError(f"TF_CONFIG task {task_type}:{index} is not in its cluster")
    return TFTask(task_type, index, num_workers, has_chief)


def communication_implementation(backend: str | None) -> str:
    """The CommunicationImplementation for DISTRIBUTED_BACKEND: NCCL for nccl, RING (gRPC) for gloo, else AUTO."""
    backend = (backend or "").strip().lower()
    if backend == "nccl":
        return "NCCL"
    if backend == "gloo":
        return "RING"
    if backend:
        raise ConfigError(f"DISTRIBUTED_BACKEND must be nccl or gloo, got {backend!r}")
    return "AUTO"


def shuffle_seed(seed: int, epoch: int) -> int:
    """The data order of `epoch`: different each epoch, identical on every worker and across restarts."""
    return (seed * 1_000_003 + epoch) % 2**31


def steps_per_epoch(num_samples: int, global_batch: int) -> int:
    """Full global batches per epoch (at least 1); the dataset repeats, so every worker runs exactly this many."""
    return max(1, num_samples // global_batch)


# --- data ----------------------------------------------------------------------------------------------------------


def make_dataset(
    num_samples: int, num_features: int, num_classes: int, seed: int
) -> tuple[list[list[float]], list[int]]:
    """A synthetic classification set: one Gaussian blob per class around a random centre; same seed, same data."""
    rng = random.Random(seed)
    centres = [[rng.gauss(0.0, 2.0) for _ in range(num_features)] for _ in range(num_classes)]
    features, labels = [], []
    for _ in range(num_samples):
        label = rng.randrange(num_classes)
        features.append([centre + rng.gauss(0.0, 1.0) for centre in centres[label]])
        labels.append(label)
    return features, labels


# --- checkpoints ---------------------------------------------------------------------------------------------------


# (first epoch to train, checkpoint to load): a restarted or resumed attempt continues after its newest checkpoint,
# a new run starts at epoch 1 unless spec.checkpoint.resumeFrom names an earlier run's (sdk.resume_point).
resume_point = sdk.resume_point


def should_checkpoint(epoch: int, interval: int, total_epochs: int) -> bool:
    """Every `interval` epochs (CHECKPOINT_INTERVAL), and after the last epoch so the final model is kept."""
    return epoch % max(interval, 1) == 0 or epoch == total_epochs


# --- TensorFlow ----------------------------------------------------------------------------------------------------


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the worker log readable
    try:
        import tensorflow as tf
    except ImportError as error:
        raise RuntimeError(
            "this example needs TensorFlow: pip install tensorflow, or build from a tensorflow/tensorflow image"
        ) from error
    return tf


def make_strategy(implementation: str) -> Any:
    """The MultiWorkerMirroredStrategy; create it before any other TensorFlow op (it reads TF_CONFIG)."""
    tf = _tf()
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=getattr(tf.distribute.experimental.CommunicationImplementation, implementation)
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def make_tf_dataset(features: Any, labels: Any, global_batch: int, seed: int) -> Any:
    """One epoch's input: shuffled by `seed` (the same order on every worker, as data sharding needs), repeated,
    batched by the global batch, sharded by data. `features` and `labels` are tensors."""
    tf = _tf()
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    dataset = dataset.shuffle(int(labels.shape[0]), seed=seed, reshuffle_each_iteration=False)
    dataset = dataset.repeat().batch(global_batch, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def build_model(num_features: int, hidden_size: int, num_classes: int, learning_rate: float) -> Any:
    """A compiled Keras MLP; build it inside strategy.scope()."""
    keras = _tf().keras
    model = keras.Sequential(
        [
            keras.Input(shape=(num_features,)),
            keras.layers.Dense(hidden_size, activation="relu"),
            keras.layers.Dense(hidden_size, activation="relu"),
            keras.layers.Dense(num_classes),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def train_epoch(model: Any, dataset: Any, steps: int) -> dict[str, float]:
    """One epoch of `steps` global batches; the epoch's metrics (loss, accuracy), averaged over all workers."""
    history = model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
    return {name: float(values[-1]) for name, values in history.history.items() if values}


def _write_weights(model: Any, directory: Path) -> None:
    directory.mkdir()
    model.save_weights(str(directory / WEIGHTS_FILE))


def save_checkpoint(model: Any, epoch: int, is_chief: bool) -> Path | None:
    """Every worker calls this at the same epoch. The chief writes ckpt-<epoch>/model.weights.h5 through
    sdk.save_checkpoint (atomic, pruned to CHECKPOINT_KEEP_LAST, reported); the others write to a scratch
    directory and delete it, because saving a distributed model may need every worker. Returns the chief's path."""
    if is_chief:
        return sdk.save_checkpoint(
            lambda path: _write_weights(model, path), epoch=epoch, keep_last=sdk.checkpoint_keep_last()
        )
    scratch = Path(tempfile.mkdtemp(prefix="tj-checkpoint-"))
    try:
        _write_weights(model, scratch / "weights")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None


def load_checkpoint(model: Any, path: Path) -> None:
    model.load_weights(str(path / WEIGHTS_FILE))


def check_collective(strategy: Any, task: TFTask) -> dict[str, Any]:
    """An all-reduce over every worker: the sum of (index + 1) is n(n+1)/2 only if all n workers took part."""
    tf = _tf()

    def replica_sum() -> Any:
        return tf.distribute.get_replica_context().all_reduce("sum", tf.constant(task.index + 1.0))

    total = strategy.experimental_local_results(strategy.run(replica_sum))[0]
    return {"rank": task.index, "worldSize": task.num_workers, "rankSum": int(total.numpy())}


def stop_agreed(strategy: Any, requested: bool, num_workers: int) -> bool:
    """Whether any worker was asked to stop (SIGTERM): an all-reduce of every worker's flag, so that all stop
    after the same epoch, whichever got its signal first (as check_collective does; alone, its own flag)."""
    if num_workers <= 1:
        return requested
    tf = _tf()

    def any_requested() -> Any:
        return tf.distribute.get_replica_context().all_reduce("sum", tf.constant(1.0 if requested else 0.0))

    return float(strategy.experimental_local_results(strategy.run(any_requested))[0].numpy()) > 0


def train(params: Mapping[str, Any], task: TFTask, implementation: str) -> None:
    strategy = make_strategy(implementation)  # first: MultiWorkerMirroredStrategy must precede other TF ops
    tf = _tf()
    replicas = strategy.num_replicas_in_sync
    log.info(
        "task %s:%d of %d workers, %d replicas in sync, %s collectives",
        task.task_type,
        task.index,
        task.num_workers,
        replicas,
        implementation,
    )
    if task.num_workers > 1:
        log.info("collective check: %s", json.dumps(check_collective(strategy, task)))
    global_batch = params["batchSize"] * replicas
    features, labels = make_dataset(params["numSamples"], params["numFeatures"], params["numClasses"], params["seed"])
    features, labels = tf.constant(features, dtype=tf.float32), tf.constant(labels, dtype=tf.int64)
    steps = steps_per_epoch(params["numSamples"], global_batch)

    tf.keras.utils.set_random_seed(params["seed"])
    with strategy.scope():
        model = build_model(params["numFeatures"], params["hiddenSize"], params["numClasses"], params["learningRate"])
    start, checkpoint = resume_point()
    if checkpoint is not None:
        load_checkpoint(model, checkpoint)
        log.info("resuming from %s at epoch %d", checkpoint, start)

    epochs, interval = params["epochs"], sdk.checkpoint_interval()
    if start > epochs:
        log.info("the checkpoint already completes all %d epochs", epochs)
    # Every worker waits for the others to reach the epoch's end, where they agree to stop (as long as the grace
    # period allows), and leaves there only: not at the chief's report_progress, where it would save alone.
    stop = sdk.on_stop(follow_seconds=float("inf"), at_safe_points=False)
    for epoch in range(start, epochs + 1):
        # A new order every epoch, the same on every worker and again after a restart.
        dataset = make_tf_dataset(features, labels, global_batch, shuffle_seed(params["seed"], epoch))
        metrics = train_epoch(model, dataset, steps)
        if stop_agreed(strategy, stop.requested, task.num_workers):
            stop.request()  # a worker not signalled yet stops too: its SIGTERM is on the way
            stop.check(save_checkpoint(model, epoch, task.is_chief))  # saved together; the chief reports it; all leave
        if task.is_chief:
            shown = " ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items()))
            log.info("epoch %d/%d: %s", epoch, epochs, shown)
            sdk.report_progress(epoch=epoch, total_epochs=epochs, metrics=metrics)
        if should_checkpoint(epoch, interval, epochs):
            path = save_checkpoint(model, epoch, task.is_chief)
            if path is not None:
                log.info("saved checkpoint %s", path)
    if task.is_chief:
        sdk.report_progress(epoch=epochs, total_epochs=epochs)
        # The last report carries 100 % and the final checkpoint: wait for it longer than flush's default 5 s (a
        # busy endpoint answers late, and the process exits right after).
        if not sdk.flush(timeout=FINAL_REPORT_SECONDS):
            log.warning("the final progress report was not accepted within %ds", FINAL_REPORT_SECONDS)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        params = parse_hyperparameters(os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE"))
        task = parse_tf_config(os.environ.get("TF_CONFIG"))
        implementation = communication_implementation(os.environ.get("DISTRIBUTED_BACKEND"))
    except ConfigError as error:
        log.error("%s", error)
        return EXIT_INVALID_CONFIG
    log.info("hyperparameters %s", json.dumps(params, sort_keys=True))
    train(params, task, implementation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
