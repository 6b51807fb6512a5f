"""SeaweedFS's command line, credentials file and health check, as pure functions of the cluster layout.

Why `weed mini`: it is SeaweedFS's all-in-one mode for small setups (one master, one volume server, a filer and the
S3 gateway in one process). What is switched off: WebDAV, the admin UI, the Iceberg and Lance catalogs and the
anonymous telemetry (this machine has no internet, and a test cluster reports nothing). Every port is allocated per
cluster, because several clusters run side by side on one machine.

Where it listens: the pod network's gateway when the cluster has one (pods on the local process nodes reach the host
there, as they reach the API server), else 127.0.0.1 (local nodes without root share the host's network).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from trainingjob.cluster.components import HealthCheck

NAME = "s3"
PORTS = tuple(f"s3{part}{grpc}" for part in ("", "-master", "-volume", "-filer", "-admin") for grpc in ("", "-grpc"))
IDENTITY = "trainingjob"
# Created at start: `checkpoint.storage.path: s3://checkpoints/<prefix>` works at once; more are created on demand.
BUCKETS = ("checkpoints", "models")
REGION = "us-east-1"  # SeaweedFS ignores it; clients (boto3) want one


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    @classmethod
    def generate(cls) -> Credentials:
        return cls("TJ" + secrets.token_hex(9).upper(), secrets.token_urlsafe(30))

    def to_json(self) -> str:
        return json.dumps({"accessKey": self.access_key, "secretKey": self.secret_key})

    @classmethod
    def from_json(cls, text: str) -> Credentials:
        data = json.loads(text)
        return cls(str(data["accessKey"]), str(data["secretKey"]))


@dataclass(frozen=True)
class S3Layout:
    """SeaweedFS's files inside one cluster's directory."""

    cluster_root: Path

    @property
    def root(self) -> Path:
        return self.cluster_root / "s3"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def credentials(self) -> Path:
        return self.root / "credentials.json"

    @property
    def config(self) -> Path:
        return self.root / "s3.json"

    @property
    def log(self) -> Path:
        return self.cluster_root / "logs" / "s3.log"


def s3_config(credentials: Credentials) -> dict:
    """The S3 gateway's identities (its -s3.config file): one identity with every action; no anonymous access."""
    return {
        "identities": [
            {
                "name": IDENTITY,
                "credentials": [{"accessKey": credentials.access_key, "secretKey": credentials.secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }


def endpoint(address: str, ports: dict[str, int]) -> str:
    return f"http://{address}:{ports['s3']}"


def buckets_url(address: str, ports: dict[str, int]) -> str:
    """The filer's listing of the buckets' folder (JSON with `Accept: application/json`): a bucket is a folder
    there, and the S3 gateway lists what the filer has. The filer port is bound to `address` like the others."""
    return f"http://{address}:{ports['s3-filer']}/buckets/"


def bucket_names(listing: dict) -> set[str]:
    """The bucket names in a filer listing ({"Entries": [{"FullPath": "/buckets/checkpoints", ...}, ...]})."""
    return {str(entry.get("FullPath", "")).rsplit("/", 1)[-1] for entry in listing.get("Entries") or []}


def health_check(address: str, ports: dict[str, int]) -> HealthCheck:
    return HealthCheck(f"{endpoint(address, ports)}/healthz")


def command(binary: Path, layout: S3Layout, address: str, ports: dict[str, int]) -> list[str]:
    return [
        str(binary),
        "mini",
        f"-dir={layout.data}",
        f"-ip={address}",
        f"-ip.bind={address}",
        f"-master.port={ports['s3-master']}",
        f"-master.port.grpc={ports['s3-master-grpc']}",
        "-master.telemetry=false",
        f"-volume.port={ports['s3-volume']}",
        f"-volume.port.grpc={ports['s3-volume-grpc']}",
        f"-filer.port={ports['s3-filer']}",
        f"-filer.port.grpc={ports['s3-filer-grpc']}",
        f"-s3.port={ports['s3']}",
        f"-s3.port.grpc={ports['s3-grpc']}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={layout.config}",
        f"-bucket={','.join(BUCKETS)}",
        "-webdav=false",
        "-admin.ui=false",  # the admin server still runs (mini's maintenance), on ports of this cluster
        f"-admin.port={ports['s3-admin']}",
        f"-admin.port.grpc={ports['s3-admin-grpc']}",
        "-admin.port.legacy=0",
    ]


def secret_data(credentials: Credentials, address: str, ports: dict[str, int]) -> dict[str, str]:
    """What a job's Secret holds (checkpoint.storage.secretName): boto3's and the AWS CLI's own variable names."""
    return {
        "AWS_ACCESS_KEY_ID": credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": credentials.secret_key,
        "AWS_ENDPOINT_URL": endpoint(address, ports),
        "AWS_REGION": REGION,
    }
