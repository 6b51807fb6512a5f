"""`<job>-config`: hyperparameters.json for every worker, plus framework files (the MPI hostfile)."""

from __future__ import annotations

import json
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata
from trainingjob.builders.env import worker_context
from trainingjob.config import OperatorConfig
from trainingjob.frameworks.registry import framework_for


def desired_config_data(job: TrainingJob, config: OperatorConfig | None = None) -> dict[str, str]:
    data = {k.HYPERPARAMETERS_FILE: json.dumps(job.spec.hyperparameters, sort_keys=True, indent=2) + "\n"}
    data.update(framework_for(job.spec.framework).config_files(worker_context(job, 0)))
    if config is not None and config.progress_url and config.progress_ca_pem:
        data[k.PROGRESS_CA_FILE] = config.progress_ca_pem  # workers trust the progress endpoint through this
    return data


def desired_config_map(job: TrainingJob, config: OperatorConfig | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": child_metadata(job, config_map_name(job.name)),
        "data": desired_config_data(job, config),
    }
