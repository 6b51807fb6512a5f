"""XGBoost: the Rabit/collective tracker variables; worker 0 hosts the tracker."""

from __future__ import annotations

from trainingjob.frameworks.base import Plugin, WorkerContext


class XGBoost(Plugin):
    name = "xgboost"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        return {
            "DMLC_TRACKER_URI": context.master_host,
            "DMLC_TRACKER_PORT": str(context.port),
            "DMLC_TASK_ID": str(context.index),
            "DMLC_NUM_WORKER": str(context.workers),
            "MASTER_ADDR": context.master_host,
            "MASTER_PORT": str(context.port),
            "WORLD_SIZE": str(context.workers),
            "RANK": str(context.index),
        }
