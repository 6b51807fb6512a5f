"""The headless Service that gives every worker a stable DNS name (`<pod>.<job>-workers.<ns>.svc`)."""

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
            "selector": {k.LABEL_JOB_NAME: job.name, k.LABEL_ROLE: "worker"},
            "ports": [{"name": "dist", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
