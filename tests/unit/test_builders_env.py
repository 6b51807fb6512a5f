"""A worker's environment as `builders/env.py` assembles it.

Proves: hyperparameter keys map to HYPERPARAM_<SNAKE_UPPER> names and values render as shells expect (booleans
lower-case, numbers in their JSON form, strings untouched); the job-identity variables (restart count, resume flag,
backend, data/model/dataset only when set) are exact; the order is framework contract, identity, hyperparameters,
then the user's env untouched and last; the worker context names every peer through the headless Service; and, as a
property, no env name appears twice in a worker's env whatever the worker count, index and hyperparameters.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.builders.env import (
    guide_hyperparameter_env_name,
    hyperparameter_env,
    hyperparameter_env_name,
    hyperparameter_value,
    identity_env,
    worker_context,
    worker_env,
)
from trainingjob.frameworks.registry import framework_for


def make_job(uid: str = "u-1", **spec: Any) -> TrainingJob:
    body = {"framework": "pytorch", "image": "train:1", "command": ["python", "train.py"], "workers": 2, **spec}
    return TrainingJob.from_body({"metadata": {"name": "mnist", "namespace": "ml", "uid": uid}, "spec": body})


def names(env: list[dict[str, Any]]) -> list[str]:
    return [e["name"] for e in env]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("learningRate", "HYPERPARAM_LEARNING_RATE"),
        ("batch_size", "HYPERPARAM_BATCH_SIZE"),
        ("batch-size", "HYPERPARAM_BATCH_SIZE"),
        ("batch.size", "HYPERPARAM_BATCH_SIZE"),
        ("lr", "HYPERPARAM_LR"),
        ("dropoutP", "HYPERPARAM_DROPOUT_P"),
        ("already_UPPER", "HYPERPARAM_ALREADY_UPPER"),
        ("EPOCHS", "HYPERPARAM_EPOCHS"),
        ("a.b.c", "HYPERPARAM_A_B_C"),
        ("warmup2Steps", "HYPERPARAM_WARMUP2_STEPS"),
        ("beta1", "HYPERPARAM_BETA1"),
        ("num.layers-2", "HYPERPARAM_NUM_LAYERS_2"),
        ("__private__", "HYPERPARAM_PRIVATE"),
        ("max--len", "HYPERPARAM_MAX_LEN"),
        ("numHiddenLayers", "HYPERPARAM_NUM_HIDDEN_LAYERS"),
    ],
)
def test_hyperparameter_env_name(key: str, expected: str) -> None:
    assert hyperparameter_env_name(key) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (64, "64"),
        (-3, "-3"),
        (0.001, "0.001"),
        (3.0, "3.0"),
        (1e-05, "1e-05"),
        (2.5e20, "2.5e+20"),
        ("adam", "adam"),
        ("", ""),
        ("True", "True"),
        ("0.10", "0.10"),
        ([1, 2], "[1, 2]"),
        ({"a": 1}, '{"a": 1}'),
        (None, "null"),
    ],
)
def test_hyperparameter_value(value: Any, expected: str) -> None:
    assert hyperparameter_value(value) == expected


def test_hyperparameter_env_is_sorted_by_key_with_the_guides_names_after_ours() -> None:
    env = hyperparameter_env({"zeta": 1, "alpha": True, "midValue": "x"})
    assert list(env.items()) == [
        ("HYPERPARAM_ALPHA", "true"),
        ("HYPERPARAM_MID_VALUE", "x"),
        ("HYPERPARAM_ZETA", "1"),
        ("HYPERPARAM_MIDVALUE", "x"),  # seed 002's HYPERPARAM_{key.upper()}
    ]


def test_the_guides_launch_script_finds_its_three_hyperparameters() -> None:
    """Seed 002's job (learningRate, batchSize, epochs) and its script's $HYPERPARAM_LEARNINGRATE etc."""
    env = hyperparameter_env({"learningRate": 0.001, "batchSize": 32, "epochs": 10})
    assert {name: env[name] for name in ("HYPERPARAM_LEARNINGRATE", "HYPERPARAM_BATCHSIZE", "HYPERPARAM_EPOCHS")} == {
        "HYPERPARAM_LEARNINGRATE": "0.001",
        "HYPERPARAM_BATCHSIZE": "32",
        "HYPERPARAM_EPOCHS": "10",
    }
    assert (env["HYPERPARAM_LEARNING_RATE"], env["HYPERPARAM_BATCH_SIZE"]) == ("0.001", "32"), "ours stay"


@pytest.mark.parametrize(
    ("key", "expected"),
    [("learningRate", "HYPERPARAM_LEARNINGRATE"), ("__x__", "HYPERPARAM___X__"), ("b2", "HYPERPARAM_B2")]
    + [(key, None) for key in ("batch-size", "batch.size", "a.b")],
)
def test_guide_hyperparameter_env_name_is_key_upper_where_a_shell_can_read_it(key: str, expected: str | None) -> None:
    assert guide_hyperparameter_env_name(key) == expected


@pytest.mark.parametrize(
    ("hyperparameters", "expected"),
    [
        # learningrate's own name is the guide's name of learningRate: ours keeps its value, no guide entry added.
        (
            {"learningRate": 1, "learningrate": 2},
            {"HYPERPARAM_LEARNING_RATE": "1", "HYPERPARAM_LEARNINGRATE": "2"},
        ),
        # fooBar and foobAr both want HYPERPARAM_FOOBAR (neither as ours): ambiguous, so neither gets it.
        ({"fooBar": 1, "foobAr": 2}, {"HYPERPARAM_FOO_BAR": "1", "HYPERPARAM_FOOB_AR": "2"}),
    ],
)
def test_the_guides_names_never_override_ours_nor_each_other(
    hyperparameters: dict[str, Any], expected: dict[str, str]
) -> None:
    assert hyperparameter_env(hyperparameters) == expected


def test_identity_env_at_attempt_zero_is_exact() -> None:
    assert identity_env(make_job(), 1, 0) == {
        "TRAININGJOB_NAME": "mnist",
        "TRAININGJOB_NAMESPACE": "ml",
        "TRAININGJOB_FRAMEWORK": "pytorch",
        "TRAININGJOB_ROLE": "worker",
        "TRAININGJOB_IS_CHIEF": "false",
        "TRAININGJOB_WORKER_INDEX": "1",
        "TRAININGJOB_WORLD_SIZE": "2",
        "TRAININGJOB_RESTART_COUNT": "0",
        "TRAININGJOB_HYPERPARAMETERS_FILE": "/etc/trainingjob/hyperparameters.json",
        "DISTRIBUTED_BACKEND": "gloo",
        "CHECKPOINT_DIR": "/checkpoints/u-1",  # this run's own directory, named by the job's uid
        "CHECKPOINT_INTERVAL": "1",
        "RESUME_FROM_CHECKPOINT": "false",
        "TRAININGJOB_GRACE_PERIOD_SECONDS": "30",
        "NUM_WORKERS": "2",
        "GPUS_PER_WORKER": "0",
        "CHECKPOINT_FREQUENCY": "1",
    }


@pytest.mark.parametrize(("workers", "gpus", "interval"), [(1, 0, 1), (4, 2, 3)])
def test_the_guides_identity_names_mirror_ours(workers: int, gpus: int, interval: int) -> None:
    env = identity_env(make_job(workers=workers, gpuPerWorker=gpus, checkpointInterval=interval), 0, 0)
    assert (env["NUM_WORKERS"], env["GPUS_PER_WORKER"], env["CHECKPOINT_FREQUENCY"]) == (
        str(workers),
        str(gpus),
        env["CHECKPOINT_INTERVAL"],
    )
    assert env["CHECKPOINT_INTERVAL"] == str(interval)


def test_gpus_per_worker_is_the_pods_own_role_gpus() -> None:
    job = make_job(framework="tensorflow", gpuPerWorker=2, roles={"ps": {"replicas": 1}})
    assert identity_env(job, 0, 0, "ps")["GPUS_PER_WORKER"] == "0"
    assert identity_env(job, 0, 0)["GPUS_PER_WORKER"] == "2"


def test_pod_name_and_ip_come_from_the_downward_api_before_the_users_env() -> None:
    env = worker_env(make_job(env=[{"name": "A", "value": "$(POD_NAME)"}]), 0, 0)
    assert env[-3:-1] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]


@pytest.mark.parametrize(("attempt", "resume"), [(0, "false"), (1, "true"), (2, "true"), (17, "true")])
def test_restart_count_and_resume_follow_the_attempt(attempt: int, resume: str) -> None:
    env = identity_env(make_job(), 0, attempt)
    assert env["TRAININGJOB_RESTART_COUNT"] == str(attempt)
    assert env["RESUME_FROM_CHECKPOINT"] == resume


def test_a_later_attempt_resumes_from_the_newest_reported_checkpoints_path() -> None:
    body = {
        "metadata": {"name": "mnist", "namespace": "ml", "uid": "u-1"},
        "spec": {"framework": "pytorch", "image": "train:1", "command": ["python"], "workers": 2},
        "status": {"lastCheckpoint": {"epoch": 3, "path": "s3://checkpoints/runs/ckpt-00000003.pt"}},
    }
    job = TrainingJob.from_body(body)
    assert identity_env(job, 0, 0)["RESUME_FROM_CHECKPOINT"] == "false"
    assert identity_env(job, 1, 2)["RESUME_FROM_CHECKPOINT"] == "s3://checkpoints/runs/ckpt-00000003.pt"
    body["status"]["lastCheckpoint"] = {"epoch": 3, "path": "  "}
    assert identity_env(TrainingJob.from_body(body), 1, 2)["RESUME_FROM_CHECKPOINT"] == "true"


@pytest.mark.parametrize(
    ("checkpoint", "attempt", "resume"),
    [
        ({"resumeFrom": "u-0"}, 0, "/checkpoints/u-0"),
        ({"resumeFrom": "u-0/ckpt-00000057.json"}, 3, "/checkpoints/u-0/ckpt-00000057.json"),
        ({"resumeFrom": ".", "dir": "/ckpt"}, 0, "/ckpt"),
        ({"resumeFrom": "u-0/"}, 0, "/checkpoints/u-0"),
        (
            {"resumeFrom": "u-0", "enabled": True, "storage": {"type": "s3", "path": "s3://bucket/runs"}},
            0,
            "s3://bucket/runs/u-0",
        ),
    ],
)
def test_resume_from_another_run_is_passed_to_every_attempt(checkpoint: dict, attempt: int, resume: str) -> None:
    assert identity_env(make_job(checkpoint=checkpoint), 0, attempt)["RESUME_FROM_CHECKPOINT"] == resume


def test_each_run_has_its_own_checkpoint_directory_and_object_store_prefix() -> None:
    first, again = make_job(), make_job(uid="u-2")
    assert identity_env(first, 0, 0)["CHECKPOINT_DIR"] != identity_env(again, 0, 0)["CHECKPOINT_DIR"]
    s3 = make_job(uid="u-2", checkpoint={"enabled": True, "storage": {"type": "s3", "path": "s3://bucket/runs/"}})
    assert identity_env(s3, 0, 0)["CHECKPOINT_URI"] == "s3://bucket/runs/u-2"
    grace = make_job(terminationGracePeriodSeconds=90)
    assert identity_env(grace, 0, 0)["TRAININGJOB_GRACE_PERIOD_SECONDS"] == "90"


def test_optional_identity_variables_only_when_set() -> None:
    plain = identity_env(make_job(), 0, 0)
    assert not {"DATA_DIR", "MODEL", "DATASET"} & set(plain)
    full = identity_env(
        make_job(
            model="bert",
            dataset="wiki",
            dataVolume={"claimName": "corpus", "mountPath": "/mnt/corpus"},
            checkpointDir="/ckpt",
            checkpointInterval=5,
        ),
        0,
        0,
    )
    assert (full["MODEL"], full["DATASET"], full["DATA_DIR"]) == ("bert", "wiki", "/mnt/corpus")
    assert (full["CHECKPOINT_DIR"], full["CHECKPOINT_INTERVAL"]) == ("/ckpt/u-1", "5")
    assert identity_env(make_job(dataVolume={"claimName": "corpus"}), 0, 0)["DATA_DIR"] == "/data"


@pytest.mark.parametrize(
    ("gpus", "networking", "backend"),
    [
        (0, None, "gloo"),
        (1, None, "nccl"),
        (8, None, "nccl"),
        (2, {"backend": "gloo"}, "gloo"),
        (0, {"backend": "nccl"}, "nccl"),
        (4, {"masterPort": 1234}, "nccl"),
    ],
)
def test_distributed_backend_defaults_and_override(gpus: int, networking: dict | None, backend: str) -> None:
    job = make_job(gpuPerWorker=gpus, **({"networking": networking} if networking else {}))
    assert job.spec.backend == backend
    assert identity_env(job, 0, 0)["DISTRIBUTED_BACKEND"] == backend
    assert worker_context(job, 0).backend == backend


@pytest.mark.parametrize(("workers", "gpus", "index"), [(1, 0, 0), (3, 0, 2), (4, 8, 1), (10, 2, 9)])
def test_worker_context_names_every_peer_through_the_service(workers: int, gpus: int, index: int) -> None:
    ctx = worker_context(make_job(workers=workers, gpuPerWorker=gpus, networking={"masterPort": 4000}), index)
    assert ctx.hosts == tuple(f"mnist-worker-{i}.mnist-workers.ml.svc" for i in range(workers))
    assert (ctx.index, ctx.workers, ctx.port, ctx.processes_per_worker) == (index, workers, 4000, max(gpus, 1))
    assert (ctx.job_name, ctx.namespace, ctx.master_host) == ("mnist", "ml", "mnist-worker-0.mnist-workers.ml.svc")


@pytest.mark.parametrize("framework", k.FRAMEWORKS)
def test_env_order_is_framework_identity_hyperparameters_then_user(framework: str) -> None:
    user_env = [
        {"name": "LOG_LEVEL", "value": "debug"},
        {"name": "RUN_ID", "value": "$(TRAININGJOB_NAME)-$(RANK)"},
        {"name": "MY_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    job = make_job(framework=framework, hyperparameters={"lr": 0.1, "epochs": 3}, env=user_env)
    env = worker_env(job, 1, 0)
    contract = list(framework_for(framework).worker_env(worker_context(job, 1)))
    identity = list(identity_env(job, 1, 0))
    expected = [*contract, *identity, "HYPERPARAM_EPOCHS", "HYPERPARAM_LR", "POD_NAME", "POD_IP"]
    assert names(env) == [*expected, "LOG_LEVEL", "RUN_ID", "MY_HOST_IP"]
    assert env[-3:] == user_env, "user entries are passed through untouched (valueFrom included)"
    assert all(set(e) == {"name", "value"} and isinstance(e["value"], str) for e in env[:-5])


def test_worker_env_values_for_a_pytorch_rank() -> None:
    env = {e["name"]: e.get("value") for e in worker_env(make_job(workers=3, hyperparameters={"lr": 0.5}), 2, 4)}
    assert env["RANK"] == "2"
    assert env["WORLD_SIZE"] == "3"
    assert env["MASTER_ADDR"] == "mnist-worker-0.mnist-workers.ml.svc"
    assert env["TRAININGJOB_WORKER_INDEX"] == "2"
    assert env["TRAININGJOB_RESTART_COUNT"] == "4"
    assert env["RESUME_FROM_CHECKPOINT"] == "true"
    assert env["HYPERPARAM_LR"] == "0.5"


def test_worker_env_does_not_alias_the_job_spec() -> None:
    job = make_job(env=[{"name": "A", "value": "1"}])
    env = worker_env(job, 0, 0)
    env.append({"name": "B", "value": "2"})
    assert names(worker_env(job, 0, 0))[-1] == "A"


# Keys as validation accepts them: a letter or underscore, then letters, digits, '_', '.', '-'.
hyperparameter_keys = st.builds(
    str.__add__, st.sampled_from("abXY_"), st.text(alphabet="abcdefgXYZ_-.019", max_size=11)
)
hyperparameter_values = st.one_of(
    st.booleans(), st.integers(), st.floats(allow_nan=False), st.text("ab $-", max_size=8)
)


# Generous limits: the first run on a fresh machine also builds Hypothesis' caches.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    framework=st.sampled_from(k.FRAMEWORKS),
    workers=st.integers(min_value=1, max_value=64),
    data=st.data(),
    hyperparameters=st.dictionaries(hyperparameter_keys, hyperparameter_values, max_size=8),
    attempt=st.integers(min_value=0, max_value=100),
    gpus=st.integers(min_value=0, max_value=8),
)
def test_env_names_are_unique_in_every_worker_env(
    framework: str, workers: int, data: st.DataObject, hyperparameters: dict, attempt: int, gpus: int
) -> None:
    hp_names = [hyperparameter_env_name(key) for key in hyperparameters]
    assume(len(set(hp_names)) == len(hp_names))  # colliding keys are rejected by validation before any pod exists
    # every key keeps its own name, and a guide name is added only where no other key claims it
    hp_names += [name for name in map(guide_hyperparameter_env_name, hyperparameters) if name and name not in hp_names]
    hp_names = [name for name in hp_names if name in hyperparameter_env(hyperparameters)]
    index = data.draw(st.integers(min_value=0, max_value=workers - 1))
    job = make_job(
        framework=framework,
        workers=workers,
        gpuPerWorker=gpus,
        hyperparameters=hyperparameters,
        model="m",
        dataVolume={"claimName": "d"},
        env=[{"name": "USER_A", "value": "a"}],
    )
    env = names(worker_env(job, index, attempt))
    assert len(env) == len(set(env)), sorted(n for n in env if env.count(n) > 1)
    assert set(hp_names) <= set(env)
