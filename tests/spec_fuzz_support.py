"""What both spec fuzzing tests share (tests/integration/test_spec_fuzzing.py draws creates,
test_spec_update_fuzzing.py updates of accepted jobs): the world drawn specs may name, how a refusal must read, and
when a job counts as reconciled."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from kubernetes.client.exceptions import ApiException

from tests.integration.api_support import ensure_priority_class, existing_claims
from tests.jobs import event_reasons, get_job
from tests.kube import Kube, wait_until
from tests.spec_rules import World
from tests.spec_strategies import spec_schema
from trainingjob.api import constants as k
from trainingjob.api.status import Phase as JobPhase

PHASES = {phase.value for phase in JobPhase}
GONE = {"gone": True}  # what reconciled() returns for a job deleted before it was seen reconciled


def refusal_names_the_field(error: ApiException) -> str | None:
    """None when the refusal is one a user can act on; else what is wrong with it."""
    if error.status >= 500:
        return f"HTTP {error.status} (a server or webhook failure, not a refusal): {error.body}"
    if error.status not in (400, 403, 422):
        return f"HTTP {error.status}: {error.body}"
    message = json.loads(error.body or "{}").get("message", "")
    if "spec" not in message and "author" not in message:  # 403 from admission names the author's missing right
        return f"HTTP {error.status} without a field: {message}"
    return None


def reconciled(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """The job once the operator wrote a status for its current generation; GONE once it is gone (a job that finished
    at once, e.g. past a 1 s startupTimeoutSeconds, with ttlSecondsAfterFinished 0 is deleted before it is seen)."""
    job = get_job(kube, namespace, name)
    if job is None:
        return GONE
    status = job.get("status") or {}
    generation = (job.get("metadata") or {}).get("generation")
    return job if status.get("phase") and status.get("observedGeneration") == generation else None


@pytest.fixture
def world(kube: Kube, namespace: str) -> Iterator[World]:
    """What drawn specs may name: a ClusterTrainingRuntime and a TrainingRuntime per framework (each with an image
    and a command, so a job naming one needs neither), a PersistentVolumeClaim (unbound: the webhook only warns)
    and a PriorityClass."""
    tag = uuid.uuid4().hex[:6]
    frameworks = spec_schema("v1")["properties"]["framework"]["enum"]
    runtimes = {framework: {kind: f"fz-{tag}-{framework}" for kind in k.RUNTIME_KINDS} for framework in frameworks}
    template = {"image": "registry.example/train:1", "command": ["python", "train.py"]}
    for framework, by_kind in runtimes.items():
        for kind, name in by_kind.items():
            body = {"apiVersion": k.RUNTIME_API_VERSION, "kind": kind, "metadata": {"name": name}}
            body["spec"] = {"framework": framework, "template": template}
            if kind == k.CLUSTER_RUNTIME_KIND:
                kube.custom.create_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, body)
            else:
                kube.custom.create_namespaced_custom_object(
                    k.GROUP, k.RUNTIME_VERSION, namespace, k.NAMESPACED_RUNTIME_PLURAL, body
                )
    claim, priority = f"fz-{tag}-data", "fz-priority"  # the PriorityClass is left for the next run
    existing_claims(kube, namespace, claim)
    ensure_priority_class(kube, priority)
    yield World(runtimes=runtimes, claims=(claim,), priority_classes=(priority,))
    for by_kind in runtimes.values():
        name = by_kind[k.CLUSTER_RUNTIME_KIND]
        kube.custom.delete_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, name)


def all_deleted(kube: Kube, namespace: str, jobs: list[tuple[str, str, str]]) -> None:
    """Every job of (version, name, how drawn) deleted at once, and each gone: no finalizer stuck (this operator's
    is removed; a job managed elsewhere never had one). A finished job whose TTL passed is gone already."""
    for version, name, _ in jobs:
        try:
            kube.custom.delete_namespaced_custom_object(k.GROUP, version, namespace, k.PLURAL, name)
        except ApiException as error:
            if error.status != 404:
                raise
    for _, name, shown in jobs:
        wait_until(lambda n=name: get_job(kube, namespace, n) is None, 120, f"to be gone (finalizer cleared): {shown}")


def fuzz_settings(examples: int) -> settings:
    """Hypothesis' settings for drawing against a real cluster: no shrinking (each example costs seconds of it),
    no example database, no deadline or health check."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )


def judged_outcome(kube: Kube, namespace: str, name: str, job: dict[str, Any], shown: str) -> tuple[str, set[str]]:
    """A reconciled job's phase, which must be a known one, and its true conditions' reasons; a job Failed as
    InvalidSpec must have its Event."""
    status = job["status"]
    assert status["phase"] in PHASES, f"phase {status['phase']} for {shown}"
    reasons = {c.get("reason") for c in status.get("conditions") or [] if c.get("status") == "True"}
    if status["phase"] == "Failed" and "InvalidSpec" in reasons:
        wait_until(lambda: "InvalidSpec" in event_reasons(kube, namespace, name), 60, f"an Event for {shown}")
    return status["phase"], reasons
