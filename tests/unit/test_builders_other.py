"""The shared children of a job (headless Service, ConfigMap) and the metadata helpers in `builders/common.py`.

Proves: every child carries the job's labels and one controlling ownerReference; spec_hash is a stable fingerprint
of what shapes the workers (it changes with image, workers, hyperparameters, env, ... and not with the policy
fields restartPolicy/backoffLimit, nor with key order); the Service is headless, publishes not-ready addresses,
selects exactly this job's workers and serves masterPort; the ConfigMap holds hyperparameters.json as valid JSON
whose numbers stay numbers, plus the MPI hostfile for mpi jobs only.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import POLICY_FIELDS, child_metadata, job_labels, owner_reference, spec_hash
from trainingjob.builders.configmap import desired_config_data, desired_config_map
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.builders.service import desired_service, service_selector
from trainingjob.config import OperatorConfig
from trainingjob.frameworks.mpi import HOSTFILE

BASE_SPEC: dict[str, Any] = {
    "framework": "pytorch",
    "image": "train:1",
    "command": ["python", "train.py"],
    "workers": 2,
    "gpuPerWorker": 0,
    "hyperparameters": {"lr": 0.1, "epochs": 10},
    "env": [{"name": "LOG_LEVEL", "value": "info"}],
    "restartPolicy": "OnFailure",
    "backoffLimit": 3,
}


def make_job(name: str = "mnist", uid: str = "uid-1", **spec: Any) -> TrainingJob:
    body = {**copy.deepcopy(BASE_SPEC), **spec}
    return TrainingJob.from_body({"metadata": {"name": name, "namespace": "ml", "uid": uid}, "spec": body})


def test_job_labels() -> None:
    assert job_labels(make_job()) == {"ml.example.com/job-name": "mnist", "app.kubernetes.io/managed-by": k.MANAGED_BY}


def test_owner_reference() -> None:
    assert owner_reference(make_job(uid="abc")) == {
        "apiVersion": "ml.example.com/v1",
        "kind": "TrainingJob",
        "name": "mnist",
        "uid": "abc",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_child_metadata_adds_extra_labels() -> None:
    metadata = child_metadata(make_job(), "mnist-x", {"extra": "1"})
    assert metadata["name"] == "mnist-x"
    assert metadata["namespace"] == "ml"
    assert metadata["labels"] == {**job_labels(make_job()), "extra": "1"}
    assert metadata["ownerReferences"] == [owner_reference(make_job())]
    assert child_metadata(make_job(), "mnist-y")["labels"] == job_labels(make_job())


# --- spec_hash ---------------------------------------------------------------------------------------------------


def test_spec_hash_is_stable_and_short_hex() -> None:
    first, second = spec_hash(make_job()), spec_hash(make_job())
    assert first == second
    assert len(first) == 16
    int(first, 16)


def test_spec_hash_ignores_key_order_and_identity() -> None:
    reordered = dict(reversed(list(copy.deepcopy(BASE_SPEC).items())))
    reordered["hyperparameters"] = {"epochs": 10, "lr": 0.1}
    job = TrainingJob.from_body({"metadata": {"name": "other", "namespace": "x", "uid": "u"}, "spec": reordered})
    assert spec_hash(job) == spec_hash(make_job())


@pytest.mark.parametrize(
    "change",
    [
        {"image": "train:2"},
        {"workers": 3},
        {"gpuPerWorker": 1},
        {"command": ["python", "other.py"]},
        {"args": ["--fast"]},
        {"hyperparameters": {"lr": 0.2, "epochs": 10}},
        {"hyperparameters": {"lr": 0.1, "epochs": 10, "momentum": 0.9}},
        {"hyperparameters": {"lr": 0.1}},
        {"env": [{"name": "LOG_LEVEL", "value": "debug"}]},
        {"env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "X", "value": "1"}]},
        {"networking": {"masterPort": 1234}},
        {"dataVolume": {"claimName": "data"}},
    ],
    ids=lambda change: ",".join(change),
)
def test_spec_hash_changes_with_what_shapes_the_workers(change: dict) -> None:
    assert spec_hash(make_job(**change)) != spec_hash(make_job())


@pytest.mark.parametrize(
    "change",
    [{"restartPolicy": "Never"}, {"restartPolicy": "ExitCode"}, {"backoffLimit": 0}, {"backoffLimit": 100}],
    ids=lambda change: f"{next(iter(change))}={next(iter(change.values()))}",
)
def test_spec_hash_ignores_policy_fields(change: dict) -> None:
    assert spec_hash(make_job(**change)) == spec_hash(make_job())


def test_policy_fields_are_the_lifecycle_policies() -> None:
    assert (
        frozenset(
            {
                "restartPolicy",
                "backoffLimit",
                "suspend",
                "activeDeadlineSeconds",
                "startupTimeoutSeconds",
                "ttlSecondsAfterFinished",
                "cleanPodPolicy",
                "successPolicy",
                "failurePolicy",
            }
        )
        == POLICY_FIELDS
    )


# --- Service -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("networking", [None, {"masterPort": 23456}, {"masterPort": 1}])
def test_service_is_headless_and_serves_the_master_port(networking: dict | None) -> None:
    job = make_job(**({"networking": networking} if networking else {}))
    port = (networking or {}).get("masterPort", 29500)
    service = desired_service(job)
    assert (service["apiVersion"], service["kind"]) == ("v1", "Service")
    assert service["metadata"]["name"] == "mnist-workers"
    assert service["metadata"]["namespace"] == "ml"
    assert service["metadata"]["ownerReferences"] == [owner_reference(job)]
    assert service["metadata"]["labels"] == job_labels(job)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"] == [{"name": "dist", "port": port, "targetPort": port, "protocol": "TCP"}]


def test_service_stands_for_this_jobs_workers_only_and_selects_no_pods() -> None:
    """The operator publishes the members' addresses itself (builders/endpoints.py); service_selector says who."""
    job, other = make_job(), make_job(name="mnist2")
    assert "selector" not in desired_service(job)["spec"]
    selector = service_selector(job)
    assert selector == {"ml.example.com/job-name": "mnist", "ml.example.com/role": "worker"}
    for index in range(job.spec.workers):
        labels = desired_worker_pod(job, index, 0, OperatorConfig())["metadata"]["labels"]
        assert selector.items() <= labels.items()
    other_labels = desired_worker_pod(other, 0, 0, OperatorConfig())["metadata"]["labels"]
    assert not selector.items() <= other_labels.items()
    assert not selector.items() <= desired_service(job)["metadata"]["labels"].items(), "the Service is no worker"


