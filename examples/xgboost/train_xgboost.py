"""XGBoost gradient-boosted trees, distributed over a TrainingJob's workers: a synthetic regression problem, or
classifying scikit-learn's bundled digits (dataset: digits; the local example and `make demo`).

Every worker runs this script as one process and trains on its own rows of the data. XGBoost's collective needs a
tracker that coordinates the workers: worker 0 starts it in-process at DMLC_TRACKER_URI:DMLC_TRACKER_PORT (its own
address, as the operator sets it), and every worker, worker 0 included, joins with the DMLC_* variables. With a
single worker (DMLC_NUM_WORKER unset or 1) it is plain xgboost.train, on a laptop as well. Needs xgboost >= 2.1.

What it shows:
- the collective (rabit) tracker and CommunicatorContext from DMLC_TRACKER_URI, DMLC_TRACKER_PORT, DMLC_TASK_ID and
  DMLC_NUM_WORKER; each worker's share of the rows by DMLC_TASK_ID;
- hyperparameters from the JSON file TRAININGJOB_HYPERPARAMETERS_FILE, over the defaults in DEFAULTS; an "epoch"
  is roundsPerEpoch boosting rounds;
- progress (epoch, totalEpochs, rmse) reported by the chief (worker 0) through trainingjob.sdk;
- the model (JSON) as checkpoint every CHECKPOINT_INTERVAL epochs and after the last one, saved atomically by the
  chief with sdk.save_checkpoint and pruned to CHECKPOINT_KEEP_LAST; a restarted attempt
  (RESUME_FROM_CHECKPOINT=true) loads the newest model and boosts on from the next epoch;
- a graceful stop (sdk.on_stop): on SIGTERM (suspend, scale, preemption, delete) the chief saves the last whole
  epoch at its next progress report and exits; the others leave when the collective breaks, or soon after SIGTERM.

The synthetic dataset is generated from `seed` and the digits ship with scikit-learn, so every worker builds the
same one and nothing is downloaded. With digits, every fifth image is held out: progress carries the held-out
accuracy (1 - merror over all workers' held-out rows). epochSeconds > 0 paces an epoch to last at least that long,
so that a demo or a test has time to kill a worker mid-run (the digits train in well under a second per epoch).
The functions above `main` are pure or import xgboost only when called, so tests can import this file without
xgboost.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own (see README.md)
    import trainingjob_sdk as sdk

log = logging.getLogger("train_xgboost")

EXIT_INVALID_CONFIG = 2  # a configuration error: restarting won't help (see failurePolicy in the YAML)
FINAL_REPORT_SECONDS = 30  # how long the chief waits for its last progress report to be accepted
CONNECT_RETRIES = 30  # a worker may start before worker 0's tracker listens
RESOLVE_TIMEOUT_SECONDS = 300.0  # worker 0's DNS record appears once its pod has an IP
TRACKER_SHUTDOWN_TIMEOUT_SECONDS = 300

DEFAULTS: dict[str, Any] = {
    "epochs": 10,
    "roundsPerEpoch": 10,
    "learningRate": 0.1,
    "maxDepth": 6,
    "numSamples": 8192,
    "numFeatures": 20,
    "noise": 0.1,
    "seed": 42,
    "treeMethod": "hist",
    "device": "cpu",
    "dataset": "synthetic",
    "epochSeconds": 0.0,
}
DATASETS = ("synthetic", "digits")
DIGITS_CLASSES = 10
HOLDOUT_EVERY = 5  # digits: every fifth image is held out for the accuracy
POSITIVE = ("epochs", "roundsPerEpoch", "learningRate", "maxDepth", "numSamples", "numFeatures")

T = TypeVar("T")


ConfigError = sdk.ConfigError  # hyperparameters or launcher variables that cannot work: exit EXIT_INVALID_CONFIG


def _check(params: Mapping[str, Any]) -> None:
    """What the hyperparameters must satisfy together, beyond being positive."""
    if params["noise"] < 0:
        raise ConfigError(f"hyperparameter noise must not be negative, got {params['noise']}")
    if params["dataset"] not in DATASETS:
        raise ConfigError(f"hyperparameter dataset must be one of {', '.join(DATASETS)}, got {params['dataset']!r}")
    if params["epochSeconds"] < 0:
        raise ConfigError(f"hyperparameter epochSeconds must not be negative, got {params['epochSeconds']}")
    device = params["device"]
    if device != "cpu" and device != "cuda" and not device.startswith("cuda:"):
        raise ConfigError(f"hyperparameter device must be cpu, cuda or cuda:<n>, got {device!r}")


# --- hyperparameters -----------------------------------------------------------------------------------------------


def parse_hyperparameters(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """DEFAULTS, overridden by the JSON object in `path` (TRAININGJOB_HYPERPARAMETERS_FILE); see
    trainingjob.sdk.parse_hyperparameters for the conversions. A value that cannot work is a ConfigError."""
    return sdk.parse_hyperparameters(path, DEFAULTS, positive=POSITIVE, check=_check)


# --- launcher environment ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectiveSettings:
    """This worker's part in XGBoost's collective, from the DMLC_* variables."""

    num_workers: int
    task_index: int
    tracker_host: str = ""
    tracker_port: int = 0

    @property
    def distributed(self) -> bool:
        return self.num_workers > 1

    @property
    def is_chief(self) -> bool:
        """Worker 0: it runs the tracker, reports progress and writes checkpoints."""
        return self.task_index == 0

    def worker_args(self, tracker_address: str) -> dict[str, Any]:
        """The arguments of xgboost.collective.CommunicatorContext for this worker."""
        return {
            "dmlc_communicator": "rabit",
            "dmlc_tracker_uri": tracker_address,
            "dmlc_tracker_port": self.tracker_port,
            "dmlc_task_id": str(self.task_index),
            "dmlc_retry": CONNECT_RETRIES,
        }


def collective_settings(env: Mapping[str, str] | None = None) -> CollectiveSettings:
    """DMLC_NUM_WORKER, DMLC_TASK_ID, DMLC_TRACKER_URI and DMLC_TRACKER_PORT; one worker when they are unset."""
    env = os.environ if env is None else env
    num_workers = _env_int(env, "DMLC_NUM_WORKER", 1)
    if num_workers < 1:
        raise ConfigError(f"DMLC_NUM_WORKER must be at least 1, got {num_workers}")
    if num_workers == 1:
        return CollectiveSettings(1, 0)
    task_index = _env_int(env, "DMLC_TASK_ID", -1)
    host = env.get("DMLC_TRACKER_URI", "").strip()
    port = _env_int(env, "DMLC_TRACKER_PORT", 0)
    if not 0 <= task_index < num_workers:
        raise ConfigError(f"DMLC_TASK_ID must be 0 to {num_workers - 1}, got {env.get('DMLC_TASK_ID')!r}")
    if not host or not 0 < port < 65536:
        raise ConfigError("DMLC_TRACKER_URI and DMLC_TRACKER_PORT must name the tracker for a distributed run")
    return CollectiveSettings(num_workers, task_index, host, port)


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def resolve(host: str, timeout: float = RESOLVE_TIMEOUT_SECONDS, interval: float = 2.0) -> str:
    """An IPv4 address of `host`, retrying while DNS does not know it yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError as error:
            if time.monotonic() >= deadline:
                raise RuntimeError(f"cannot resolve the tracker host {host}: {error}") from error
            log.info("waiting for %s to resolve: %s", host, error)
            time.sleep(interval)


