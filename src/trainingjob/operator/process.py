"""The operator process: start the informers, the reconciler and the servers, lead or stand by, stop cleanly.

Order matters: webhooks first (objects not yet migrated to the storage version are read through the conversion
webhook), then the informers; the reconcile workers wait for every informer's first listing (the one "caches synced"
barrier: a leader planning from a half-filled cache once gang-restarted 860 of 1,000 running jobs), and only the
Lease holder runs them. SIGTERM or SIGINT releases the Lease and exits 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import signal
from collections.abc import Callable
from urllib.parse import urlparse

from aiohttp import web
from kubernetes_asyncio import client

from trainingjob.config import OperatorConfig, OperatorSettings
from trainingjob.operator.api_client import CountingApiClient
from trainingjob.operator.gpu_telemetry import start_telemetry
from trainingjob.operator.http import build_app
from trainingjob.operator.http import serve as serve_http
from trainingjob.operator.kueue.reconciler import WorkloadReconciler
from trainingjob.operator.kueue.watches import REGISTRATION as KUEUE_REGISTRATION
from trainingjob.operator.kueue.watches import WORKLOADS
from trainingjob.operator.llmmodel.apply import ServingApplier
from trainingjob.operator.llmmodel.reconciler import ServingReconciler
from trainingjob.operator.llmmodel.watches import REGISTRATION as MODELS
from trainingjob.operator.lookups import Lookups
from trainingjob.operator.metrics import CacheCollector, OperatorMetrics
from trainingjob.operator.runtime.informers import Caches
from trainingjob.operator.runtime.leader import LeaderElector, LeaseSettings
from trainingjob.operator.runtime.loop_lag import watch_loop_lag
from trainingjob.operator.runtime.manager import Manager, all_watches
from trainingjob.operator.runtime.writer import Writer
from trainingjob.operator.trainingjob.apply import Applier
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.operator.trainingjob.watches import TRAININGJOB_BODIES, WORKER_PODS, registration
from trainingjob.operator.trainingsweep.apply import SweepApplier
from trainingjob.operator.trainingsweep.engine import load_engine
from trainingjob.operator.trainingsweep.reconciler import SweepReconciler
from trainingjob.operator.trainingsweep.watches import REGISTRATION as SWEEPS
from trainingjob.progress.server import ProgressEndpoint, serve
from trainingjob.progress.tls import ensure_tls, url_ips
from trainingjob.scheduling.gang import GangApi, watched
from trainingjob.user_agent import OPERATOR, named
from trainingjob.webhooks import PortUnavailable, start_webhooks
from trainingjob.webhooks.component import WebhookSettings

logger = logging.getLogger(__name__)
SERVICE_NAME = "trainingjob-operator"  # the operator's Service: the progress certificate is issued for its names
WATCH_TIMEOUT_MAX = 240
WRITER_SPARE_CONNECTIONS = 8
# The Lease's own connection: a renewal is one small request every 2 s, never in flight twice.
LEASE_CONNECTIONS = 1


@dataclasses.dataclass(frozen=True)
class ProcessOptions:
    """What `tj operator` was told (`settings`) and what it found out before it started: whether it runs in a
    cluster, the gang APIs the cluster serves, its webhooks' settings."""

    settings: OperatorSettings
    in_cluster: bool = False
    gang_apis: frozenset[GangApi] = frozenset()
    webhooks: WebhookSettings | None = None

    @property
    def config(self) -> OperatorConfig:
        return self.settings.config


class Startup(Exception):
    """The operator cannot start (a port in use, …): one line for the user, exit 1."""


def watch_timeout(stuck_after: float) -> int:
    """Watches end (and resume) well within the liveness bound, so a healthy one is never "silent" for that long.
    Never more than half the bound: a floor of 5 s made a quiet, healthy operator fail /healthz for part of every
    5 s under `--reconcile-stuck-after` below 5 (its watches were silent for up to 5 s)."""
    return max(1, min(WATCH_TIMEOUT_MAX, int(stuck_after / 2)))


def writer_connections(config: OperatorConfig) -> int:
    """Connections of the writers' client: one per create slot, two per TrainingJob reconcile worker (its job or
    status write and its Events) and a few for lookups and the LLMModel controller's few workers (the Lease has a
    client of its own). The client's default (100) let a creation burst open connections whose buffers the peak RSS
    kept: at 1000 x 8 the peak went from 152-154 to 144-146 MiB with this cap, pods created as fast
    (bench/findings.md). Capped at one per reconcile worker, the pods were created 7-26 % slower."""
    return config.max_concurrent_creates + 2 * config.max_concurrent_reconciles + WRITER_SPARE_CONNECTIONS


