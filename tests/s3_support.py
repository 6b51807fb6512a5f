"""SeaweedFS's S3 server on the session's cluster (cluster/s3/), and an S3 client with the cluster's credentials.

The tests that keep checkpoints in S3 share one server; each test writes under a prefix of its own namespace.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ClusterUnderTest
from tests.prerequisites import component_on_cluster

S3_HINT = "SeaweedFS is not built; build it once with: tj cluster build --with-s3 (or make tools)"


@pytest.fixture(scope="session")
def s3_server(cluster: ClusterUnderTest):
    """The S3 server running on the session's cluster (started if it does not run); the cluster's ClusterState."""
    from trainingjob.cluster.build import SEAWEEDFS
    from trainingjob.cluster.s3.run import ensure_running

    return component_on_cluster(SEAWEEDFS, S3_HINT, ensure_running, "the S3 tests start SeaweedFS")


def s3_client(secret_data: dict[str, str], **overrides: str) -> Any:
    """A boto3 client as a worker makes it from its Secret's variables (the SDK's own configuration)."""
    import boto3
    from botocore.config import Config

    data = {**secret_data, **overrides}
    return boto3.client(
        "s3",
        endpoint_url=data["AWS_ENDPOINT_URL"],
        region_name=data["AWS_REGION"],
        aws_access_key_id=data["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=data["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
    )


@pytest.fixture(scope="session")
def s3_credentials(s3_server) -> dict[str, str]:
    """What `tj cluster s3-secret` puts into a namespace's Secret: the cluster's credentials and endpoint."""
    from trainingjob.cluster.s3.run import secret_data

    return secret_data(s3_server)