# --- data ----------------------------------------------------------------------------------------------------------


def make_dataset(num_samples: int, num_features: int, noise: float, seed: int) -> tuple[list[list[float]], list[float]]:
    """A synthetic regression set: a random linear function plus a non-linear term and Gaussian noise."""
    rng = random.Random(seed)
    weights = [rng.gauss(0.0, 1.0) for _ in range(num_features)]
    features, targets = [], []
    for _ in range(num_samples):
        row = [rng.uniform(-1.0, 1.0) for _ in range(num_features)]
        target = sum(w * x for w, x in zip(weights, row, strict=True)) + math.sin(3.0 * row[0])
        features.append(row)
        targets.append(target + rng.gauss(0.0, noise))
    return features, targets


def load_digits() -> tuple[list[list[float]], list[int], list[list[float]], list[int]]:
    """scikit-learn's bundled 8x8 digits (1797 images, no download): (train rows, labels, held-out rows, labels)."""
    from sklearn.datasets import load_digits as bundled

    digits = bundled()
    rows, labels = (digits.data / 16.0).tolist(), [int(label) for label in digits.target]
    train = [i for i in range(len(rows)) if i % HOLDOUT_EVERY]
    held = [i for i in range(len(rows)) if not i % HOLDOUT_EVERY]
    return [rows[i] for i in train], [labels[i] for i in train], [rows[i] for i in held], [labels[i] for i in held]


