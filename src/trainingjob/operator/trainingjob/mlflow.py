"""Find a job's MLflow run, so status.tracking can link it (builders/tracking.py): the chief's SDK creates the
run, the operator only reads.

Two calls of MLflow's REST API (experiments/get-by-name, runs/search by run name). A server that is down or slow
costs one short timeout and is asked again later; it never fails a reconcile.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

import aiohttp

from trainingjob.api.types import TrainingJob
from trainingjob.builders.tracking import LOOKUP_INTERVAL, NO_RUN_YET, TrackingSettings, tracking_settings

logger = logging.getLogger(__name__)
TIMEOUT = aiohttp.ClientTimeout(total=3)


@dataclass(slots=True)
class RunLookup:
    """One job's run as found so far (None: not yet), and when it was last looked for (monotonic seconds)."""

    found: dict[str, str] | None = None
    asked: float = -1e9


class MlflowRuns:
    """Looks jobs' runs up on their MLflow server; what it found of each job is kept in the job's RunLookup."""

    def __init__(self, default_uri: str | None) -> None:
        self.default_uri = default_uri

    async def prefetch(self, lookup: RunLookup, job: TrainingJob) -> None:
        """Look for a running job's run now, before its reconcile may take a quota turn (operator/quota_gate.py):
        the plan inside the turn links what was found, so a slow MLflow server never holds the turn other jobs of
        the namespace wait for."""
        settings = tracking_settings(job, self.default_uri)
        if settings is None or (job.status.tracking or {}).get("runId"):
            return
        if job.status.phase not in NO_RUN_YET:
            await self.find(lookup, settings)

    @staticmethod
    def due(lookup: RunLookup) -> bool:
        return time.monotonic() - lookup.asked >= LOOKUP_INTERVAL

    async def find(self, lookup: RunLookup, settings: TrackingSettings) -> dict[str, str] | None:
        """{"experimentId", "runId"} of the job's run, or None (not created yet, or the server did not answer)."""
        if lookup.found is not None:
            return lookup.found
        if not self.due(lookup):
            return None
        lookup.asked = time.monotonic()
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
                run = await self._lookup(session, settings)
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError) as error:
            logger.info("MLflow at %s not reachable for run %s: %s", settings.uri, settings.run_name, error)
            return None
        if run is not None:
            lookup.found = run
        return run

    @staticmethod
    async def _lookup(session: aiohttp.ClientSession, settings: TrackingSettings) -> dict[str, str] | None:
        api = f"{settings.uri}/api/2.0/mlflow"
        async with session.get(
            f"{api}/experiments/get-by-name", params={"experiment_name": settings.experiment}
        ) as response:
            if response.status == 404:
                return None
            response.raise_for_status()
            experiment_id = (await response.json())["experiment"]["experiment_id"]
        query = {
            "experiment_ids": [experiment_id],
            "filter": f"attributes.run_name = {json.dumps(settings.run_name)}",
            "max_results": 1,
        }
        async with session.post(f"{api}/runs/search", json=query) as response:
            response.raise_for_status()
            runs = (await response.json()).get("runs") or []
        if not runs:
            return None
        return {"experimentId": str(experiment_id), "runId": str(runs[0]["info"]["run_id"])}