# --- ConfigMap ---------------------------------------------------------------------------------------------------


def test_config_map_metadata() -> None:
    job = make_job()
    config_map = desired_config_map(job)
    assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
    assert config_map["metadata"] == child_metadata(job, "mnist-config")
    assert config_map["data"] == desired_config_data(job)


@pytest.mark.parametrize(
    "hyperparameters",
    [
        {},
        {"lr": 0.001, "epochs": 10, "nesterov": True, "optimizer": "adam"},
        {"schedule": [1, 2, 3], "nested": {"a": 1.5}, "zero": 0, "big": 10**12, "small": 1e-08, "none": None},
    ],
)
def test_hyperparameters_json_round_trips_with_types(hyperparameters: dict) -> None:
    data = desired_config_data(make_job(hyperparameters=hyperparameters))
    text = data[k.HYPERPARAMETERS_FILE]
    loaded = json.loads(text)
    assert loaded == hyperparameters
    for key, value in hyperparameters.items():
        assert type(loaded[key]) is type(value), key
    assert text.endswith("\n")


def test_hyperparameters_json_is_canonical() -> None:
    a = desired_config_data(make_job(hyperparameters={"b": 1, "a": 2}))
    b = desired_config_data(make_job(hyperparameters={"a": 2, "b": 1}))
    assert a == b
    assert a[k.HYPERPARAMETERS_FILE] == '{\n  "a": 2,\n  "b": 1\n}\n'


@pytest.mark.parametrize("framework", [f for f in k.FRAMEWORKS if f != "mpi"])
def test_only_hyperparameters_for_non_mpi_frameworks(framework: str) -> None:
    assert set(desired_config_data(make_job(framework=framework))) == {k.HYPERPARAMETERS_FILE}


@pytest.mark.parametrize(("workers", "gpus", "slots"), [(1, 0, 1), (3, 0, 1), (2, 4, 4), (5, 8, 8)])
def test_mpi_config_map_has_the_hostfile(workers: int, gpus: int, slots: int) -> None:
    data = desired_config_data(make_job(framework="mpi", workers=workers, gpuPerWorker=gpus))
    assert set(data) == {k.HYPERPARAMETERS_FILE, HOSTFILE}
    assert data[HOSTFILE].splitlines() == [
        f"mnist-worker-{i}.mnist-workers.ml.svc slots={slots}" for i in range(workers)
    ]
