"""The headless Service that gives every worker a stable DNS name (`<pod>.<job>-workers.<ns>.svc`)."""

from __future__ import annotations

from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import service_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata


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
