"""Checkpoints in an S3 bucket (checkpoint.storage type s3): list, upload, download and delete them.

Why here and why boto3 only on demand: the SDK runs in arbitrary training images and its core is standard-library
only; an image whose jobs keep checkpoints in S3 installs boto3 (the examples' requirements.txt pin it), and the
first S3 call imports it. Without it, the error says what to install instead of failing at import time.

Layout under CHECKPOINT_URI (``s3://<bucket>/<prefix>/<job uid>``), by the same names as on a volume
(checkpoint.py): a checkpoint written as a file is one object ``<name>``; one written as a directory is one object per
file under ``<name>/``, and a marker object ``<name>/.complete`` written last. What counts as a checkpoint is what
is complete: a single PUT (and a multipart upload, on completion) appears whole or not at all, and a directory only
once its marker is there — so a worker killed mid-upload never leaves something a resume would load. Deleting
removes the marker first, for the same reason.

Credentials and the endpoint come from the environment as boto3 reads them (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION): the job's checkpoint.storage.secretName puts them there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

SCHEME = "s3://"
MARKER = ".complete"
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


class S3Location(NamedTuple):
    bucket: str
    prefix: str  # without leading or trailing slashes; "" for the bucket's root

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        if not uri.startswith(SCHEME):
            raise ValueError(f"not an s3:// URI: {uri!r}")
        bucket, _, prefix = uri[len(SCHEME) :].partition("/")
        if not bucket:
            raise ValueError(f"no bucket in {uri!r}")
        return cls(bucket, prefix.strip("/"))

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def uri(self, name: str = "") -> str:
        key = self.key(name) if name else self.prefix
        return f"{SCHEME}{self.bucket}/{key}" if key else f"{SCHEME}{self.bucket}"


def is_s3(location: str | os.PathLike[str] | None) -> bool:
    return isinstance(location, str) and location.startswith(SCHEME)


_uploaded: dict[Path, str] = {}  # the checkpoint uploaded last: its local path and its URI


def note_upload(local: Path, uri: str) -> None:
    _uploaded.clear()
    _uploaded[local] = uri


def location(path: str | os.PathLike[str]) -> str | Path:
    """Where the checkpoint at `path` lives for the operator and a resume: the URI it was last uploaded to, else the
    path. Why: with checkpoints in S3, CHECKPOINT_DIR is scratch a new pod does not have, and a stop (sdk.on_stop)
    that reported the local path would record in status.lastStop a checkpoint nobody can find."""
    if is_s3(path):
        return str(path)
    return _uploaded.get(Path(path), Path(path))


def client() -> Any:
    """A boto3 S3 client configured from the environment. Path-style addressing when an endpoint is given (an
    S3-compatible server on an address, not a DNS name per bucket); checksums only where the API requires them,
    which every S3-compatible server accepts."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as error:
        raise ImportError(
            "checkpoints in S3 (checkpoint.storage type s3) need boto3 in the image: pip install boto3"
        ) from error
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "").strip() or None
    config = Config(
        s3={"addressing_style": "path" if endpoint else "auto"},
        retries={"max_attempts": 5, "mode": "standard"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.client("s3", endpoint_url=endpoint, config=config)


def _keys(s3: Any, location: S3Location) -> Iterator[str]:
    """Every key under the location's prefix, relative to it."""
    start = location.key("")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=start):
        for item in page.get("Contents", []):
            yield item["Key"][len(start) :]


def complete_names(s3: Any, location: S3Location) -> dict[str, bool]:
    """The complete entries directly under the location: name -> whether it is a directory."""
    files: set[str] = set()
    directories: set[str] = set()
    for relative in _keys(s3, location):
        head, slash, rest = relative.partition("/")
        if not slash:
            files.add(head)
        elif rest == MARKER:
            directories.add(head)
    return {**dict.fromkeys(files, False), **dict.fromkeys(directories, True)}


def upload(s3: Any, local: Path, location: S3Location, name: str) -> str:
    """Upload a checkpoint file, or a directory's files and then its marker; the checkpoint's URI."""
    if not local.is_dir():
        s3.upload_file(str(local), location.bucket, location.key(name))
        return location.uri(name)
    for root, _dirs, files in os.walk(local):
        for file in sorted(files):
            path = Path(root, file)
            relative = path.relative_to(local).as_posix()
            s3.upload_file(str(path), location.bucket, location.key(f"{name}/{relative}"))
    s3.put_object(Bucket=location.bucket, Key=location.key(f"{name}/{MARKER}"), Body=b"")
    return location.uri(name)


def download(s3: Any, location: S3Location, name: str, is_directory: bool, target: Path) -> None:
    """Download a complete checkpoint to `target` (a file, or a directory without the marker)."""
    if not is_directory:
        s3.download_file(location.bucket, location.key(name), str(target))
        return
    target.mkdir(parents=True)
    for relative in _keys(s3, S3Location(location.bucket, location.key(name))):
        if relative == MARKER or relative.endswith("/"):
            continue
        destination = target.joinpath(*relative.split("/"))
        if not destination.resolve().is_relative_to(target.resolve()):
            continue  # a key with ".." in it points outside the checkpoint: never written
        destination.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(location.bucket, location.key(f"{name}/{relative}"), str(destination))


def delete(s3: Any, location: S3Location, name: str, is_directory: bool) -> None:
    """Delete a checkpoint: a directory's marker first (it stops counting as complete), then its objects."""
    if not is_directory:
        s3.delete_object(Bucket=location.bucket, Key=location.key(name))
        return
    s3.delete_object(Bucket=location.bucket, Key=location.key(f"{name}/{MARKER}"))
    inside = S3Location(location.bucket, location.key(name))
    keys = [inside.key(relative) for relative in _keys(s3, inside)]
    for start in range(0, len(keys), _DELETE_BATCH):
        batch = [{"Key": key} for key in keys[start : start + _DELETE_BATCH]]
        answer = s3.delete_objects(Bucket=location.bucket, Delete={"Objects": batch, "Quiet": True})
        if answer.get("Errors"):
            first = answer["Errors"][0]
            raise OSError(f"cannot delete {location.uri(name)}: {first.get('Key')}: {first.get('Message')}")
