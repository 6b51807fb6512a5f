"""`<job>-mpi-key`: the key the MPI launcher's remote-start agent and the workers' agents share (frameworks/mpi.py).

A fresh random key per job. The planner asks for this Secret whenever it creates pods of an MPI job with a launcher;
the first create wins and AlreadyExists keeps that key, so the operator never needs to read (or watch) Secrets.
It is owned by the job: garbage collection removes it with the job.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

from trainingjob.api.names import mpi_key_secret_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata
from trainingjob.frameworks.mpi import KEY_FILE

KEY_BYTES = 32


def desired_mpi_key_secret(job: TrainingJob, key: bytes | None = None) -> dict[str, Any]:
    """The Secret with `key` (hex, as the agent reads it), a new random one unless given."""
    material = (key if key is not None else secrets.token_bytes(KEY_BYTES)).hex().encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(job, mpi_key_secret_name(job.name)),
        "type": "Opaque",
        "data": {KEY_FILE: base64.b64encode(material).decode()},
    }
