"""`tj logs`: a worker's `trainer` log, and which pod holds it (also used by the Python client)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from trainingjob.api import constants as k
from trainingjob.api.status import Phase, job_phase
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.plumbing import connect, connection_options, run

# logs ----------------------------------------------------------------------------------------------------------------


@click.command()
@click.argument("name")
@click.option("--worker", "worker", type=click.IntRange(0), default=0, show_default=True, help="Worker index (RANK).")
@click.option("--follow", "-f", is_flag=True, help="Keep streaming until the container ends.")
@connection_options
def logs(target: Target, name: str, worker: int, follow: bool) -> None:
    """Print the log of a worker's `trainer` container.

    Pods on local process nodes have real logs; on kwok's fake nodes pods run no containers, so there are none: the
    command says the pod has no logs available and exits 1.
    """
    run(_logs(target, name, worker, follow))


async def _logs(target: Target, name: str, worker: int, follow: bool) -> int:
    async with connect(target) as kube:
        namespace = kube.namespace
        job = await kube.get_job(namespace, name)
        workers = (job.get("spec") or {}).get("workers", 1)
        if worker >= workers:
            raise CliError(f"{k.SINGULAR} {job_ref(namespace, name)} has {workers} workers (0 to {workers - 1})")
        pods = await kube.worker_pods(namespace, name, worker)
        pod = current_pod(pods)
        if pod is None:
            raise CliError(no_pod_message(job, namespace, name, worker))
        stream = sys.stdout.buffer
        async with contextlib.aclosing(kube.pod_log(namespace, pod["metadata"]["name"], follow)) as chunks:
            async for chunk in chunks:
                stream.write(chunk)
                stream.flush()
    return 0


def no_pod_message(job: dict[str, Any], namespace: str, name: str, worker: int) -> str:
    """Why worker `worker` has no log to show: gone with its pod after the job finished, or not created yet."""
    phase = job_phase(job) or Phase.PENDING
    ref = job_ref(namespace, name)
    if phase in render.FINISHED_PHASES:
        return (
            f"worker {worker} of {k.SINGULAR} {ref} is gone: its pod was deleted after the job {phase.lower()}, "
            "and its log went with it"
        )
    return f"{k.SINGULAR} {ref} has no pod for worker {worker} right now (phase {phase})"


def current_pod(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod of the newest attempt, preferring one that is not being deleted."""

    def key(pod: dict[str, Any]) -> tuple[bool, int]:
        metadata = pod.get("metadata") or {}
        attempt = (metadata.get("labels") or {}).get(k.LABEL_ATTEMPT, "0")
        return metadata.get("deletionTimestamp") is None, int(attempt) if attempt.isdigit() else 0

    return max(pods, key=key, default=None)