def shard(rows: Sequence[T], index: int, count: int) -> list[T]:
    """Worker `index`'s rows out of `count` workers: every count-th row, so the shards differ by one row at most."""
    return list(rows[index::count])


def booster_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """The xgboost.train parameters for the hyperparameters."""
    if params["dataset"] == "digits":
        task = {"objective": "multi:softprob", "num_class": DIGITS_CLASSES, "eval_metric": ["merror", "mlogloss"]}
    else:
        task = {"objective": "reg:squarederror", "eval_metric": "rmse"}
    return {
        **task,
        "eta": params["learningRate"],
        "max_depth": params["maxDepth"],
        "tree_method": params["treeMethod"],
        "device": params["device"],
        "seed": params["seed"],
    }


# --- checkpoints ---------------------------------------------------------------------------------------------------


# (first epoch to train, checkpoint to load): a restarted or resumed attempt continues after its newest checkpoint,
# a new run starts at epoch 1 unless spec.checkpoint.resumeFrom names an earlier run's (sdk.resume_point).
resume_point = sdk.resume_point


def should_checkpoint(epoch: int, interval: int, total_epochs: int) -> bool:
    """Every `interval` epochs (CHECKPOINT_INTERVAL), and after the last epoch so the final model is kept."""
    return epoch % max(interval, 1) == 0 or epoch == total_epochs


# --- XGBoost -------------------------------------------------------------------------------------------------------


def _xgboost() -> Any:
    try:
        import xgboost
    except ImportError as error:
        raise RuntimeError("this example needs XGBoost 2.1 or later: pip install 'xgboost>=2.1'") from error
    return xgboost


def train_epoch(
    booster_params: Mapping[str, Any], dtrain: Any, booster: Any, rounds: int, dtest: Any = None
) -> tuple[Any, dict]:
    """`rounds` more boosting rounds on top of `booster` (None: from scratch); the new booster and the metrics
    after its last round (over all workers' rows when distributed): the training set's, or with `dtest` the
    held-out set's, merror given as accuracy."""
    xgb = _xgboost()
    results: dict[str, dict[str, list[float]]] = {}
    evals = [(dtrain, "train")] if dtest is None else [(dtest, "test")]
    booster = xgb.train(
        dict(booster_params),
        dtrain,
        num_boost_round=rounds,
        evals=evals,
        evals_result=results,
        xgb_model=booster,
        verbose_eval=False,
    )
    metrics = {name: float(values[-1]) for name, values in results.get(evals[0][1], {}).items() if values}
    if "merror" in metrics:
        metrics["accuracy"] = 1.0 - metrics.pop("merror")
    if "mlogloss" in metrics:
        metrics["loss"] = metrics.pop("mlogloss")
    return booster, metrics


def save_checkpoint(booster: Any, epoch: int) -> Path:
    """The model as JSON in ckpt-<epoch>.json, atomically, pruned to CHECKPOINT_KEEP_LAST, reported."""
    raw = bytes(booster.save_raw(raw_format="json"))
    return sdk.save_checkpoint(
        lambda path: Path(path).write_bytes(raw), epoch=epoch, keep_last=sdk.checkpoint_keep_last(), suffix=".json"
    )


def load_checkpoint(path: Path) -> Any:
    booster = _xgboost().Booster()
    booster.load_model(str(path))
    return booster


def start_tracker(settings: CollectiveSettings, address: str) -> Any:
    """Worker 0's tracker, listening on `address`:DMLC_TRACKER_PORT until every worker has shut down."""
    _xgboost()
    from xgboost.tracker import RabitTracker

    tracker = RabitTracker(n_workers=settings.num_workers, host_ip=address, port=settings.tracker_port, sortby="task")
    tracker.start()
    log.info("tracker for %d workers listening on %s:%d", settings.num_workers, address, settings.tracker_port)
    return tracker


