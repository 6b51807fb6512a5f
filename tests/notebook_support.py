"""A notebook as a data scientist writes it, executed by a real Jupyter kernel (nbclient, ipykernel): it defines a
PyTorch DDP training function and runs it through trainingjob.client, on the cluster and with the local backend.

The cells are plain text here; `notebook(...)` fills in where the cluster is, which image the workers use and which
Python the local backend starts (the examples' PyTorch runtime, built by `make runtimes`).
"""

from __future__ import annotations

from typing import Any

import nbformat

TORCH_IMAGE = "registry.example/trainingjob-examples/pytorch:0.1"
EPOCHS = 3

TRAIN_CELL = '''
def train(epochs: int, lr: float):
    """Linear regression with DistributedDataParallel over gloo: each rank trains on its shard and the gradients
    are averaged across ranks; rank 0 reports progress through the SDK."""
    import gc

    import torch
    import torch.distributed as dist
    from trainingjob import sdk

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT come from the job
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    y = x @ torch.tensor([1.0, -2.0, 3.0, 0.5]) + 0.1
    shard = slice(rank * 256 // world, (rank + 1) * 256 // world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(1, epochs + 1):
        for _ in range(20):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[shard]).squeeze(-1), y[shard])
            loss.backward()
            optimizer.step()
        total = torch.tensor([loss.item()])
        dist.all_reduce(total)
        print(f"rank {rank}/{world} epoch {epoch} mean loss {total.item() / world:.6f}", flush=True)
        if rank == 0:
            sdk.report_progress(epoch=epoch, total_epochs=epochs, metrics={"loss": total.item() / world})
    # DDP's reducer and the last loss's graph hold the gloo process group: freed only at interpreter exit, its
    # threads aborted a worker with "terminate called without an active exception" in 5-7 of 30 plain-torch
    # 2.15 runs here (0 of 30 with this), which once failed the local half of this notebook (exit code -6).
    del model, optimizer, loss
    gc.collect()
    dist.destroy_process_group()
'''

CLUSTER_CELL = """
from trainingjob.client import TrainingClient

client = TrainingClient(namespace=NAMESPACE, kubeconfig=KUBECONFIG)
name = client.train(
    train,
    func_args={"epochs": EPOCHS, "lr": 0.1},
    workers=2,
    image=IMAGE,
    resources={"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    spec={"scheduling": SCHEDULING, "networking": {"backend": "gloo"}},
)
print("submitted", name)
"""

WAIT_CELL = """
job = client.wait(name, timeout=TIMEOUT)
print("phase", job.phase, "percent", job.progress.percent, "epoch", job.progress.epoch)
"""

LOGS_CELL = """
for worker in range(2):
    for line in client.logs(name, worker=worker):
        print(f"cluster worker {worker}: {line}")
"""

LOCAL_CELL = """
from trainingjob.client import LocalBackend

with TrainingClient(backend=LocalBackend(python=LOCAL_PYTHON)) as local:
    local_name = local.train(train, func_args={"epochs": EPOCHS, "lr": 0.1}, workers=2)
    local_job = local.wait(local_name, timeout=TIMEOUT)
    print("local phase", local_job.phase, "percent", local_job.progress.percent)
    for worker in range(2):
        for line in local.logs(local_name, worker=worker):
            print(f"local worker {worker}: {line}")
"""


def notebook(parameters: dict[str, Any]) -> nbformat.NotebookNode:
    """The notebook, its first cell binding `parameters` (as Python literals)."""
    bindings = "\n".join(f"{key} = {value!r}" for key, value in parameters.items())
    cells = [bindings, TRAIN_CELL, CLUSTER_CELL, WAIT_CELL, LOGS_CELL, LOCAL_CELL]
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(cell.strip()) for cell in cells]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return book


def stream_text(book: nbformat.NotebookNode, cell: int) -> str:
    """Everything cell `cell` printed (stdout and stderr)."""
    outputs = book.cells[cell].get("outputs") or []
    return "".join(output.get("text", "") for output in outputs if output.get("output_type") == "stream")


def widget_states(book: nbformat.NotebookNode) -> list[dict[str, Any]]:
    """The saved state of every widget the notebook showed (nbclient stores it with store_widget_state)."""
    saved = (book.metadata.get("widgets") or {}).get("application/vnd.jupyter.widget-state+json") or {}
    return [model.get("state") or {} for model in (saved.get("state") or {}).values()]
