"""PyTorch DistributedDataParallel on a small MLP classifier over synthetic data, inside a TrainingJob.

Launched by torchrun, which reads the PET_* variables the operator injects (nodes, node rank, processes per node,
rendezvous address) and starts one process per GPU, each with its own RANK, WORLD_SIZE and LOCAL_RANK. It also runs
as a plain single process (`python train_ddp.py`: WORLD_SIZE unset or 1), on a laptop as well.

What it shows:
- torch.distributed with init_method env:// and the backend from DISTRIBUTED_BACKEND (gloo on CPU, nccl on GPUs);
- the data built once as tensors on the device, and each epoch's share of it picked there as DistributedSampler
  picks it (one shuffled order per epoch, padded so every rank takes as many steps): batches are index_select on
  the GPU, so no Python list, DataLoader or host-to-device copy stands between steps and the GPU stays busy (a
  DataLoader over Python lists left an H200 mostly idle, ~7 s per 98-step epoch of this MLP);
- hyperparameters from the JSON file TRAININGJOB_HYPERPARAMETERS_FILE, over the defaults in DEFAULTS;
- progress (epoch, totalEpochs, loss, accuracy) reported by the chief (global rank 0) through trainingjob.sdk;
- a checkpoint every CHECKPOINT_INTERVAL epochs (and after the last one), saved atomically by the chief with
  sdk.save_checkpoint and pruned to CHECKPOINT_KEEP_LAST; a restarted attempt (RESUME_FROM_CHECKPOINT=true) loads the
  newest one and continues with the next epoch;
- a graceful stop (sdk.on_stop): on SIGTERM, which torchrun passes on to its workers, the chief saves the last whole
  epoch at its next progress report and exits; the other ranks leave when the collective breaks.

The dataset is generated from `seed`, so every process builds the same one and nothing is downloaded. The functions
above `main` are pure or import torch only when called, so tests can import this file without PyTorch.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own (see README.md)
    import trainingjob_sdk as sdk

log = logging.getLogger("train_ddp")

EXIT_INVALID_CONFIG = 2  # a configuration error: restarting won't help (see failurePolicy in the YAML)
FINAL_REPORT_SECONDS = 30  # how long the chief waits for its last progress report to be accepted
BACKENDS = ("gloo", "nccl")

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
class DistributedSettings:
    backend: str
    rank: int
    world_size: int
    local_rank: int

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_chief(self) -> bool:
        """Global rank 0: on worker 0 (the one the operator takes progress reports from), local rank 0."""
        return self.rank == 0


def distributed_settings(env: Mapping[str, str] | None = None) -> DistributedSettings:
    """RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them for this process, and DISTRIBUTED_BACKEND.

    Without torchrun they are the operator's per-pod values (one process per pod), or unset: a single process.
    """
    env = os.environ if env is None else env
    backend = env.get("DISTRIBUTED_BACKEND", "").strip().lower() or "gloo"
    if backend not in BACKENDS:
        raise ConfigError(f"DISTRIBUTED_BACKEND must be one of {', '.join(BACKENDS)}, got {backend!r}")
    world_size = _env_int(env, "WORLD_SIZE", 1)
    rank = _env_int(env, "RANK", 0)
    local_rank = _env_int(env, "LOCAL_RANK", 0)
    if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
        raise ConfigError(f"inconsistent RANK={rank} WORLD_SIZE={world_size} LOCAL_RANK={local_rank}")
    return DistributedSettings(backend, rank, world_size, local_rank)


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


# --- PyTorch -------------------------------------------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise RuntimeError(
            "this example needs PyTorch: pip install torch, or build from a pytorch/pytorch image"
        ) from error
    return torch


def build_model(num_features: int, hidden_size: int, num_classes: int) -> Any:
    nn = _torch().nn
    return nn.Sequential(
        nn.Linear(num_features, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, num_classes),
    )


def epoch_shard(count: int, settings: DistributedSettings, seed: int, device: Any) -> Any:
    """This process's sample indices for one epoch, on `device`, as DistributedSampler(shuffle=True) chooses them:
    one permutation from `seed` (the same on every rank), padded by wrapping around to a multiple of the world size
    so that every rank takes the same number of steps (DDP needs that), then every world_size-th from the rank."""
    torch = _torch()
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    per_rank = -(-count // settings.world_size)
    padded = torch.cat([order, order[: per_rank * settings.world_size - count]])
    return padded[settings.rank :: settings.world_size].to(device)


def train_epoch(
    model: Any, features: Any, labels: Any, indices: Any, batch_size: int, optimizer: Any
) -> dict[str, float]:
    """One pass over this process's share (`indices`) of the data, which is already on the device; loss and
    accuracy over all processes. Nothing leaves the device until the totals at the end."""
    torch = _torch()
    model.train()
    totals = torch.zeros(3, dtype=torch.float64, device=features.device)  # loss sum, correct, samples
    for start in range(0, indices.numel(), batch_size):
        batch = indices[start : start + batch_size]
        inputs, targets = features.index_select(0, batch), labels.index_select(0, batch)
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()
        totals[0] += loss.detach() * targets.size(0)
        totals[1] += (logits.argmax(dim=1) == targets).sum()
        totals[2] += targets.size(0)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(totals)
    loss_sum, correct, samples = totals.tolist()
    return {"loss": loss_sum / max(samples, 1.0), "accuracy": correct / max(samples, 1.0)}


def save_checkpoint(model: Any, optimizer: Any, epoch: int, params: Mapping[str, Any]) -> Path:
    """Write ckpt-<epoch>.pt atomically into CHECKPOINT_DIR, keep the newest CHECKPOINT_KEEP_LAST, report it."""
    torch = _torch()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
        "hyperparameters": dict(params),
    }
    return sdk.save_checkpoint(
        lambda path: torch.save(state, path), epoch=epoch, keep_last=sdk.checkpoint_keep_last(), suffix=".pt"
    )


def load_checkpoint(path: Path) -> dict[str, Any]:
    return _torch().load(path, map_location="cpu", weights_only=True)


def train(params: Mapping[str, Any], settings: DistributedSettings) -> None:
    torch = _torch()
    from torch.nn.parallel import DistributedDataParallel

    if settings.backend == "nccl":
        if not torch.cuda.is_available():
            raise ConfigError("DISTRIBUTED_BACKEND is nccl but no GPU is visible; use gloo or request GPUs")
        torch.cuda.set_device(settings.local_rank)
        device = torch.device("cuda", settings.local_rank)
    else:
        device = torch.device("cpu")
    if settings.distributed:
        torch.distributed.init_process_group(backend=settings.backend, init_method="env://")
    log.info(
        "rank %d of %d (local rank %d), backend %s, device %s",
        settings.rank,
        settings.world_size,
        settings.local_rank,
        settings.backend,
        device,
    )

    if settings.distributed:
        # An all-reduce over every rank: the sum of (rank + 1) is n(n+1)/2 only if all n ranks took part.
        total = torch.tensor([settings.rank + 1.0])
        torch.distributed.all_reduce(total)
        check = {"rank": settings.rank, "worldSize": settings.world_size, "rankSum": int(total.item())}
        log.info("collective check: %s", json.dumps(check))

    rows, classes = make_dataset(params["numSamples"], params["numFeatures"], params["numClasses"], params["seed"])
    # Built once, on the device: every step then only indexes tensors that are already there.
    features = torch.tensor(rows, dtype=torch.float32, device=device)
    labels = torch.tensor(classes, dtype=torch.long, device=device)
    del rows, classes

    torch.manual_seed(params["seed"])
    model = build_model(params["numFeatures"], params["hiddenSize"], params["numClasses"]).to(device)
    start, checkpoint = resume_point()
    state = None
    if checkpoint is not None:
        state = load_checkpoint(checkpoint)
        model.load_state_dict(state["model"])
        log.info("resuming from %s at epoch %d", checkpoint, start)
    # DDP broadcasts rank 0's parameters, which also makes every rank wait until all have loaded the checkpoint.
    net = model
    if settings.distributed:
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(net.parameters(), lr=params["learningRate"])
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])

    epochs, interval = params["epochs"], sdk.checkpoint_interval()
    if start > epochs:
        log.info("the checkpoint already completes all %d epochs", epochs)
    done = {"epoch": start - 1}  # the last whole epoch: what a stop saves

    # SIGTERM (suspend, scale, preemption, delete): the chief saves the last whole epoch at its next progress report
    # and exits; the other ranks leave when their next collective fails because it has gone.
    def save_on_stop() -> Path:
        return save_checkpoint(model, optimizer, done["epoch"], params)

    # The others wait for the chief's safe point as long as the grace period allows (gloo notices at once when it
    # has left): a chief whose collective broke mid-epoch could not save a whole epoch.
    stop = sdk.on_stop(save_on_stop if settings.is_chief else None, follow_seconds=float("inf"))
    try:
        for epoch in range(start, epochs + 1):
            indices = epoch_shard(labels.numel(), settings, params["seed"] + epoch, device)
            metrics = train_epoch(net, features, labels, indices, params["batchSize"], optimizer)
            done["epoch"] = epoch
            if not settings.is_chief:
                continue
            log.info("epoch %d/%d: loss %.4f accuracy %.4f", epoch, epochs, metrics["loss"], metrics["accuracy"])
            sdk.report_progress(epoch=epoch, total_epochs=epochs, metrics=metrics)  # a safe point: a stop exits here
            if should_checkpoint(epoch, interval, epochs):
                log.info("saved checkpoint %s", save_checkpoint(model, optimizer, epoch, params))
    except Exception:
        if not stop.requested:
            raise
        log.info("stopping: the chief has saved and left, so the collective is gone")
        stop.leave()
    if settings.is_chief:
        sdk.report_progress(epoch=epochs, total_epochs=epochs)
        # The last report carries 100 % and the final checkpoint: wait for it longer than flush's default 5 s (a
        # busy endpoint answers late, and the process exits right after).
        if not sdk.flush(timeout=FINAL_REPORT_SECONDS):
            log.warning("the final progress report was not accepted within %ds", FINAL_REPORT_SECONDS)
    if settings.distributed:
        torch.distributed.barrier()  # nobody leaves while the chief still writes the last checkpoint


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        params = parse_hyperparameters(os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE"))
        settings = distributed_settings()
    except ConfigError as error:
        log.error("%s", error)
        return EXIT_INVALID_CONFIG
    log.info("hyperparameters %s", json.dumps(params, sort_keys=True))
    torch = _torch()
    try:
        train(params, settings)
    except ConfigError as error:
        log.error("%s", error)
        return EXIT_INVALID_CONFIG
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
