"""trainingjob.client: submit and follow TrainingJobs from Python and notebooks (docs/notebook.md).

    from trainingjob.client import TrainingClient

    client = TrainingClient(namespace="team-a")
    name = client.train(train, func_args={"epochs": 3}, workers=2, image="registry.example/train:1")
    client.wait(name)                    # a live progress bar in a notebook
    print("\\n".join(client.logs(name)))

`AsyncTrainingClient` is the same for asyncio; `LocalBackend` runs the same function as local processes.
"""

from trainingjob.client.aio import AsyncTrainingClient, Backend
from trainingjob.client.errors import (
    AlreadyExists,
    ApiError,
    CodeTooLarge,
    Conflict,
    Forbidden,
    Invalid,
    JobFailed,
    NotFound,
    TrainingClientError,
    Unauthorized,
    Unreachable,
    UnsupportedCode,
    WaitTimeout,
)
from trainingjob.client.jobs import Job, Progress
from trainingjob.client.local import LocalBackend
from trainingjob.client.sync import TrainingClient

__all__ = [
    "AlreadyExists",
    "ApiError",
    "AsyncTrainingClient",
    "Backend",
    "CodeTooLarge",
    "Conflict",
    "Forbidden",
    "Invalid",
    "Job",
    "JobFailed",
    "LocalBackend",
    "NotFound",
    "Progress",
    "TrainingClient",
    "TrainingClientError",
    "Unauthorized",
    "Unreachable",
    "UnsupportedCode",
    "WaitTimeout",
]
