"""The only Kopf glue: indexes (our informer caches) and event handlers that enqueue a job's key.

No handler decides anything: every event, whether on the job or on one of its children, just schedules one
reconcile of the owning job, which the Reconciler runs from the indexes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
from typing import Any

import kopf
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config

from trainingjob.api import constants as k
from trainingjob.api.conversion import to_internal
from trainingjob.api.names import config_map_name, service_name
from trainingjob.builders.service import service_ports
from trainingjob.operator.api_client import CountingApiClient
from trainingjob.operator.apply import Applier
from trainingjob.operator.http import build_app
from trainingjob.operator.http import serve as serve_http
from trainingjob.operator.leader import LeaderElector, LeaseSettings
from trainingjob.operator.lookups import Lookups
from trainingjob.operator.metrics import CacheCollector, OperatorMetrics
from trainingjob.operator.reconciler import Reconciler
from trainingjob.operator.serving import MODEL_INDEXES, ServingApplier, ServingReconciler, model_key
from trainingjob.progress.server import ProgressEndpoint, serve
from trainingjob.progress.tls import ensure_tls, url_ips
from trainingjob.reconcile.observed import pod_view
from trainingjob.reconcile.surroundings import claim_view
from trainingjob.scheduling.gang import GangApi, watched
from trainingjob.serving.observed import child_view
from trainingjob.webhooks import PortUnavailable, start_webhooks

OURS = {k.LABEL_MANAGED_BY: k.MANAGED_BY}
SERVICE_NAME = "trainingjob-operator"  # the operator's Service: the progress certificate is issued for its names
# The @kopf.index functions below, by name: Kopf passes each index to handlers under its function's name.
INDEX_NAMES = (
    "trainingjob_bodies",
    "worker_pods",
    "worker_services",
    "job_config_maps",
    "job_claims",
    *MODEL_INDEXES,
)
MODEL_CHILDREN = {k.LABEL_MODEL: kopf.PRESENT, k.LABEL_MANAGED_BY: k.MANAGED_BY}
IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def in_cluster() -> bool:
    return "KUBERNETES_SERVICE_HOST" in os.environ and os.path.exists(IN_CLUSTER_TOKEN)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """Kopf's own credentials: the pod's ServiceAccount in a cluster, KUBECONFIG outside."""
    if in_cluster():
        return kopf.login_with_service_account(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    # Kopf removes "its" finalizer from objects that need no Kopf deletion handler; it must never be ours.
    settings.persistence.finalizer = f"{k.GROUP}/kopf-finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=k.GROUP)
    settings.persistence.diffbase_storage = UnusedDiffBase()
    settings.posting.level = logging.INFO
    # No CRD/namespace discovery: the resources are fixed, and it would need cluster-wide list permissions.
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    if in_cluster():
        k8s_config.load_incluster_config()
    else:
        await k8s_config.load_kube_config()
    memo.metrics = OperatorMetrics()
    memo.api = CountingApiClient(
        lambda verb, resource, code: memo.metrics.api_requests.labels(verb, resource, str(code)).inc()
    )
    # Before any cache fills: objects not yet migrated to the storage version are read through the webhook.
    memo.webhooks = None
    if memo.webhook_settings is not None:
        webhook_settings = dataclasses.replace(memo.webhook_settings, in_cluster=in_cluster())
        try:
            memo.webhooks = await start_webhooks(memo.api, webhook_settings, memo.config)
        except PortUnavailable as error:
            raise kopf.PermanentError(str(error)) from None  # stop at once: a retry would meet the same port
    indexes = {name: kwargs[name] for name in INDEX_NAMES}
    indexes.update({provider.index: kwargs[provider.index] for provider in watched(memo.gang_apis)})
    material = None
    if memo.progress_port:
        material = await ensure_tls(memo.api, memo.operator_namespace, SERVICE_NAME, url_ips(memo.config.progress_url))
        memo.config = dataclasses.replace(memo.config, progress_ca_pem=material.ca_pem)
    applier = Applier(memo.api, memo.config.max_concurrent_creates)
    memo.reconciler = Reconciler(
        indexes,
        applier,
        memo.config,
        metrics=memo.metrics,
        lookups=Lookups(client.CoreV1Api(memo.api)),
        gang_apis=memo.gang_apis,
        serving=ServingReconciler(indexes, ServingApplier(memo.api, applier.write_slots), memo.config.serving),
    )
    memo.metrics.register_cache(cache_collector(indexes, memo.reconciler))
    memo.http_runner = None
    if memo.metrics_port:
        live = functools.partial(liveness, memo.reconciler, memo.config.stuck_reconcile_seconds)
        app = build_app(memo.metrics, live, lambda: readiness(memo.reconciler))
        memo.http_runner = await serve_http(app, memo.metrics_bind, memo.metrics_port)
    memo.progress_runner = None
    if material is not None:
        endpoint = ProgressEndpoint(memo.api, memo.reconciler, memo.config.progress_reporters)
        memo.progress_runner = await serve(endpoint, material, memo.progress_bind, memo.progress_port)
    memo.elector = None
    if memo.config.lease_namespace is None:
        memo.reconciler.start()
        return
    settings = LeaseSettings(memo.config.lease_namespace, memo.config.lease_name, identity=memo.config.lease_identity)
    memo.elector = LeaderElector(client.CoordinationV1Api(memo.api), settings)
    memo.election = asyncio.create_task(memo.elector.run(memo.reconciler.start_leading, stop_on_lost_lease))


class UnusedDiffBase(kopf.DiffBaseStorage):
    """Kopf's "last handled" essence of each object, which only on.create/update/resume handlers use; we have none.

    Kopf still builds it on every watch event, from a deep copy of the whole object, status included: 15 % of the
    operator's CPU with thousands of pods. Nothing reads it, so nothing is built or stored.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def cache_collector(indexes: dict, reconciler: Reconciler) -> CacheCollector:
    def jobs() -> list:
        return [body for store in list(indexes["trainingjob_bodies"].values()) for body in store]

    def pod_phases() -> list[tuple[str, str, str]]:
        return [(key[0], key[1], pod.phase) for key, store in list(indexes["worker_pods"].items()) for pod in store]

    return CacheCollector(jobs, pod_phases, lambda: reconciler.leading, lambda: len(reconciler.queue))


