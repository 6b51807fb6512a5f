"""JAX: `jax.distributed.initialize()` reads these; worker 0 runs the coordinator."""

from __future__ import annotations

from trainingjob.frameworks.base import NoConfigFiles, WorkerContext


class Jax(NoConfigFiles):
    name = "jax"
    roles: tuple[str, ...] = ()

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        return {
            "JAX_COORDINATOR_ADDRESS": f"{context.master_host}:{context.port}",
            "JAX_NUM_PROCESSES": str(context.workers),
            "JAX_PROCESS_ID": str(context.index),
        }
