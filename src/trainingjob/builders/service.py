"""The headless Service that gives every pod a stable DNS name (`<pod>.<job>-workers.<ns>.svc`).

It has no selector: the operator lists the workers (`ml.example.com/role: worker`), or every pod of the job when it
has other roles (chief, ps, evaluator, launcher), in the Service's EndpointSlices itself (builders/endpoints.py says
why). A Service created by an earlier version of the operator keeps the selector it was created with, and
kube-controller-manager keeps its EndpointSlices; spec.roles cannot be added to or removed from an existing job (a
CEL rule says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import service_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata

ServicePorts = tuple[tuple[Any, ...], ...]


def service_ports(ports: list[dict[str, Any]] | None) -> ServicePorts:
    """The parts of spec.ports we set, comparable between our manifest and the cached Service (defaults filled)."""
    return tuple(
        (p.get("name"), p.get("port"), p.get("targetPort", p.get("port")), p.get("protocol") or "TCP")
        for p in ports or []
    )


@dataclass(frozen=True)
class ServiceView:
    """What the planner reads of the job's Service: its ports, and whether it selects pods (created by an operator
    before it published endpoints itself: kube-controller-manager then keeps its EndpointSlices)."""

    ports: ServicePorts
    selects_pods: bool = False


def service_view(body: Mapping[str, Any]) -> ServiceView:
    spec = body.get("spec") or {}
    return ServiceView(service_ports(list(spec.get("ports") or [])), bool(spec.get("selector")))


def service_selector(job: TrainingJob) -> dict[str, str]:
    if job.spec.has_roles:
        return {k.LABEL_JOB_NAME: job.name}
    return {k.LABEL_JOB_NAME: job.name, k.LABEL_ROLE: k.WORKER}


def desired_service(job: TrainingJob) -> dict[str, Any]:
    port = job.spec.master_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(job, service_name(job.name)),
        "spec": {
            "clusterIP": "None",
            # Rendezvous happens before any worker is Ready; peers must resolve each other from the start.
            "publishNotReadyAddresses": True,
            # No selector: the operator publishes the pods' addresses in EndpointSlices (builders/endpoints.py).
            "ports": [{"name": "dist", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
