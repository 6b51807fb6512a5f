"""JAX: `jax.distributed.initialize()` reads these; worker 0 runs the coordinator."""

from __future__ import annotations

from trainingjob.frameworks.base import Plugin, WorkerContext


class Jax(Plugin):
    name = "jax"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        return {
            "JAX_COORDINATOR_ADDRESS": f"{context.master_host}:{context.port}",
            "JAX_NUM_PROCESSES": str(context.workers),
            "JAX_PROCESS_ID": str(context.index),
        }
