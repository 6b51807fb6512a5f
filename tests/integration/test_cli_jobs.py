"""The job commands of `tj` as a user runs them: a subprocess against the real cluster and the real operator."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.jobs import SIM, create_job, get_job, job_manifest, live_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from trainingjob.cli.plumbing import INTERRUPTED_EXIT

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def environment(kubeconfig: Path | str, **extra: str) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(kubeconfig), **extra}


def tj(cluster, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(cluster.kubeconfig, **extra),
        cwd=REPO,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def tj_background(cluster, *args: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """`tj …` running on, with its stdout lines arriving in a queue."""
    process = subprocess.Popen(
        [sys.executable, "-m", "trainingjob.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(cluster.kubeconfig),
        cwd=REPO,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return process, lines


def interrupted(process: subprocess.Popen[str]) -> None:
    """The command ended after Ctrl-C, with its exit code 130; else fail showing what it wrote to stderr."""
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"`tj` still ran 30 s after SIGINT; its stderr:\n{err}")
    assert process.returncode == INTERRUPTED_EXIT


def next_line_with(lines: queue.Queue[str], *words: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(line)
        if all(word in line.split() for word in words):
            return line
    raise AssertionError(f"no line with {words} within {timeout}s; got {seen}")


def write_job_file(path: Path, *manifests: dict) -> Path:
    path.write_text(yaml.safe_dump_all(manifests))
    return path


def test_submit_from_a_file_creates_the_job_once(cluster, kube: Kube, namespace: str, tmp_path: Path) -> None:
    manifest = job_manifest("from-file", workers=2, complete_after=None, hyperparameters={"lr": 0.01})
    second = job_manifest("second", complete_after=None)
    path = write_job_file(tmp_path / "job.yaml", manifest, second)

    created = tj(cluster, "submit", "-f", str(path), "-n", namespace)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines() == [
        f"trainingjob {namespace}/from-file created",
        f"trainingjob {namespace}/second created",
    ]
    job = get_job(kube, namespace, "from-file")
    assert job["spec"]["workers"] == 2 and job["spec"]["hyperparameters"] == {"lr": 0.01}
    assert job["spec"]["command"] == ["python", "train.py"]

    again = tj(cluster, "submit", "-f", str(path), "-n", namespace)
    assert again.returncode == 1
    assert f"error: trainingjob {namespace}/from-file already exists" in again.stderr
    assert f"error: trainingjob {namespace}/second already exists" in again.stderr

    other = write_job_file(tmp_path / "other.yaml", manifest | {"metadata": {"name": "x", "namespace": "other"}})
    elsewhere = tj(cluster, "submit", "-f", str(other), "-n", namespace)
    assert elsewhere.returncode == 1 and "is in namespace other, but -n says" in elsewhere.stderr


def test_submit_from_flags_builds_the_spec(cluster, kube: Kube, namespace: str) -> None:
    flags = [
        "submit",
        "flags",
        "-n",
        namespace,
        "--framework",
        "pytorch",
        "--image",
        "registry.example/train:2",
        "--workers",
        "3",
        "--gpus",
        "1",
        "--hp",
        "learningRate=0.1",
        "--hp",
        "epochs=3",
        "--hp",
        "amp=true",
        "--hp",
        "arch=resnet50",
        "--env",
        "LOG_LEVEL=debug",
        "--annotation",
        f"{SIM}/start-delay=1s",
    ]
    command = ["--", "python", "train.py", "--lr", "0.1"]
    dry = tj(cluster, *flags, "--dry-run", *command)
    assert dry.returncode == 0, dry.stderr
    assert yaml.safe_load(dry.stdout)["metadata"] == {"name": "flags", "namespace": namespace}
    assert get_job(kube, namespace, "flags") is None  # a dry run creates nothing

    created = tj(cluster, *flags, "-o", "json", *command)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["metadata"]["name"] == "flags"
    spec = get_job(kube, namespace, "flags")["spec"]
    assert (spec["framework"], spec["image"], spec["workers"], spec["gpuPerWorker"]) == (
        "pytorch",
        "registry.example/train:2",
        3,
        1,
    )
    assert spec["command"] == ["python"] and spec["args"] == ["train.py", "--lr", "0.1"]
    assert spec["hyperparameters"] == {"learningRate": 0.1, "epochs": 3, "amp": True, "arch": "resnet50"}
    assert spec["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]
    assert spec["podAnnotations"] == {f"{SIM}/start-delay": "1s"}
    wait_phase(kube, namespace, "flags", "Running")

    invalid = tj(cluster, "submit", "Bad_Name", "-n", namespace, "--framework", "jax", "--image", "i", "--", "x")
    assert invalid.returncode == 1 and f"invalid trainingjob {namespace}/Bad_Name" in invalid.stderr


def test_get_lists_jobs_as_tables_and_json(cluster, kube: Kube, namespace: str) -> None:
    for name in ("beta", "alpha"):
        create_job(kube, namespace, job_manifest(name, workers=2, complete_after=None))
    wait_phase(kube, namespace, "alpha", "Running")
    wait_phase(kube, namespace, "beta", "Running")

    table = tj(cluster, "get", "-n", namespace)
    assert table.returncode == 0, table.stderr
    lines = [line.split() for line in table.stdout.splitlines()]
    assert lines[0] == ["NAME", "FRAMEWORK", "WORKERS", "PHASE", "RESTARTS", "AGE"]
    assert [line[:5] for line in lines[1:]] == [
        ["alpha", "pytorch", "2", "Running(simulated)", "0"],  # kwok plays their workers
        ["beta", "pytorch", "2", "Running(simulated)", "0"],
    ]

    everywhere = tj(cluster, "get", "-A")
    assert everywhere.returncode == 0, everywhere.stderr
    rows = [line.split() for line in everywhere.stdout.splitlines()]
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert [namespace, "alpha", "pytorch", "2", "Running(simulated)", "0"] in [row[:6] for row in rows]

    one = tj(cluster, "get", "alpha", "-n", namespace, "-o", "json")
    assert one.returncode == 0 and json.loads(one.stdout)["metadata"]["name"] == "alpha"
    listing = json.loads(tj(cluster, "get", "-n", namespace, "-o", "json").stdout)
    assert [item["metadata"]["name"] for item in listing["items"]] == ["alpha", "beta"]
    as_yaml = yaml.safe_load(tj(cluster, "get", "beta", "-n", namespace, "-o", "yaml").stdout)
    assert as_yaml["status"]["phase"] == "Running"

    empty = tj(cluster, "get", "-n", f"{namespace}-empty")
    assert empty.returncode == 0 and empty.stdout == "" and "No trainingjobs found" in empty.stderr


def test_get_watch_streams_changes_until_interrupted(cluster, kube: Kube, namespace: str) -> None:
    process, lines = tj_background(cluster, "get", "-w", "-n", namespace)
    try:
        next_line_with(lines, "NAME", "PHASE")
        create_job(kube, namespace, job_manifest("streamed", complete_after="2s"))
        next_line_with(lines, "streamed", "Running(simulated)")  # kwok plays its worker
        next_line_with(lines, "streamed", "Succeeded(simulated)")
    finally:
        process.send_signal(signal.SIGINT)
        interrupted(process)
    assert process.returncode == 130
    assert "Traceback" not in process.stderr.read()


def test_describe_shows_conditions_workers_and_events(cluster, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("described", workers=2, complete_after="2s"))
    wait_phase(kube, namespace, "described", "Succeeded")

    def described() -> str | None:
        result = tj(cluster, "describe", "described", "-n", namespace)
        assert result.returncode == 0, result.stderr
        return result.stdout if "TrainingSucceeded" in result.stdout else None

    text = wait_until(described, 30, "the TrainingSucceeded event in describe")
    lines = [line.split() for line in text.splitlines()]
    assert ["Phase:", "Succeeded"] in lines and ["Framework:", "pytorch"] in lines
    assert ["Attempt:", "0"] in lines and ["Restarts:", "0"] in lines and ["Disruptions:", "0"] in lines
    sections = [line[0] for line in lines if line and line[0].endswith(":") and len(line) == 1]
    assert sections == ["Conditions:", "Workers:", "Events:"]
    assert any(line[:3] == ["Succeeded", "True", "AllWorkersSucceeded"] for line in lines)
    workers = [line for line in lines if line and line[0] in ("0", "1") and len(line) > 2]
    assert [(w[1], w[2]) for w in workers] == [("described-worker-0", "Succeeded"), ("described-worker-1", "Succeeded")]
    assert any(line[:2] == ["Normal", "WorkersCreated"] for line in lines)

    structured = json.loads(tj(cluster, "describe", "described", "-n", namespace, "-o", "json").stdout)
    assert structured["job"]["status"]["phase"] == "Succeeded"
    assert "TrainingSucceeded" in [event["reason"] for event in structured["events"]]


def test_watch_exits_0_when_the_job_succeeds(cluster, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("finishes", workers=2, complete_after="2s"))
    result = tj(cluster, "watch", "finishes", "-n", namespace, "--timeout", "90")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"trainingjob {namespace}/finishes succeeded"
    assert f"{namespace}/finishes: Succeeded" in result.stdout
    # A job that already finished: watch returns at once.
    again = tj(cluster, "watch", "finishes", "-n", namespace, "--timeout", "5")
    assert again.returncode == 0


def test_watch_exits_1_with_the_reason_when_the_job_fails(cluster, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("breaks", workers=2, complete_after=None, restartPolicy="Never"))
    wait_phase(kube, namespace, "breaks", "Running")
    process, lines = tj_background(cluster, "watch", "breaks", "-n", namespace, "--timeout", "90")
    next_line_with(lines, "Running")
    kube.core.patch_namespaced_pod(
        "breaks-worker-1", namespace, {"metadata": {"annotations": {f"{SIM}/fail": "true", f"{SIM}/exit-code": "3"}}}
    )
    process.wait(timeout=90)
    stderr = process.stderr.read()
    assert process.returncode == 1, stderr
    assert f"error: trainingjob {namespace}/breaks failed: WorkerFailed:" in stderr and "exit code 3" in stderr


def test_watch_timeout_exits_2(cluster, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("endless", complete_after=None))
    wait_phase(kube, namespace, "endless", "Running")
    result = tj(cluster, "watch", "endless", "-n", namespace, "--timeout", "2")
    assert result.returncode == 2
    assert f"timed out after 2s waiting for trainingjob {namespace}/endless to finish (phase Running)" in result.stderr


def test_suspend_resume_scale_and_delete(cluster, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("managed", workers=2, complete_after=None))
    wait_phase(kube, namespace, "managed", "Running")

    suspended = tj(cluster, "suspend", "managed", "-n", namespace)
    assert suspended.returncode == 0 and suspended.stdout.strip() == f"trainingjob {namespace}/managed suspended"
    assert get_job(kube, namespace, "managed")["spec"]["suspend"] is True
    wait_phase(kube, namespace, "managed", "Suspended")
    wait_until(lambda: not live_pods(kube, namespace, "managed"), 60, "the workers to be removed")

    resumed = tj(cluster, "resume", "managed", "-n", namespace)
    assert resumed.returncode == 0 and resumed.stdout.strip() == f"trainingjob {namespace}/managed resumed"
    assert get_job(kube, namespace, "managed")["spec"]["suspend"] is False
    wait_phase(kube, namespace, "managed", "Running")

    scaled = tj(cluster, "scale", "managed", "--workers", "3", "-n", namespace)
    assert scaled.returncode == 0 and scaled.stdout.strip() == f"trainingjob {namespace}/managed scaled to 3 workers"
    assert get_job(kube, namespace, "managed")["spec"]["workers"] == 3
    wait_until(lambda: len(live_pods(kube, namespace, "managed")) == 3, 60, "three workers")
    wait_phase(kube, namespace, "managed", "Running")

    deleted = tj(cluster, "delete", "managed", "--wait", "-n", namespace)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"trainingjob {namespace}/managed deleted"
    assert get_job(kube, namespace, "managed") is None  # --wait returned only once it was gone

    create_job(kube, namespace, job_manifest("quick", complete_after=None))
    wait_phase(kube, namespace, "quick", "Running")
    requested = tj(cluster, "delete", "quick", "-n", namespace)
    assert requested.returncode == 0 and "quick marked for deletion" in requested.stdout
    wait_until(lambda: get_job(kube, namespace, "quick") is None, 60, "the job to be deleted")


def test_logs_say_the_simulated_pod_has_none(cluster, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("quiet", workers=2, complete_after=None))
    wait_phase(kube, namespace, "quiet", "Running")
    for args in ((), ("--worker", "1"), ("-f",)):
        result = tj(cluster, "logs", "quiet", "-n", namespace, *args, timeout=60)
        assert result.returncode == 1
        pod = "quiet-worker-1" if "--worker" in args else "quiet-worker-0"
        assert f"error: pod {namespace}/{pod} has no logs available (container trainer)" in result.stderr
    out_of_range = tj(cluster, "logs", "quiet", "-n", namespace, "--worker", "2")
    assert out_of_range.returncode == 1 and "has 2 workers (0 to 1)" in out_of_range.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["get", "missing"],
        ["describe", "missing"],
        ["logs", "missing"],
        ["watch", "missing"],
        ["delete", "missing"],
        ["suspend", "missing"],
        ["resume", "missing"],
        ["scale", "missing", "--workers", "2"],
    ],
)
def test_a_missing_job_is_reported_in_one_line(cluster, namespace: str, command: list[str]) -> None:
    result = tj(cluster, *command, "-n", namespace)
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: trainingjob {namespace}/missing not found"


def test_unreachable_cluster_and_missing_kubeconfig(cluster, tmp_path: Path) -> None:
    document = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    for entry in document["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "unreachable.kubeconfig"
    unreachable.write_text(yaml.safe_dump(document))
    for command in (["get"], ["describe", "a"], ["submit", "a", "--framework", "jax", "--image", "i", "--", "x"]):
        result = tj(cluster, *command, KUBECONFIG=str(unreachable))
        assert result.returncode == 1
        assert (
            result.stderr.strip() == "error: cannot reach the Kubernetes API at https://127.0.0.1:1: connection refused"
        )

    nothing = tj(cluster, "get", KUBECONFIG="", HOME=str(tmp_path))
    assert nothing.returncode == 1
    assert (
        nothing.stderr.strip()
        == "error: no kubeconfig found: set KUBECONFIG, pass --kubeconfig, or run inside a cluster"
    )
    explicit = tj(cluster, "get", "--kubeconfig", str(tmp_path / "absent"))
    assert explicit.returncode == 1 and f"kubeconfig {tmp_path / 'absent'} does not exist" in explicit.stderr


def test_a_namespace_from_the_kubeconfig_context_is_the_default(cluster, kube: Kube, namespace: str, tmp_path: Path):
    document = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    for entry in document["contexts"]:
        entry["context"]["namespace"] = namespace
    scoped = tmp_path / "scoped.kubeconfig"
    scoped.write_text(yaml.safe_dump(document))
    create_job(kube, namespace, job_manifest("ctx", complete_after=None))
    result = tj(cluster, "get", "ctx", KUBECONFIG=str(scoped))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].split()[0] == "ctx"