def liveness(reconciler: Reconciler, stuck_after: float) -> tuple[bool, str]:
    """Alive while the event loop answers and, on the leader, every reconcile worker is still running and none
    has spent more than `stuck_after` seconds in one reconcile. Every API call has a timeout (api_client.py), so
    a reconcile that long is wedged; failing the probe lets the kubelet restart the leader instead of it holding
    the Lease while its jobs wait silently."""
    dead = [t for t in reconciler.tasks if t.done()]
    if dead:
        return False, f"{len(dead)} reconcile workers died"
    longest = reconciler.longest_reconcile()
    if longest is not None and longest[1] > stuck_after:
        key, seconds = longest  # (namespace, name) of a job, (kind, namespace, name) of a model
        what = "/".join(key)
        return False, f"the reconcile of {what} has run for {seconds:.0f}s (bound {stuck_after:.0f}s)"
    return True, "ok"


def readiness(reconciler: Reconciler) -> tuple[bool, str]:
    """/readyz: 200 on the leader only, for whoever must find the replica that writes status (demo.sh, tests).

    The Deployment's readiness probe deliberately uses /healthz instead (deploy/manager/deployment.yaml): both
    replicas stay Ready so the PodDisruptionBudget can drain either node, and the Service sends progress reports to
    both; a standby answers them 503 and the SDK retries.
    """
    return (True, "ok: leader") if reconciler.leading else (False, "standby: not the leader")


def stop_on_lost_lease() -> None:
    """A replica that lost its Lease may be racing the new leader: stop now, the Deployment restarts us."""
    logging.getLogger(__name__).critical("leadership lost; exiting so that only the new leader writes")
    os._exit(70)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    await memo.reconciler.stop()
    if memo.webhooks is not None:
        await memo.webhooks.stop()
    for runner in (memo.progress_runner, memo.http_runner):
        if runner is not None:
            await runner.cleanup()
    if memo.elector is not None:
        memo.election.cancel()
        await memo.elector.release()
    await memo.api.close()


@kopf.index(k.GROUP, k.WATCHED_VERSION, k.PLURAL)
async def trainingjob_bodies(namespace: str, name: str, body: kopf.Body, **_: Any) -> dict:
    """Stored in the internal shape (api/conversion.py): nothing downstream cares which version was watched."""
    return {(namespace, name): to_internal(dict(body))}


