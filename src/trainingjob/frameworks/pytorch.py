"""PyTorch: the torch.distributed env:// contract plus torchrun's PET_* variables.

WORLD_SIZE/RANK count workers (pods), as Kubeflow's PyTorchJob does; with several GPUs per worker, torchrun
(`PET_NPROC_PER_NODE` processes per pod) derives the process-level world size and ranks itself.
"""

from __future__ import annotations

from trainingjob.frameworks.base import NoConfigFiles, WorkerContext


class PyTorch(NoConfigFiles):
    name = "pytorch"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
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