@dataclasses.dataclass(frozen=True)
class Clients:
    """The operator's three API clients, each with its own connection pool.

    `api` (the writers: creates, status, Events, lookups) is capped (see writer_connections); `watch_api` holds the
    informers' long-lived watches, unbounded; `lease` renews the leader's Lease. A renewal queued behind a creation
    burst in the writers' pool could miss the renew deadline and stop a healthy leader (a leader lost its Lease
    once in a 1000 x 8 bench run, cause not traced), so it never waits for a writer's connection.
    """

    api: CountingApiClient
    watch_api: CountingApiClient
    lease: CountingApiClient


def open_clients(config: OperatorConfig, count: Callable[[str, str, int], None]) -> Clients:
    """The clients, configured from the loaded kubeconfig or in-cluster credentials (the default Configuration)."""

    def pooled(connections: int) -> CountingApiClient:
        configuration = client.Configuration.get_default_copy()
        configuration.connection_pool_maxsize = connections  # aiohttp: 0 is no limit
        return named(CountingApiClient(count, configuration=configuration), OPERATOR)

    return Clients(api=pooled(writer_connections(config)), watch_api=pooled(0), lease=pooled(LEASE_CONNECTIONS))


async def run(options: ProcessOptions) -> None:
    """Until SIGTERM/SIGINT (return) or a lost Lease (exit 70)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    config = options.config
    metrics = OperatorMetrics()
    clients = open_clients(config, functools.partial(_count, metrics))
    cleanup: list = [clients.api.close, clients.watch_api.close, clients.lease.close]  # each closed whatever fails
    try:
        await _serve(options, config, metrics, clients, cleanup, stop)
    finally:
        for step in reversed(cleanup):
            try:
                await step()
            except Exception as error:  # the other steps must still run
                logger.warning("while stopping: %r", error)


async def _serve(
    options: ProcessOptions,
    config: OperatorConfig,
    metrics: OperatorMetrics,
    clients: Clients,
    cleanup: list,
    stop: asyncio.Event,
) -> None:
    api, watch_api, given = clients.api, clients.watch_api, options.settings
    if options.webhooks is not None:
        webhook_settings = dataclasses.replace(options.webhooks, in_cluster=options.in_cluster)
        try:
            webhooks = await start_webhooks(api, webhook_settings, config, metrics, watch_api)
        except PortUnavailable as error:
            raise Startup(str(error)) from None
        cleanup.append(webhooks.stop)
        config = dataclasses.replace(
            config, admission_key=webhooks.admission_key, admission_since=webhooks.admission_since
        )
    material = None
    if given.progress_port:
        material = await ensure_tls(api, given.operator_namespace, SERVICE_NAME, url_ips(config.progress_url))
        config = dataclasses.replace(config, progress_ca_pem=material.ca_pem)
    # Kueue's objects are always watched: without Kueue their informers find nothing and wait on a watch of Kueue's
    # CRDs, so Kueue installed later is used without a restart (and queued jobs say Kueue is missing meanwhile).
    job_registration = registration(watched(options.gang_apis), kueue=True)
    registrations = (job_registration, MODELS, SWEEPS, KUEUE_REGISTRATION)
    caches = Caches(
        watch_api,
        all_watches(registrations),
        given.namespaces,
        watch_timeout(config.stuck_reconcile_seconds),
    )
    writer = Writer(api, config.max_concurrent_creates)
    kueue_served = functools.partial(caches.serves, WORKLOADS)
    jobs = Reconciler(
        caches.indexes,
        Applier(writer, metrics.count_status_patch),
        config,
        metrics=metrics,
        lookups=Lookups(client.CoreV1Api(api)),
        gang_apis=options.gang_apis,
        registered=job_registration,
        kueue_served=kueue_served,
    )
    models = ServingReconciler(
        caches.indexes, ServingApplier(writer), config.serving, resync_seconds=config.resync_seconds, metrics=metrics
    )
    sweeps = SweepReconciler(
        caches.indexes,
        SweepApplier(writer, config.admission_key),
        load_engine,
        resync_seconds=config.resync_seconds,
        metrics=metrics,
        admission_key=config.admission_key,
    )
    workloads = WorkloadReconciler(
        caches.indexes, writer, config, resync_seconds=config.resync_seconds, kueue_served=kueue_served
    )
    manager = Manager(caches, [jobs.controller, models.controller, sweeps.controller, workloads.controller])
    metrics.register_cache(cache_collector(manager))
    caches.start()
    cleanup.append(caches.stop)
    if (telemetry := start_telemetry(config, watch_api, caches.indexes, jobs.queue.add)) is not None:
        jobs.gpu_telemetry, tasks = telemetry
        metrics.register_cache(jobs.gpu_telemetry.collector())
        cleanup += [functools.partial(_cancel, task) for task in tasks]
    leadership_steps = len(cleanup)  # where the Lease's steps go: the cleanup runs them after the manager stopped
    cleanup.append(manager.stop)
    barrier = asyncio.create_task(manager.open_barrier(), name="caches-synced")
    cleanup.append(functools.partial(_cancel, barrier))
    lag = asyncio.create_task(watch_loop_lag(metrics.event_loop_lag.observe), name="event-loop-lag")
    cleanup.append(functools.partial(_cancel, lag))
    if given.metrics_port:
        live = functools.partial(liveness, manager, config.stuck_reconcile_seconds)
        app = build_app(metrics, live, lambda: readiness(manager))
        cleanup.append((await serve_http(app, given.metrics_bind, given.metrics_port)).cleanup)
    if material is not None:
        endpoint = ProgressEndpoint(api, jobs, config.progress_reporters)
        cleanup.append((await serve(endpoint, material, given.progress_bind, given.progress_port)).cleanup)
    if given.liveness_endpoint:
        cleanup.append((await serve_liveness(given.liveness_endpoint)).cleanup)
    if config.lease_namespace is None:
        manager.start()
    else:
        settings = LeaseSettings(config.lease_namespace, config.lease_name, identity=config.lease_identity)
        elector = LeaderElector(
            client.CoordinationV1Api(clients.lease), settings, on_deadline_missed=stop_on_lost_lease
        )
        election = asyncio.create_task(elector.run(manager.start_leading, stop_on_lost_lease), name="election")
        # In reverse, as the cleanup runs: the reconcilers stop, then the renewals, then the Lease is released. A
        # Lease released first let a standby lead while the reconcilers still wrote (test_leader_election.py).
        cleanup[leadership_steps:leadership_steps] = [elector.release, functools.partial(_cancel, election)]
    logger.info("operator started; watching %s", ", ".join(given.namespaces) or "all namespaces")
    await stop.wait()
    logger.info("stopping")


async def _cancel(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _count(metrics: OperatorMetrics, verb: str, resource: str, code: int) -> None:
    metrics.api_requests.labels(verb, resource, str(code)).inc()


async def serve_liveness(url: str) -> web.AppRunner:
    """`--liveness URL`: 200 while the event loop answers (the Deployment's readiness probe; the same URL and
    answer Kopf's probe endpoint gave, so existing manifests keep working)."""
    parsed = urlparse(url)

    async def probe(_: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_get(parsed.path or "/", probe)
    return await serve_http(app, parsed.hostname or "0.0.0.0", parsed.port or 80)


def cache_collector(manager: Manager) -> CacheCollector:
    indexes = manager.caches.indexes

    def jobs() -> list:
        return [body for store in list(indexes[TRAININGJOB_BODIES].values()) for body in store]

    def pod_phases() -> list[tuple[str, str, str]]:
        return [(key[0], key[1], pod.phase) for key, store in list(indexes[WORKER_PODS].items()) for pod in store]

    return CacheCollector(jobs, pod_phases, lambda: manager.leading, manager.queue_depth)


def liveness(manager: Manager, stuck_after: float) -> tuple[bool, str]:
    """Alive while the event loop answers, every informer hears from the API server within `stuck_after` seconds
    and, on the leader, every reconcile worker is still running and none has spent more than `stuck_after` seconds
    in one reconcile. Every API call has a timeout (api_client.py), so a reconcile that long is wedged; failing the
    probe lets the kubelet restart the leader instead of it holding the Lease while its jobs wait silently."""
    dead = [t for t in manager.tasks if t.done()]
    if dead:
        return False, f"{len(dead)} reconcile workers died"
    longest = manager.longest_reconcile()
    if longest is not None and longest[2] > stuck_after:
        kind, key, seconds = longest
        what = "/".join(key) if isinstance(key, tuple) else str(key)
        return False, f"the reconcile of {kind} {what} has run for {seconds:.0f}s (bound {stuck_after:.0f}s)"
    stalled = manager.caches.stalled(stuck_after)
    if stalled:
        return False, f"watches without progress (bound {stuck_after:.0f}s): {'; '.join(stalled[:5])}"
    return True, "ok"


def readiness(manager: Manager) -> tuple[bool, str]:
    """/readyz: 200 on the leader only, for whoever must find the replica that writes status (demo.sh, tests).

    The Deployment's readiness probe deliberately uses the --liveness endpoint instead (deploy/manager/): both
    replicas stay Ready so the PodDisruptionBudget can drain either node, and the Service sends progress reports to
    both; a standby answers them 503 and the SDK retries.
    """
    return (True, "ok: leader") if manager.leading else (False, "standby: not the leader")


def stop_on_lost_lease() -> None:
    """A replica that lost its Lease may be racing the new leader: stop now, the Deployment restarts us."""
    logging.getLogger(__name__).critical("leadership lost; exiting so that only the new leader writes")
    os._exit(70)
