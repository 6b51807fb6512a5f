"""Elastic PyTorch: DDP under torchrun's elastic agent, training on whatever number of workers is there.

The operator runs `torchrun` in every worker of a job with spec.elastic and sets PET_NNODES=min:max and the c10d
rendezvous (PET_RDZV_BACKEND, PET_RDZV_ENDPOINT on worker 0, PET_RDZV_ID). When a worker joins (kubectl scale up)
or leaves (scale down, preemption, a crash), torchrun's agents stop this script on every worker, meet again and
start it anew with the new RANK and WORLD_SIZE. So the script resumes from its newest checkpoint whenever it
starts: checkpoints live on storage every worker mounts (checkpoint.storage), written atomically by rank 0 after
every epoch (trainingjob.sdk.save_checkpoint), and rank 0's model is what DDP broadcasts to the others.

What it shows, on every worker's stdout (its first process: LOCAL_RANK 0), one JSON object per line:
- `{"event": "round", "worldSize": W, "rank": R, "restart": N, "startEpoch": E}` at every (re)start: the world
  sizes torchrun went through, as this worker saw them;
- `{"event": "epoch", "epoch": E, "worldSize": W, "loss": L}` after every epoch;
and, from rank 0, progress (epoch, loss, worldSize) to the operator through trainingjob.sdk.

The task is a linear regression on synthetic data (the same on every rank, from `seed`), each rank training on its
own interleaved shard, so a world of any size trains the same model.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from typing import Any

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own
    import trainingjob_sdk as sdk

log = logging.getLogger("train_elastic")

DEFAULTS: dict[str, Any] = {
    "epochs": 30,
    "stepsPerEpoch": 20,
    "batchSize": 32,
    "features": 16,
    "samples": 4096,
    "learningRate": 0.05,
    "epochSeconds": 0.0,  # a pause after every epoch, to watch (or test) scaling while it trains
    "seed": 1,
}


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


def say(**event: Any) -> None:
    print(json.dumps(event, sort_keys=True), flush=True)


def dataset(torch: Any, params: dict[str, Any]) -> tuple[Any, Any]:
    generator = torch.Generator().manual_seed(params["seed"])
    features = torch.randn(params["samples"], params["features"], generator=generator)
    truth = torch.randn(params["features"], 1, generator=generator)
    targets = features @ truth + 0.01 * torch.randn(params["samples"], 1, generator=generator)
    return features, targets


def resume(torch: Any, model: Any) -> int:
    """Load the newest checkpoint into `model` (on every rank: they all mount the storage); the epoch to start at."""
    newest = sdk.latest_checkpoint()
    if newest is None:
        return 1
    state = torch.load(newest, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    return int(state["epoch"]) + 1


def train(params: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT come from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(params["seed"])
    model = torch.nn.Linear(params["features"], 1)
    start = torch.tensor([resume(torch, model)])
    dist.broadcast(start, src=0)  # everyone starts where rank 0's checkpoint says
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    speaks = os.environ.get("LOCAL_RANK", "0") == "0"
    if speaks:
        say(
            event="round", worldSize=world, rank=rank, restart=restart, startEpoch=int(start), host=socket.gethostname()
        )
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters
    optimizer = torch.optim.SGD(ddp.parameters(), lr=params["learningRate"])
    features, targets = dataset(torch, params)
    shard_x, shard_y = features[rank::world], targets[rank::world]
    for epoch in range(int(start), params["epochs"] + 1):
        generator = torch.Generator().manual_seed(params["seed"] * 1000 + epoch)
        total = torch.zeros(1)
        for _ in range(params["stepsPerEpoch"]):
            batch = torch.randint(0, len(shard_x), (params["batchSize"],), generator=generator)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(shard_x[batch]), shard_y[batch])
            loss.backward()
            optimizer.step()
            total += loss.detach()
        dist.all_reduce(total)
        mean = float(total) / (params["stepsPerEpoch"] * world)
        if rank == 0:
            state = {"model": model.state_dict(), "epoch": epoch}
            sdk.save_checkpoint(lambda path, state=state: torch.save(state, path), epoch)
            sdk.report_progress(epoch=epoch, total_epochs=params["epochs"], metrics={"loss": mean, "worldSize": world})
        if speaks:
            say(event="epoch", epoch=epoch, worldSize=world, loss=round(mean, 6))
        time.sleep(params["epochSeconds"])
        dist.barrier()
    if rank == 0:
        sdk.flush()
    dist.destroy_process_group()


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    train(hyperparameters())
    return 0


if __name__ == "__main__":
    sys.exit(main())