def train(params: Mapping[str, Any], settings: CollectiveSettings) -> None:
    xgb = _xgboost()
    import numpy as np

    def matrix(features: Sequence[Any], targets: Sequence[Any]) -> Any:
        rows = shard(features, settings.task_index, settings.num_workers)
        labels = shard(targets, settings.task_index, settings.num_workers)
        return xgb.DMatrix(np.asarray(rows, dtype=np.float32), label=np.asarray(labels, dtype=np.float32))

    dtest = None
    if params["dataset"] == "digits":
        features, targets, held_features, held_targets = load_digits()
        dtest = matrix(held_features, held_targets)
    else:
        features, targets = make_dataset(params["numSamples"], params["numFeatures"], params["noise"], params["seed"])
    dtrain = matrix(features, targets)
    log.info("worker %d of %d: %d rows", settings.task_index, settings.num_workers, dtrain.num_row())
    booster_params = booster_parameters(params)

    booster = None
    start, checkpoint = resume_point()
    if checkpoint is not None:
        booster = load_checkpoint(checkpoint)
        log.info("resuming from %s at epoch %d (%d rounds)", checkpoint, start, booster.num_boosted_rounds())

    epochs, interval = params["epochs"], sdk.checkpoint_interval()
    if start > epochs:
        log.info("the checkpoint already completes all %d epochs", epochs)
    metrics: dict[str, float] = {}
    done = {"booster": booster, "epoch": start - 1}  # the last whole epoch: what a stop (SIGTERM) saves
    stop = sdk.on_stop((lambda: save_checkpoint(done["booster"], done["epoch"])) if settings.is_chief else None)
    try:
        for epoch in range(start, epochs + 1):
            began = time.monotonic()
            booster, metrics = train_epoch(booster_params, dtrain, booster, params["roundsPerEpoch"], dtest)
            done.update(booster=booster, epoch=epoch)
            time.sleep(max(0.0, params["epochSeconds"] - (time.monotonic() - began)))
            if settings.is_chief:
                report_epoch(booster, epoch, epochs, interval, metrics)
    except Exception:
        if not stop.requested:
            raise
        stop.check()  # the collective broke under a stop: a chief still here saves the last whole epoch; all leave
    if settings.is_chief:
        sdk.report_progress(epoch=epochs, total_epochs=epochs, metrics=metrics)
        # The last report carries 100 % and the final checkpoint: wait for it longer than flush's default 5 s (a
        # busy endpoint answers late, and the process exits right after).
        if not sdk.flush(timeout=FINAL_REPORT_SECONDS):
            log.warning("the final progress report was not accepted within %ds", FINAL_REPORT_SECONDS)
        log.info("final: %s", json.dumps({"epochs": epochs, "workers": settings.num_workers, **metrics}))


def report_epoch(booster: Any, epoch: int, epochs: int, interval: int, metrics: Mapping[str, float]) -> None:
    """The chief after each epoch: log, report progress (a safe point: a requested stop saves and exits there),
    and checkpoint every `interval` epochs."""
    shown = " ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items()))
    log.info("epoch %d/%d (%d rounds): %s", epoch, epochs, booster.num_boosted_rounds(), shown)
    sdk.report_progress(epoch=epoch, total_epochs=epochs, metrics=metrics)
    if should_checkpoint(epoch, interval, epochs):
        log.info("saved checkpoint %s", save_checkpoint(booster, epoch))


def check_collective(collective: Any) -> dict[str, Any]:
    """An all-reduce over every rank: the sum of (rank + 1) is n(n+1)/2 only if all n ranks took part."""
    import numpy as np

    rank, world = collective.get_rank(), collective.get_world_size()
    total = collective.allreduce(np.asarray([rank + 1.0]), collective.Op.SUM)
    return {"rank": rank, "worldSize": world, "rankSum": int(total[0])}


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        params = parse_hyperparameters(os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE"))
        settings = collective_settings()
    except ConfigError as error:
        log.error("%s", error)
        return EXIT_INVALID_CONFIG
    log.info("hyperparameters %s", json.dumps(params, sort_keys=True))
    if not settings.distributed:
        train(params, settings)  # plain xgboost.train
        return 0

    collective = _xgboost().collective
    address = resolve(settings.tracker_host)
    tracker = start_tracker(settings, address) if settings.is_chief else None
    with collective.CommunicatorContext(**settings.worker_args(address)):
        log.info("joined the collective as rank %d of %d", collective.get_rank(), collective.get_world_size())
        log.info("collective check: %s", json.dumps(check_collective(collective)))
        train(params, settings)
    if tracker is not None:
        try:
            tracker.wait_for(TRACKER_SHUTDOWN_TIMEOUT_SECONDS)
        except Exception as error:  # training is done and saved; don't fail the job over the tracker's goodbye
            log.warning("tracker did not shut down cleanly: %s", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
