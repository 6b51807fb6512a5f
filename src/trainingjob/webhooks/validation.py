"""The validating webhook: what only a live view of the cluster can judge, with messages a user can act on.

Denied (the job could never run as written):
- spec.runtimeRef names a runtime that does not exist, is for another framework, or leaves the job without an
  image; every check below then judges the job as it would run, the runtime's template under its own fields;
- dataVolume.claimName or checkpoint.storage.claimName names a PersistentVolumeClaim that does not exist, or one
  that is Lost;
- scheduling.priorityClassName names a PriorityClass that does not exist (the API server would refuse every pod);
- a ResourceQuota of the namespace could never hold the gang (its total exceeds a hard limit), or constrains a
  compute resource the workers do not request (the API server refuses such pods).
Warned (the job is accepted and waits, or may surprise):
- the claim exists but is not bound yet, or is ReadWriteOnce while several workers mount it read-write;
- the quota has room for the gang only once other pods finish;
- serviceAccountName names a ServiceAccount that does not exist yet;
- spec.model changed while spec.image, derived from the old model, did not.
On UPDATE only what changed is judged again. Lookups that fail are skipped (the webhook fails open, as its
failurePolicy does), and what they would have caught shows up in the job's status instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.replicas import role_counts
from trainingjob.api.runtimes import RuntimeRef, RuntimeSnapshot, effective_job, recorded, runtime_problems
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.kube.phases import ClaimPhase
from trainingjob.kube.reflector import describe as describe_error
from trainingjob.scheduling.quota import container_defaults, describe, gang_shortfalls, role_demand
from trainingjob.webhooks.admission import AdmissionRequest, Verdict
from trainingjob.webhooks.defaulting import derive_image

logger = logging.getLogger(__name__)
Body = dict[str, Any]


class ClusterView(Protocol):
    """The reads the checks need; None: it does not exist."""

    async def claim(self, namespace: str, name: str) -> Body | None: ...
    async def priority_class(self, name: str) -> Body | None: ...
    async def service_account(self, namespace: str, name: str) -> Body | None: ...
    async def quotas(self, namespace: str) -> list[Body]: ...
    async def limit_ranges(self, namespace: str) -> list[Body]: ...
    async def runtime(self, kind: str, namespace: str, name: str) -> Body | None: ...


def _changed(request: AdmissionRequest, *path: str) -> bool:
    """Whether spec.<path> is new in this request (always on CREATE)."""
    if request.old_object is None:
        return True

    def at(spec: Mapping[str, Any] | None) -> Any:
        for key in path:
            spec = spec.get(key) if isinstance(spec, Mapping) else None
        return spec

    return at(request.spec) != at(request.old_spec)


async def _check_claim(view: ClusterView, verdict: Verdict, job: TrainingJob, field: str, claim: str) -> None:
    found = await view.claim(job.namespace, claim)
    if found is None:
        verdict.deny(
            f"{field}: PersistentVolumeClaim {claim} does not exist in namespace {job.namespace}; create it first "
            "(the workers would wait for it forever)"
        )
        return
    phase = (found.get("status") or {}).get("phase")
    if phase == ClaimPhase.LOST:
        verdict.deny(f"{field}: PersistentVolumeClaim {claim} is Lost (its volume is gone); use another claim")
    elif phase != ClaimPhase.BOUND:
        verdict.warn(
            f"{field}: PersistentVolumeClaim {claim} is not bound yet (phase {phase or 'unknown'}): the workers wait "
            "until it is (normal for a WaitForFirstConsumer StorageClass)"
        )
    modes = (found.get("spec") or {}).get("accessModes") or []
    read_only = job.spec.data_volume is not None and job.spec.data_volume.read_only and field.startswith("spec.data")
    if job.spec.workers > 1 and modes and set(modes) <= {"ReadWriteOnce", "ReadWriteOncePod"} and not read_only:
        verdict.warn(
            f"{field}: PersistentVolumeClaim {claim} is {'/'.join(modes)}: {job.spec.workers} workers can only "
            "all mount it when they share one node"
        )


async def _check_claims(view: ClusterView, verdict: Verdict, job: TrainingJob, request: AdmissionRequest) -> None:
    if job.spec.data_volume is not None and _changed(request, "dataVolume", "claimName"):
        await _check_claim(view, verdict, job, "spec.dataVolume.claimName", job.spec.data_volume.claim_name)
    storage = job.spec.checkpoint.storage
    if storage is not None and storage.is_volume and storage.claim_name and _changed(request, "checkpoint"):
        await _check_claim(view, verdict, job, "spec.checkpoint.storage.claimName", storage.claim_name)


async def _check_priority_class(view: ClusterView, verdict: Verdict, job: TrainingJob, request: AdmissionRequest):
    name = job.spec.scheduling.priority_class_name
    if name and _changed(request, "scheduling", "priorityClassName") and await view.priority_class(name) is None:
        verdict.deny(
            f"spec.scheduling.priorityClassName: PriorityClass {name} does not exist; the API server would refuse "
            "every worker pod (kubectl get priorityclasses lists them)"
        )


async def _check_service_account(view: ClusterView, verdict: Verdict, job: TrainingJob, request: AdmissionRequest):
    name = job.spec.service_account_name
    if name and _changed(request, "serviceAccountName") and await view.service_account(job.namespace, name) is None:
        verdict.warn(
            f"spec.serviceAccountName: ServiceAccount {name} does not exist in {job.namespace} yet; worker pods are "
            "refused until it does"
        )


async def _check_quotas(view: ClusterView, verdict: Verdict, job: TrainingJob, request: AdmissionRequest) -> None:
    if request.old_object is not None and not any(
        _changed(request, *path)
        for path in (("resources",), ("workers",), ("gpuPerWorker",), ("scheduling",), ("roles",))
    ):
        return
    # LimitRanges matter only to a quota (their defaults fill what quota counts): a namespace without quotas, the
    # common case, costs one LIST per admitted job instead of two.
    quotas = await view.quotas(job.namespace)
    if not quotas:
        return
    defaults = container_defaults(await view.limit_ranges(job.namespace))
    counts = role_counts(job.spec)
    asked = {role: role_demand(job, role) for role in counts}
    try:
        if any(demand.unparsed for demand in asked.values()):
            raise ValueError("a resource quantity does not parse")
        demands = [(asked[role].pod(defaults), count) for role, count in counts.items()]
    except (ValueError, KeyError, TypeError) as error:
        logger.info("no quota check for %s/%s: %s", job.namespace, job.name, error)
        return
    pods, unit = sum(counts.values()), "pods" if job.spec.has_roles else "workers"
    for shortfall in gang_shortfalls(quotas, demands):
        text = describe(shortfall, pods, unit)
        if shortfall.never_fits:
            verdict.deny(text)
        elif request.old_object is None:  # on UPDATE, `used` counts this job's own pods
            verdict.warn(text)


async def _runtime_of(view: ClusterView, verdict: Verdict, job: TrainingJob) -> RuntimeSnapshot | None:
    """The runtime the job starts from: recorded in its status (an update), else read now; None with a denial when
    it does not exist (the operator would fail the job)."""
    ref = RuntimeRef.from_spec(job.raw_spec)
    snapshot = recorded(job.status)
    if ref is None or snapshot is not None:
        return snapshot
    found = await view.runtime(ref.kind, job.namespace, ref.name)
    if found is None:
        kubectl = f"kubectl get {ref.kind.lower()}s" + ("" if ref.cluster_scoped else f" -n {job.namespace}")
        verdict.deny(f"spec.runtimeRef: {ref.describe(job.namespace)} does not exist ({kubectl} lists them)")
        return None
    return RuntimeSnapshot.from_body(found)


def _with_runtime(verdict: Verdict, job: TrainingJob, snapshot: RuntimeSnapshot) -> TrainingJob:
    """The job as it would run from `snapshot`; a denial when it could not."""
    effective = effective_job(job, snapshot)
    where = snapshot.ref.describe(job.namespace)
    for problem in runtime_problems(snapshot, job.spec.framework, effective.raw_spec, where):
        verdict.deny(f"spec.runtimeRef: {problem}")
    return effective


def _check_model_change(verdict: Verdict, request: AdmissionRequest, pattern: str | None) -> None:
    old = request.old_spec
    if old is None or not pattern or request.spec.get("model") == old.get("model"):
        return
    image = request.spec.get("image")
    if old.get("model") and image == derive_image(pattern, str(old["model"]), str(old.get("framework") or "")):
        verdict.warn(
            f"spec.model changed but spec.image is still {image}, derived from the old model: set spec.image to "
            "run another image"
        )


async def validate(
    request: AdmissionRequest, view: ClusterView, config: OperatorConfig, image_pattern: str | None
) -> Verdict:
    verdict = Verdict()
    body = {**request.object, "metadata": {**(request.object.get("metadata") or {}), "namespace": request.namespace}}
    body["metadata"].setdefault("name", request.name)
    job = TrainingJob.from_body(body)
    old = None if request.old_object is None else TrainingJob.from_body(request.old_object)
    try:
        snapshot = await _runtime_of(view, verdict, job)
    except (ApiException, TimeoutError, OSError) as error:
        logger.warning("a validation lookup failed, skipped: %s", describe_error(error))
        snapshot = None
    if not verdict.allowed:
        return verdict
    if snapshot is not None:
        job = _with_runtime(verdict, job, snapshot)
        old = None if old is None else effective_job(old, snapshot)
        if not verdict.allowed:
            return verdict
    internal_request = AdmissionRequest(
        request.uid,
        request.operation,
        request.namespace,
        request.name,
        {"spec": dict(job.raw_spec)},
        None if old is None else {"spec": old.raw_spec},
        request.dry_run,
    )
    checks = (
        lambda: _check_claims(view, verdict, job, internal_request),
        lambda: _check_priority_class(view, verdict, job, internal_request),
        lambda: _check_service_account(view, verdict, job, internal_request),
        lambda: _check_quotas(view, verdict, job, internal_request),
    )
    for check in checks:  # one after the other, so messages come in the same order every time
        try:
            await check()
        except (ApiException, TimeoutError, OSError) as error:
            logger.warning("a validation lookup failed, skipped: %s", describe_error(error))
    _check_model_change(verdict, request, image_pattern)
    return verdict
