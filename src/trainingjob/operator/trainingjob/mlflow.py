"""Find a job's MLflow run, so status.tracking can link it: the chief's SDK creates the run, the operator only reads.

Two calls of MLflow's REST API (experiments/get-by-name, runs/search by run name). A server that is down or slow
costs one short timeout and is asked again later; it never fails a reconcile.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import time
from dataclasses import dataclass

import aiohttp

from trainingjob.api.status import JobStatus, Phase
from trainingjob.api.types import TrainingJob
from trainingjob.builders.tracking import TrackingSettings, tracking_settings, tracking_status
from trainingjob.reconcile.actions import Plan

logger = logging.getLogger(__name__)
TIMEOUT = aiohttp.ClientTimeout(total=3)
LOOKUP_INTERVAL = 5.0  # seconds between two lookups of the same job's run
TRACKING_GRACE = 300.0  # how long after a job finished its run is still looked for
NO_RUN_YET = (None, Phase.PENDING, Phase.SUSPENDED)  # phases in which no chief has run, so there is no run to look for


@dataclass(slots=True)
class RunLookup:
    """One job's run as found so far (None: not yet), and when it was last looked for (monotonic seconds)."""

    found: dict[str, str] | None = None
    asked: float = -1e9


class MlflowRuns:
    """Looks jobs' runs up on their MLflow server; what it found of each job is kept in the job's RunLookup."""

    def __init__(self, default_uri: str | None) -> None:
        self.default_uri = default_uri

    async def link(
        self, lookup: RunLookup, job: TrainingJob, result: Plan, now: datetime.datetime
    ) -> tuple[Plan, float | None]:
        """`result` with status.tracking of a tracked job (its server, experiment and run name, and once the chief
        has created the run its ids and link), and in how many seconds to look for the run again (None: don't)."""
        settings = tracking_settings(job, self.default_uri)
        if settings is None:
            return result, None
        known = job.status.tracking or {}
        run, again = (known if known.get("runId") else None), None
        if run is None and result.status.phase not in NO_RUN_YET:
            run = await self.find(lookup, settings)
            if run is None and still_looking(result.status, now):
                again = LOOKUP_INTERVAL
        status = tracking_status(settings, run)
        if result.status.tracking != status:
            result = dataclasses.replace(result, status=result.status.replace(tracking=status))
        return result, again

    async def prefetch(self, lookup: RunLookup, job: TrainingJob) -> None:
        """Look for a running job's run now, before its reconcile may take a quota turn (operator/quota_gate.py):
        `link` inside the turn then answers from memory (or "asked too recently"), so a slow MLflow server never
        holds the turn other jobs of the namespace wait for."""
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


def still_looking(status: JobStatus, now: datetime.datetime) -> bool:
    """Look for a job's run while it runs and for TRACKING_GRACE seconds after it finished (the chief may create
    it late), then only when something else reconciles the job."""
    if not status.finished:
        return True
    finished = status.completion_time
    return finished is None or (now - finished).total_seconds() < TRACKING_GRACE
