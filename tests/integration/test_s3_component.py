"""SeaweedFS's S3 gateway, built from its pinned module, as a local cluster component (`tj cluster up --with-s3`).

Everything goes through the real server with boto3, as a worker does: only the cluster's generated identity gets in,
what is stored survives a restart of the server, and `tj cluster s3-secret` gives a namespace the Secret a job names.
"""

from __future__ import annotations

import base64
import os
import signal

import pytest
from botocore.exceptions import ClientError
from click.testing import CliRunner

from tests.conftest import TEST_CLUSTER_NAME
from tests.kube import Kube, wait_until
from tests.s3_support import s3_client
from trainingjob.cli import main as cli
from trainingjob.cluster import control_plane
from trainingjob.cluster import status as cluster_status
from trainingjob.cluster.build import SEAWEEDFS
from trainingjob.cluster.s3 import run
from trainingjob.cluster.s3.settings import BUCKETS

pytestmark = pytest.mark.integration


def test_cluster_status_shows_s3_healthy_at_its_pinned_version(s3_server: control_plane.ClusterState) -> None:
    rows = {row["component"]: row for row in cluster_status.status(TEST_CLUSTER_NAME)}
    assert rows["s3"]["health"] == "ok", rows["s3"]
    assert rows["s3"]["version"] == SEAWEEDFS.version
    assert rows["s3"]["process"] == "running"


def test_the_clusters_identity_writes_lists_and_reads_and_no_other_gets_in(
    s3_credentials: dict[str, str], namespace: str
) -> None:
    s3 = s3_client(s3_credentials)
    # SeaweedFS answers its health check before its -bucket= buckets are listed (CI saw an empty list once).
    wait_until(
        lambda: set(BUCKETS) <= {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]},
        30,
        f"the buckets {BUCKETS} to be listed",
    )
    key = f"{namespace}/hello.bin"
    s3.put_object(Bucket="checkpoints", Key=key, Body=b"\x00weights\xff")
    listed = s3.list_objects_v2(Bucket="checkpoints", Prefix=f"{namespace}/")
    assert [item["Key"] for item in listed["Contents"]] == [key]
    assert s3.get_object(Bucket="checkpoints", Key=key)["Body"].read() == b"\x00weights\xff"

    wrong_secret = s3_client(s3_credentials, AWS_SECRET_ACCESS_KEY="not-the-secret")
    with pytest.raises(ClientError) as refused:
        wrong_secret.get_object(Bucket="checkpoints", Key=key)
    assert refused.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "AccessDenied")
    unknown = s3_client(s3_credentials, AWS_ACCESS_KEY_ID="TJNOSUCHKEY0000000")
    with pytest.raises(ClientError) as refused:
        unknown.list_objects_v2(Bucket="checkpoints")
    assert refused.value.response["Error"]["Code"] in ("InvalidAccessKeyId", "AccessDenied")


def test_what_was_stored_survives_a_restart_of_the_server(
    s3_server: control_plane.ClusterState, s3_credentials: dict[str, str], namespace: str
) -> None:
    s3 = s3_client(s3_credentials)
    key = f"{namespace}/kept.bin"
    s3.put_object(Bucket="checkpoints", Key=key, Body=b"kept")
    old_pid = s3_server.pids["s3"]
    os.kill(old_pid, signal.SIGKILL)  # the process the session's fixture started
    wait_until(lambda: not run.is_healthy(s3_server), 30, "the killed S3 server to stop answering")
    run.ensure_running(s3_server, say=lambda _: None)
    assert s3_server.pids["s3"] != old_pid
    assert s3.get_object(Bucket="checkpoints", Key=key)["Body"].read() == b"kept"


def test_s3_secret_gives_a_namespace_the_clusters_credentials(
    s3_server: control_plane.ClusterState, s3_credentials: dict[str, str], kube: Kube, namespace: str
) -> None:
    result = CliRunner().invoke(cli, ["cluster", "s3-secret", "--name", TEST_CLUSTER_NAME, namespace])
    assert result.exit_code == 0, result.output
    secret = kube.core.read_namespaced_secret("s3-credentials", namespace)
    data = {key: base64.b64decode(value).decode() for key, value in secret.data.items()}
    assert data == s3_credentials
    assert data["AWS_ENDPOINT_URL"].startswith("http://")
