"""trainingjob.sdk's s3 checkpoints, the pure part: CHECKPOINT_URI as a bucket and prefix, which attempts resume
(RESUME_FROM_CHECKPOINT true or a checkpoint's path), and that the SDK imports no S3 client until one is used. Saving
to and loading from a real S3 server: tests/integration/test_s3_checkpoints.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainingjob import sdk
from trainingjob.sdk import _s3
from trainingjob.sdk._s3 import S3Location


def test_an_s3_uri_is_a_bucket_and_a_prefix_under_which_checkpoints_are_named() -> None:
    location = S3Location.parse("s3://checkpoints/team/run-1/")
    assert location == S3Location("checkpoints", "team/run-1")
    assert location.key("ckpt-00000002.json") == "team/run-1/ckpt-00000002.json"
    assert location.uri("ckpt-00000002.json") == "s3://checkpoints/team/run-1/ckpt-00000002.json"
    root = S3Location.parse("s3://checkpoints")
    assert (root.key("ckpt-00000001"), root.uri()) == ("ckpt-00000001", "s3://checkpoints")
    for bad in ("gs://bucket/x", "s3:///no-bucket", "/checkpoints"):
        with pytest.raises(ValueError):
            S3Location.parse(bad)


def test_the_store_is_s3_only_for_an_s3_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHECKPOINT_URI", raising=False)
    assert sdk.checkpoint_store() is None
    monkeypatch.setenv("CHECKPOINT_URI", "gs://bucket/run")  # gcs is passed on only: the volume stays the store
    assert sdk.checkpoint_store() is None
    monkeypatch.setenv("CHECKPOINT_URI", " s3://checkpoints/run ")
    assert sdk.checkpoint_store() == S3Location("checkpoints", "run")


@pytest.mark.parametrize(
    ("value", "resume"),
    [
        ("", False),
        ("false", False),
        ("FALSE", False),
        ("true", True),
        ("/checkpoints/ckpt-00000003.pt", True),
        ("s3://checkpoints/run/ckpt-00000003.pt", True),
    ],
)
def test_an_attempt_resumes_on_true_or_on_a_checkpoints_path(
    monkeypatch: pytest.MonkeyPatch, value: str, resume: bool
) -> None:
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", value)
    assert sdk.resume_requested() is resume


def test_a_path_in_resume_from_checkpoint_resumes_from_the_newest_checkpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.delenv("CHECKPOINT_URI", raising=False)
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", str(tmp_path / "ckpt-00000002"))
    assert not sdk.should_resume()  # nothing saved yet
    sdk.save_checkpoint(lambda path: path.write_bytes(b"w"), epoch=2, report=False)
    assert sdk.should_resume() and sdk.latest_checkpoint() == tmp_path / "ckpt-00000002"


def test_the_sdk_imports_no_s3_client_until_it_needs_one() -> None:
    code = "import sys, trainingjob.sdk; print('boto3' in sys.modules, 'botocore' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"]
    assert _s3.is_s3("s3://b/k") and not _s3.is_s3("/b/k") and not _s3.is_s3(None)
