"""The local cluster's S3 server (cluster/s3/settings.py), pure: every port is the cluster's own, nothing phones home
or listens beyond what s3 checkpoints need, only the generated identity gets in, and a job's Secret carries the
names boto3 reads."""

from __future__ import annotations

import json
from pathlib import Path

from trainingjob.cluster.s3 import settings
from trainingjob.cluster.s3.settings import Credentials, S3Layout

PORTS = {name: 40000 + i for i, name in enumerate(settings.PORTS)}
LAYOUT = S3Layout(Path("/clusters/a"))


def flags(command: list[str]) -> dict[str, str]:
    return dict(arg.lstrip("-").split("=", 1) for arg in command[2:])


def test_every_listener_is_on_a_port_of_this_cluster_and_the_extras_are_off() -> None:
    command = settings.command(Path("/bin/weed"), LAYOUT, "10.244.0.1", PORTS)
    assert command[:2] == ["/bin/weed", "mini"]
    given = flags(command)
    ports = {key: int(value) for key, value in given.items() if key.endswith((".port", ".port.grpc"))}
    assert sorted(ports.values()) == sorted(PORTS.values()), "each allocated port is used once, and no default port"
    assert (given["s3.port.iceberg"], given["s3.port.lance"], given["admin.port.legacy"]) == ("0", "0", "0")
    assert (given["webdav"], given["admin.ui"], given["master.telemetry"]) == ("false", "false", "false")
    assert (given["ip"], given["ip.bind"], given["dir"]) == ("10.244.0.1", "10.244.0.1", "/clusters/a/s3/data")
    assert given["s3.config"] == "/clusters/a/s3/s3.json" and given["bucket"] == "checkpoints,models"


def test_only_the_generated_identity_is_known() -> None:
    made = Credentials.generate()
    assert made != Credentials.generate() and len(made.secret_key) >= 30
    assert Credentials.from_json(made.to_json()) == made
    [identity] = settings.s3_config(made)["identities"]
    assert identity["credentials"] == [{"accessKey": made.access_key, "secretKey": made.secret_key}]
    assert "anonymous" not in json.dumps(settings.s3_config(made))


def test_a_jobs_secret_names_what_boto3_reads() -> None:
    data = settings.secret_data(Credentials("AK", "SK"), "127.0.0.1", PORTS)
    assert data == {
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{PORTS['s3']}",
        "AWS_REGION": "us-east-1",
    }
    assert settings.health_check("127.0.0.1", PORTS).url == f"http://127.0.0.1:{PORTS['s3']}/healthz"


def test_the_buckets_are_read_from_the_filers_listing_on_this_clusters_filer_port() -> None:
    """`tj cluster up --with-s3` returns once the filer lists every -bucket= bucket (it answers /healthz sooner)."""
    ports = {name: 9000 + i for i, name in enumerate(settings.PORTS)}
    assert settings.buckets_url("10.0.0.1", ports) == f"http://10.0.0.1:{ports['s3-filer']}/buckets/"
    listing = {"Path": "/buckets", "Entries": [{"FullPath": "/buckets/checkpoints"}, {"FullPath": "/buckets/models"}]}
    assert settings.bucket_names(listing) == set(settings.BUCKETS)
    assert settings.bucket_names({"Path": "/buckets", "Entries": None}) == set()
