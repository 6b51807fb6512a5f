"""PyTorch: the torch.distributed env:// contract plus torchrun's PET_* variables.

WORLD_SIZE/RANK count workers (pods), as Kubeflow's PyTorchJob does; with several GPUs per worker, torchrun
(`PET_NPROC_PER_NODE` processes per pod) derives the process-level world size and ranks itself.

Elastic (spec.elastic): torchrun's elastic agent in every pod meets the others through the c10d rendezvous that
worker 0's agent hosts (PET_RDZV_ENDPOINT), between PET_NNODES=min:max nodes; it assigns ranks and the world size
itself at every membership change, so no static WORLD_SIZE, RANK or master address is set. Worker 0's own
endpoint is localhost: torchrun decides whether it hosts the store by resolving the endpoint, and its own DNS name
may not resolve yet when it starts (the Service's endpoints follow the pod's IP), which would make it wait as a
client of itself. TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: with torch's default (the agents' store shared with the
training processes), a worker that joins a running job waits forever for the round's MASTER_ADDR, which the rank 0
of the previous round never writes again (it keeps its store server): a scale-up would hang every worker. Without
sharing, rank 0 writes MASTER_ADDR/MASTER_PORT in every round and its training process hosts that round's store.
"""

from __future__ import annotations

from trainingjob.frameworks.base import ElasticRendezvous, Plugin, WorkerContext


def elastic_env(context: WorkerContext, elastic: ElasticRendezvous) -> dict[str, str]:
    return {
        "PET_NNODES": f"{elastic.min_nodes}:{elastic.max_nodes}",
        "PET_NPROC_PER_NODE": str(context.processes_per_worker),
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"{'localhost' if context.index == 0 else context.master_host}:{context.port}",
        "PET_RDZV_ID": elastic.run_id,
        "PET_MAX_RESTARTS": str(elastic.max_restarts),
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


class PyTorch(Plugin):
    name = "pytorch"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        if context.elastic is not None:
            return elastic_env(context, context.elastic)
        return {
            "MASTER_ADDR": context.master_host,
            "MASTER_PORT": str(context.port),
            "WORLD_SIZE": str(context.workers),
            "RANK": str(context.index),
            "PET_NNODES": str(context.workers),
            "PET_NODE_RANK": str(context.index),
            "PET_NPROC_PER_NODE": str(context.processes_per_worker),
            "PET_MASTER_ADDR": context.master_host,
            "PET_MASTER_PORT": str(context.port),
        }
