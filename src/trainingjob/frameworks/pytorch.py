"""PyTorch: the torch.distributed env:// contract plus torchrun's PET_* variables.

WORLD_SIZE/RANK count workers (pods), as Kubeflow's PyTorchJob does; with several GPUs per worker, torchrun
(`PET_NPROC_PER_NODE` processes per pod) derives the process-level world size and ranks itself.

Elastic (spec.elastic): torchrun's elastic agent in every pod meets the others through the c10d rendezvous that
worker 0's agent hosts (PET_RDZV_ENDPOINT), between PET_NNODES=min:max nodes; it assigns ranks and the world size
itself at every membership change, so no static WORLD_SIZE, RANK or master address is set.
"""

from __future__ import annotations

from trainingjob.frameworks.base import ElasticRendezvous, NoConfigFiles, WorkerContext


def elastic_env(context: WorkerContext, elastic: ElasticRendezvous) -> dict[str, str]:
    return {
        "PET_NNODES": f"{elastic.min_nodes}:{elastic.max_nodes}",
        "PET_NPROC_PER_NODE": str(context.processes_per_worker),
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"{context.master_host}:{context.port}",
        "PET_RDZV_ID": elastic.run_id,
        "PET_MAX_RESTARTS": str(elastic.max_restarts),
    }


class PyTorch(NoConfigFiles):
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
