"""The training script of seed 002 (the Kopf guide), as its launch script calls it and its Phase 6 checkpoints.

The guide's launch script runs `python -m torch.distributed.launch … /app/train.py --model=$MODEL
--dataset=$DATASET --learning-rate=… --batch-size=… --epochs=… --checkpoint-dir=/checkpoints`; its Phase 6 saves
`checkpoint-epoch-<N>.pt` every CHECKPOINT_FREQUENCY epochs with a `checkpoint-latest.pt` symlink and resumes from
that link. This script does exactly that and reads no other variable of the operator's: only the guide's names
(CHECKPOINT_FREQUENCY, RESUME_FROM_CHECKPOINT) and what torch.distributed.launch itself sets for each process (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

It trains for real: an MLP on scikit-learn's digits (1,797 8x8 images, bundled with scikit-learn, nothing is
downloaded) with DistributedDataParallel, gloo on CPUs and nccl where CUDA is available, one process per GPU.
Two things differ from the guide's snippet, on purpose: a checkpoint and the link are replaced atomically (written to
a temporary name, then renamed), so a SIGKILL mid-save leaves the previous checkpoint whole; and the resume point is
RESUME_FROM_CHECKPOINT when it names a checkpoint file, else the link (the guide's operator sets the variable to the
newest checkpoint's path).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

LATEST = "checkpoint-latest.pt"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--checkpoint-dir", type=Path, default=Path("/checkpoints"))
    # torch.distributed.launch passes --local-rank (older releases: --local_rank) unless told --use-env.
    parser.add_argument("--local-rank", "--local_rank", type=int, default=0)
    return parser.parse_args(argv)


def checkpoint_frequency() -> int:
    return max(1, int(os.environ.get("CHECKPOINT_FREQUENCY", "1")))  # the guide's name, in epochs


def resume_path(directory: Path) -> Path | None:
    """RESUME_FROM_CHECKPOINT when it names a file (the guide's operator sets the newest checkpoint's path), else
    the guide's `checkpoint-latest.pt` link when it exists (`true`, `false` or unset: look in the directory)."""
    named = os.environ.get("RESUME_FROM_CHECKPOINT", "").strip()
    if named not in ("", "true", "false") and Path(named).is_file():
        return Path(named)
    latest = directory / LATEST
    return latest if latest.exists() else None


def save_checkpoint(directory: Path, epoch: int, state: dict[str, Any]) -> Path:
    """checkpoint-epoch-<epoch>.pt and the checkpoint-latest.pt link, each replaced atomically."""
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"checkpoint-epoch-{epoch}.pt"
    partial = directory / f".{path.name}.partial"
    torch.save(state, partial)
    os.replace(partial, path)
    link = directory / f".{LATEST}.partial"
    link.unlink(missing_ok=True)
    link.symlink_to(path.name)
    os.replace(link, directory / LATEST)
    return path


def load_data(dataset: str) -> tuple[Any, Any]:
    if dataset != "digits":
        raise SystemExit(f"dataset {dataset!r} is not bundled with this image (digits is)")
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    return features, torch.tensor(digits.target, dtype=torch.long)


def build_model(model: str, inputs: int, classes: int) -> Any:
    if model != "mlp":
        raise SystemExit(f"model {model!r} is not defined here (mlp is)")
    from torch import nn

    return nn.Sequential(nn.Linear(inputs, 64), nn.ReLU(), nn.Linear(64, classes))


def train_epoch(ddp: Any, loader: Any, optimizer: Any, device: Any) -> tuple[float, float]:
    """One pass over this rank's share of the data: (mean loss, accuracy)."""
    import torch

    loss_function = torch.nn.CrossEntropyLoss()
    total, correct, loss_sum = 0, 0, 0.0
    for batch, target in loader:
        batch, target = batch.to(device), target.to(device)
        optimizer.zero_grad()
        output = ddp(batch)
        loss = loss_function(output, target)
        loss.backward()
        optimizer.step()
        loss_sum += float(loss) * len(target)
        correct += int((output.argmax(1) == target).sum())
        total += len(target)
    return loss_sum / total, correct / total


def resume(model: Any, optimizer: Any, directory: Path, device: Any) -> int:
    """Load the checkpoint to resume from (resume_path) into model and optimizer; the first epoch to run."""
    import torch

    found = resume_path(directory)
    if found is None:
        return 1
    saved = torch.load(found, map_location=device)
    model.load_state_dict(saved["model_state_dict"])
    optimizer.load_state_dict(saved["optimizer_state_dict"])
    print(f"resumed from {found.resolve().name} at epoch {saved['epoch'] + 1}", flush=True)
    return saved["epoch"] + 1


def main(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # RANK, WORLD_SIZE, MASTER_* from torch.distributed.launch
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}: {world} processes joined over {dist.get_backend()}", flush=True)
    device = torch.device(f"cuda:{args.local_rank}") if cuda else torch.device("cpu")
    features, labels = load_data(args.dataset)
    torch.manual_seed(0)
    model = build_model(args.model, features.shape[1], int(labels.max()) + 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    start = resume(model, optimizer, args.checkpoint_dir, device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    data = TensorDataset(features, labels)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    for epoch in range(start, args.epochs + 1):
        sampler.set_epoch(epoch)
        loss, accuracy = train_epoch(ddp, loader, optimizer, device)
        print(f"rank {rank}: epoch {epoch}/{args.epochs} loss {loss:.4f} accuracy {accuracy:.3f}", flush=True)
        if rank == 0 and (epoch % checkpoint_frequency() == 0 or epoch == args.epochs):
            state = {"epoch": epoch, "model_state_dict": model.state_dict(), "loss": loss}
            state["optimizer_state_dict"] = optimizer.state_dict()
            print(f"saved {save_checkpoint(args.checkpoint_dir, epoch, state).name}", flush=True)
        dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