@kopf.index("", "v1", "pods", labels=OURS)
async def worker_pods(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict | None:
    job = labels.get(k.LABEL_JOB_NAME)
    return {(namespace, job): pod_view(body)} if job else None


@kopf.index("", "v1", "services", labels=OURS)
async def worker_services(namespace: str, name: str, labels: kopf.Labels, spec: kopf.Spec, **_: Any) -> dict | None:
    """Its ports, not just its name: the planner compares them with spec.networking.masterPort."""
    job = labels.get(k.LABEL_JOB_NAME)
    if not job or name != service_name(job):
        return None
    return {(namespace, job): service_ports(list(spec.get("ports") or []))}


@kopf.index("", "v1", "configmaps", labels=OURS)
async def job_config_maps(namespace: str, name: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict | None:
    job = labels.get(k.LABEL_JOB_NAME)
    return {(namespace, job): dict(body.get("data") or {})} if job and name == config_map_name(job) else None


@kopf.index("", "v1", "persistentvolumeclaims", labels=OURS)
async def job_claims(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict | None:
    """Name, phase and creation time: a checkpoint PVC still Pending after a while is reported on the job."""
    job = labels.get(k.LABEL_JOB_NAME)
    return {(namespace, job): claim_view(body)} if job else None


@kopf.on.event(k.GROUP, k.WATCHED_VERSION, k.PLURAL)
async def trainingjob_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.reconciler.caches_synced()
    memo.reconciler.enqueue((namespace, name))
    for key in memo.reconciler.serving.models_of_job(namespace, name):
        memo.reconciler.enqueue(key)  # a model may be waiting for this job to succeed


@kopf.index(k.MODEL_GROUP, k.MODEL_VERSION, k.MODEL_PLURAL)
async def llmmodel_bodies(namespace: str, name: str, body: kopf.Body, **_: Any) -> dict:
    return {(namespace, name): dict(body)}


@kopf.index(k.MODEL_GROUP, k.MODEL_VERSION, k.MODEL_PLURAL)
async def models_by_source(namespace: str, name: str, spec: kopf.Spec, **_: Any) -> dict | None:
    """Which models serve which TrainingJob, so that the job's events reach the models waiting for it."""
    job = (spec.get("source") or {}).get("trainingJob")
    return {(namespace, job): name} if job else None


@kopf.index("apps", "v1", "deployments", labels=MODEL_CHILDREN)
async def model_deployments(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict:
    return {(namespace, labels[k.LABEL_MODEL]): child_view({**body, "kind": "Deployment"})}


@kopf.index("", "v1", "services", labels=MODEL_CHILDREN)
async def model_services(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict:
    return {(namespace, labels[k.LABEL_MODEL]): child_view({**body, "kind": "Service"})}


@kopf.index("autoscaling", "v2", "horizontalpodautoscalers", labels=MODEL_CHILDREN)
async def model_autoscalers(namespace: str, labels: kopf.Labels, body: kopf.Body, **_: Any) -> dict:
    return {(namespace, labels[k.LABEL_MODEL]): child_view({**body, "kind": "HorizontalPodAutoscaler"})}


@kopf.on.event(k.MODEL_GROUP, k.MODEL_VERSION, k.MODEL_PLURAL)
async def llmmodel_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.reconciler.caches_synced()
    memo.reconciler.enqueue(model_key(namespace, name))


@kopf.on.event("apps", "v1", "deployments", labels=MODEL_CHILDREN)
@kopf.on.event("", "v1", "services", labels=MODEL_CHILDREN, id="model_service_changed")
@kopf.on.event("autoscaling", "v2", "horizontalpodautoscalers", labels=MODEL_CHILDREN)
async def model_child_changed(namespace: str, labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    memo.reconciler.caches_synced()
    memo.reconciler.enqueue(model_key(namespace, labels[k.LABEL_MODEL]))


@kopf.on.event("", "v1", "pods", labels=OURS)
@kopf.on.event("", "v1", "services", labels=OURS)
@kopf.on.event("", "v1", "configmaps", labels=OURS)
@kopf.on.event("", "v1", "persistentvolumeclaims", labels=OURS)
async def child_changed(namespace: str, labels: kopf.Labels, memo: kopf.Memo, **_: Any) -> None:
    memo.reconciler.caches_synced()
    job = labels.get(k.LABEL_JOB_NAME)
    if job:
        memo.reconciler.enqueue((namespace, job))


def watch_gang_objects(served: frozenset[GangApi]) -> None:
    """Cache and watch the gang objects of every gang API the cluster serves (found by discovery before Kopf
    starts), with the label selector of the other children; each provider's objects get an index of their own."""
    for provider in watched(served):
        api = provider.api
        trim = provider.view

        async def gang_objects(
            namespace: str, labels: kopf.Labels, body: kopf.Body, trim=trim, **_: Any
        ) -> dict | None:
            job = labels.get(k.LABEL_JOB_NAME)
            return {(namespace, job): trim(body)} if job else None

        kopf.index(api.group, api.version, api.plural, labels=OURS, id=provider.index)(gang_objects)
        kopf.on.event(api.group, api.version, api.plural, labels=OURS, id=f"{provider.index}_changed")(child_changed)
