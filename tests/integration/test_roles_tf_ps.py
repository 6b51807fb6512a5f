"""TensorFlow ParameterServerStrategy for real on the local process nodes: a chief coordinating 2 workers, 2
parameter servers and an evaluator, every pod told its part by the TF_CONFIG the operator writes, the job judged by
the chief.

What TensorFlow saw is read back from the pods' logs: each task prints the cluster spec and task that
TFConfigClusterResolver resolved, the chief prints where its variables live and which workers ran its steps, the
evaluator prints its score of every checkpoint. The servers' logs are collected while they run: once the chief has
succeeded, the operator deletes them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.jobs import create_job, job_pods
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from tests.real_roles import RUN_TIMEOUT, log_of, log_tails, status_of
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

MANIFEST = REPO / "examples" / "tensorflow" / "trainingjob-ps-local.yaml"


def events(log: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines() if line.startswith('{"')]


def first(log: str, event: str) -> dict[str, Any]:
    return next(e for e in events(log) if e["event"] == event)


def run_collecting_logs(kube: Kube, namespace: str, name: str, pods: list[str]) -> dict[str, str]:
    """Every pod's log, the last one read before it went away, once the job has Succeeded."""
    logs: dict[str, str] = {}

    def succeeded() -> bool:
        for pod in pods:
            logs[pod] = log_of(kube, namespace, pod) or logs.get(pod, "")
        phase = status_of(kube, namespace, name).get("phase")
        if phase == "Failed":
            raise AssertionError(f"{name} Failed\n{log_tails(kube, namespace, name)}")
        return phase == "Succeeded"

    try:
        wait_until(succeeded, RUN_TIMEOUT, f"{name} to succeed", interval=1.0)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{log_tails(kube, namespace, name)}") from None
    return logs


def test_parameter_server_strategy_with_chief_ps_workers_and_evaluator_is_judged_by_the_chief(
    kube: Kube, namespace: str
) -> None:
    body = yaml.safe_load(MANIFEST.read_text())
    name, spec = body["metadata"]["name"], body["spec"]
    counts = {"chief": 1, "worker": spec["workers"], "ps": spec["roles"]["ps"]["replicas"], "evaluator": 1}
    pods = [f"{name}-{role}-{i}" for role, count in counts.items() for i in range(count)]
    create_job(kube, namespace, body)
    logs = run_collecting_logs(kube, namespace, name, pods)

    status = status_of(kube, namespace, name)
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Succeeded"] == ["ChiefSucceeded"]
    assert status["roleStatuses"]["chief"] == {"replicas": 1, "pending": 0, "running": 0, "succeeded": 1, "failed": 0}
    assert {role: s["replicas"] for role, s in status["roleStatuses"].items()} == counts
    assert status.get("restartCount", 0) == 0
    # The local cluster gangs the job (Workload API): every role's pods are the gang's, all counted in minCount.
    assert {key: status["gang"][key] for key in ("name", "minCount", "state")} == {
        "name": f"{name}-gang-0",
        "minCount": len(pods),
        "state": "Scheduled",
    }
    chief = kube.core.read_namespaced_pod(f"{name}-chief-0", namespace)
    assert chief.metadata.labels[k.LABEL_GANG] == f"{name}-gang-0"

    # The cluster spec TensorFlow resolved: chief, workers and ps at their DNS names on one port; never the evaluator.
    chief_task = first(logs[f"{name}-chief-0"], "task")
    cluster = chief_task["cluster"]
    port = cluster["chief"][0].rsplit(":", 1)[1]
    assert cluster == {
        role: [f"{name}-{role}-{i}.{name}-workers.{namespace}.svc:{port}" for i in range(counts[role])]
        for role in ("chief", "worker", "ps")
    }
    for pod in pods:
        assert logs[pod], f"{pod} printed nothing"
        task = first(logs[pod], "task")
        role, index = pod.removeprefix(f"{name}-").rsplit("-", 1)
        assert (task["type"], task["index"], task["cluster"]) == (role, int(index), cluster), pod
        if role in ("ps", "worker"):
            assert first(logs[pod], "serving")["target"].endswith(f":{port}"), pod

    # The variables live on the parameter servers (spread over both), and the steps ran on both workers.
    devices = first(logs[f"{name}-chief-0"], "variables")["devices"]
    assert {d.split("/device:")[0] for d in devices} == {f"/job:ps/replica:0/task:{i}" for i in range(counts["ps"])}
    done = first(logs[f"{name}-chief-0"], "done")
    assert done["workers"] == list(range(counts["worker"]))
    epochs = [e["epoch"] for e in events(logs[f"{name}-chief-0"]) if e["event"] == "epoch"]
    assert epochs == list(range(1, spec["hyperparameters"]["epochs"] + 1))
    # The evaluator scored the checkpoints the chief wrote, up to the last one, which the chief read back.
    scored = [e for e in events(logs[f"{name}-evaluator-0"]) if e.pop("event") == "evaluation"]
    assert scored and scored[-1] == done["evaluation"]
    assert done["evaluation"]["epoch"] == epochs[-1] and done["evaluation"]["accuracy"] > 0.8, done

    # The servers have nothing left to serve once the chief has succeeded: the operator deletes them. (The
    # evaluator stopped by itself after scoring the last checkpoint; finished pods stay, by cleanPodPolicy Running.)
    servers = {f"{name}-{role}-{i}" for role in ("ps", "worker") for i in range(counts[role])}

    def servers_gone() -> bool:
        live = {p.metadata.name for p in job_pods(kube, namespace, name) if p.metadata.deletion_timestamp is None}
        return not live & servers

    wait_until(servers_gone, 120, "the ps and worker pods to be deleted", interval=1.0)
    assert status_of(kube, namespace, name)["phase"] == "Succeeded"
