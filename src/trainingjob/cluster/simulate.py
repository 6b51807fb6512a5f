"""A clearly simulated worker for the local cluster: it plays worker 0 of a job whose pods kwok runs.

kwok pods run no code, so on the local cluster nothing would ever report progress. This stand-in does what the
training program in worker 0 would do through `trainingjob.sdk`: it reads the job's ConfigMap for the progress CA,
gets a token bound to worker 0's pod from the TokenRequest API (what the kubelet projects into a real pod), and
reports epochs, metrics and checkpoints to the operator's real progress endpoint. At the end it marks the
worker pods to complete (kwok annotation), so the job succeeds exactly when "training" is done.

It completes the pods only once the operator accepted the final report and status.progress shows 100 %: a demo
that let the job succeed while every report was refused would claim progress that never happened.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes_asyncio import client, config

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name, worker_pod_name
from trainingjob.sdk import ProgressReporter
from trainingjob.user_agent import SIMULATED_WORKER, named

# How long the operator may take to fold the final report into status (it writes progress every few seconds).
STATUS_TIMEOUT = 30.0


class SimulationError(RuntimeError):
    """The simulated training did not get its progress recorded; the worker pods were left running."""


async def worker_credentials(api: client.ApiClient, namespace: str, job: str, directory: Path) -> dict[str, str]:
    """The env a real worker 0 would have: URL (from its pod spec), CA file and a pod-bound token file."""
    core = client.CoreV1Api(api)
    pod = await core.read_namespaced_pod(worker_pod_name(job, 0), namespace)
    env = {e.name: e.value for e in pod.spec.containers[0].env or [] if e.value is not None}
    if "TRAININGJOB_PROGRESS_URL" not in env:
        raise RuntimeError("the operator runs without a progress endpoint (tj operator --progress-port)")
    config_map = await core.read_namespaced_config_map(config_map_name(job), namespace)
    (directory / "ca.crt").write_text(config_map.data[k.PROGRESS_CA_FILE])
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=[k.PROGRESS_AUDIENCE],
            expiration_seconds=3600,
            bound_object_ref=client.V1BoundObjectReference(
                kind="Pod", api_version="v1", name=pod.metadata.name, uid=pod.metadata.uid
            ),
        )
    )
    token = await core.create_namespaced_service_account_token(
        pod.spec.service_account_name or "default", namespace, request
    )
    (directory / "token").write_text(token.status.token)
    return {
        **env,
        "TRAININGJOB_PROGRESS_CA_FILE": str(directory / "ca.crt"),
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(directory / "token"),
    }


async def finish_workers(api: client.ApiClient, namespace: str, job: str, workers: int) -> None:
    core = client.CoreV1Api(api)
    patch = {"metadata": {"annotations": {"sim.ml.example.com/complete-after": "1s"}}}
    for index in range(workers):
        await core.patch_namespaced_pod(worker_pod_name(job, index), namespace, patch)


def train(
    reporter: ProgressReporter,
    epochs: int,
    seconds_per_epoch: float,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Simulated epochs with a loss that falls and an accuracy that rises, a checkpoint after each epoch.

    True when the endpoint accepted the last epoch's report, the one that means 100 %. `report_*` only queue a
    report for the SDK's sender; `flush()` is what says whether the endpoint took it.
    """
    accepted = False
    for epoch in range(1, epochs + 1):
        sleep(seconds_per_epoch)
        loss = round(2.3 * math.exp(-0.6 * epoch), 4)
        accuracy = round(1 - 0.9 * math.exp(-0.5 * epoch), 4)
        metrics = {"loss": loss, "accuracy": accuracy}
        reporter.report_progress(epoch=epoch, total_epochs=epochs, metrics=metrics)
        reporter.report_checkpoint(f"/checkpoints/ckpt-{epoch:08d}", epoch=epoch)
        accepted = reporter.flush()
        verdict = "" if accepted else " (report NOT accepted)"
        say(f"[simulated worker 0] epoch {epoch}/{epochs} loss={loss} accuracy={accuracy}{verdict}")
    return accepted


async def full_progress_recorded(api: client.ApiClient, namespace: str, job: str) -> None:
    """Poll until status.progress.percent is 100; accepted reports reach status a few seconds later, and only
    what reached status is what `tj get`, `tj watch` and the metrics show. Run it under a timeout."""
    custom = client.CustomObjectsApi(api)
    while True:
        body = await custom.get_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, job)
        percent = ((body.get("status") or {}).get("progress") or {}).get("percent")
        if isinstance(percent, int | float) and percent >= 100:
            return
        await asyncio.sleep(0.5)


async def simulate(
    namespace: str,
    job: str,
    epochs: int,
    seconds_per_epoch: float,
    kubeconfig: str | None,
    say: Callable[[str], None] = print,
    status_timeout: float = STATUS_TIMEOUT,
) -> None:
    """Train, check the operator recorded it, then complete the workers; SimulationError if it was not recorded."""
    await config.load_kube_config(config_file=kubeconfig)
    async with named(client.ApiClient(), SIMULATED_WORKER) as api:
        with tempfile.TemporaryDirectory(prefix="tj-sim-") as directory:
            env = await worker_credentials(api, namespace, job, Path(directory))
            reporter = ProgressReporter(env=env, min_interval=0.0)
            accepted = await asyncio.to_thread(train, reporter, epochs, seconds_per_epoch, say)
            if not accepted:
                raise SimulationError(
                    f"the progress endpoint {reporter.url} did not accept the final report; worker pods left running"
                )
            try:
                async with asyncio.timeout(status_timeout):
                    await full_progress_recorded(api, namespace, job)
            except TimeoutError:
                raise SimulationError(
                    f"status.progress.percent did not reach 100 within {status_timeout:g}s; worker pods left running"
                ) from None
            workers = int(env.get("TRAININGJOB_WORLD_SIZE", "1"))
            await finish_workers(api, namespace, job, workers)
            say(f"[simulated worker 0] training done; marked {workers} worker pod(s) to complete")
