"""The headless Service that gives every pod a stable DNS name (`<pod>.<job>-workers.<ns>.svc`).

It selects the workers (`ml.example.com/role: worker`), or every pod of the job when it has other roles (chief,
ps, evaluator, launcher). A Service's selector is not compared with the spec afterwards, so jobs keep the selector
they were created with: spec.roles cannot be added to or removed from an existing job (a CEL rule says so).
"""

from __future__ import annotations

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
            "selector": service_selector(job),
            "ports": [{"name": "dist", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
