"""Each framework's distributed contract, rank by rank, and the reserved-env promise the CRD relies on.

Proves: the exact env every framework emits per rank for several (workers, gpuPerWorker) shapes; TF_CONFIG is valid
JSON that describes one cluster with a distinct task index per worker; the MPI hostfile has one `<host> slots=N`
line per worker; the registry holds exactly the five frameworks of the schema; and every env name the operator
injects (framework contract, job identity, hyperparameters) is reserved, so the CRD's rejection of user env that
would clash covers all of them.
"""

from __future__ import annotations

import json

import pytest

from trainingjob.api import constants as k
from trainingjob.api.constants import RESERVED_ENV_NAMES
from trainingjob.api.types import TrainingJob
from trainingjob.builders.env import downward_env, hyperparameter_env, identity_env, worker_env
from trainingjob.frameworks.base import WorkerContext
from trainingjob.frameworks.jax import Jax
from trainingjob.frameworks.mpi import HOSTFILE, Mpi
from trainingjob.frameworks.pytorch import PyTorch
from trainingjob.frameworks.registry import FRAMEWORKS, framework_for
from trainingjob.frameworks.tensorflow import TensorFlow
from trainingjob.frameworks.xgboost import XGBoost

# (workers, gpuPerWorker) shapes: single worker CPU, small CPU gang, one GPU each, a full 8-GPU node, a wide gang.
SHAPES = [(1, 0), (2, 0), (3, 1), (4, 8), (16, 2)]
PORT = 29500


def host(index: int) -> str:
    return f"mnist-worker-{index}.mnist-workers.ml.svc"


def context(workers: int, gpus: int, index: int, port: int = PORT) -> WorkerContext:
    return WorkerContext(
        job_name="mnist",
        namespace="ml",
        index=index,
        workers=workers,
        hosts=tuple(host(i) for i in range(workers)),
        port=port,
        processes_per_worker=max(gpus, 1),
        backend="nccl" if gpus else "gloo",
    )


def every_rank(workers: int, gpus: int) -> list[WorkerContext]:
    return [context(workers, gpus, i) for i in range(workers)]


def is_reserved(name: str) -> bool:
    return name in RESERVED_ENV_NAMES or name.startswith(k.RESERVED_ENV_PREFIXES)


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_pytorch_env_per_rank(workers: int, gpus: int) -> None:
    for ctx in every_rank(workers, gpus):
        assert PyTorch().worker_env(ctx) == {
            "MASTER_ADDR": host(0),
            "MASTER_PORT": "29500",
            "WORLD_SIZE": str(workers),
            "RANK": str(ctx.index),
            "PET_NNODES": str(workers),
            "PET_NODE_RANK": str(ctx.index),
            "PET_NPROC_PER_NODE": str(max(gpus, 1)),
            "PET_MASTER_ADDR": host(0),
            "PET_MASTER_PORT": "29500",
        }


def test_pytorch_literal_example_with_custom_port() -> None:
    env = PyTorch().worker_env(context(workers=2, gpus=4, index=1, port=23456))
    assert list(env.items()) == [
        ("MASTER_ADDR", "mnist-worker-0.mnist-workers.ml.svc"),
        ("MASTER_PORT", "23456"),
        ("WORLD_SIZE", "2"),
        ("RANK", "1"),
        ("PET_NNODES", "2"),
        ("PET_NODE_RANK", "1"),
        ("PET_NPROC_PER_NODE", "4"),
        ("PET_MASTER_ADDR", "mnist-worker-0.mnist-workers.ml.svc"),
        ("PET_MASTER_PORT", "23456"),
    ]


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_xgboost_env_per_rank(workers: int, gpus: int) -> None:
    for ctx in every_rank(workers, gpus):
        assert XGBoost().worker_env(ctx) == {
            "DMLC_TRACKER_URI": host(0),
            "DMLC_TRACKER_PORT": "29500",
            "DMLC_TASK_ID": str(ctx.index),
            "DMLC_NUM_WORKER": str(workers),
            "MASTER_ADDR": host(0),
            "MASTER_PORT": "29500",
            "WORLD_SIZE": str(workers),
            "RANK": str(ctx.index),
        }


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_jax_env_per_rank(workers: int, gpus: int) -> None:
    for ctx in every_rank(workers, gpus):
        assert Jax().worker_env(ctx) == {
            "JAX_COORDINATOR_ADDRESS": f"{host(0)}:29500",
            "JAX_NUM_PROCESSES": str(workers),
            "JAX_PROCESS_ID": str(ctx.index),
        }


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_tensorflow_env_is_only_tf_config(workers: int, gpus: int) -> None:
    for ctx in every_rank(workers, gpus):
        assert list(TensorFlow().worker_env(ctx)) == ["TF_CONFIG"]


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_tf_config_is_one_cluster_with_distinct_task_indexes(workers: int, gpus: int) -> None:
    configs = [json.loads(TensorFlow().worker_env(ctx)["TF_CONFIG"]) for ctx in every_rank(workers, gpus)]
    expected_cluster = {"worker": [f"{host(i)}:29500" for i in range(workers)]}
    assert all(c["cluster"] == expected_cluster for c in configs)
    assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(workers)]
    assert {c["environment"] for c in configs} == {"cloud"}
    assert len({c["task"]["index"] for c in configs}) == workers


def test_tf_config_literal_example() -> None:
    raw = TensorFlow().worker_env(context(workers=2, gpus=0, index=1, port=2222))["TF_CONFIG"]
    assert json.loads(raw) == {
        "cluster": {"worker": ["mnist-worker-0.mnist-workers.ml.svc:2222", "mnist-worker-1.mnist-workers.ml.svc:2222"]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert " " not in raw  # compact, so `kubectl describe` shows it on one line


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_mpi_env_is_the_same_for_every_rank(workers: int, gpus: int) -> None:
    envs = [Mpi().worker_env(ctx) for ctx in every_rank(workers, gpus)]
    assert all(env == envs[0] for env in envs)
    assert envs[0] == {
        "OMPI_MCA_orte_default_hostfile": "/etc/trainingjob/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": str(max(gpus, 1)),
        "MPI_HOSTFILE": "/etc/trainingjob/hostfile",
    }


@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_mpi_hostfile_has_one_slots_line_per_worker(workers: int, gpus: int) -> None:
    files = [Mpi().config_files(ctx) for ctx in every_rank(workers, gpus)]
    assert all(f == files[0] for f in files), "the ConfigMap is shared, so every rank must see the same hostfile"
    assert list(files[0]) == [HOSTFILE]
    text = files[0][HOSTFILE]
    assert text.endswith("\n")
    assert text.splitlines() == [f"{host(i)} slots={max(gpus, 1)}" for i in range(workers)]


def test_mpi_hostfile_literal_example() -> None:
    assert Mpi().config_files(context(workers=2, gpus=4, index=0)) == {
        "hostfile": "mnist-worker-0.mnist-workers.ml.svc slots=4\nmnist-worker-1.mnist-workers.ml.svc slots=4\n"
    }


@pytest.mark.parametrize("framework", [PyTorch(), TensorFlow(), XGBoost(), Jax()], ids=lambda f: f.name)
def test_env_only_frameworks_have_no_config_files(framework) -> None:
    assert framework.config_files(context(4, 2, 3)) == {}


def test_registry_holds_exactly_the_schema_frameworks() -> None:
    assert set(FRAMEWORKS) == {"pytorch", "tensorflow", "xgboost", "jax", "mpi"}
    assert tuple(FRAMEWORKS) == k.FRAMEWORKS


@pytest.mark.parametrize(
    ("name", "cls"),
    [("pytorch", PyTorch), ("tensorflow", TensorFlow), ("xgboost", XGBoost), ("jax", Jax), ("mpi", Mpi)],
)
def test_framework_for_returns_the_matching_contract(name: str, cls: type) -> None:
    framework = framework_for(name)
    assert isinstance(framework, cls)
    assert framework.name == name


@pytest.mark.parametrize("name", ["", "PyTorch", "torch", "horovod"])
def test_framework_for_unknown_name_raises_key_error(name: str) -> None:
    with pytest.raises(KeyError):
        framework_for(name)


def test_worker_context_master_host_is_the_first_host() -> None:
    assert context(3, 0, 2).master_host == host(0)


# --- every injected env name is reserved -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reserved"),
    [
        ("RANK", True),
        ("HYPERPARAM_LR", True),
        ("TRAININGJOB_X", True),
        ("PATH", False),
        ("MY_RANK", False),
        ("hyperparam_lr", False),
    ],
)
def test_is_reserved_helper_discriminates(name: str, reserved: bool) -> None:
    assert is_reserved(name) is reserved


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("workers", "gpus"), SHAPES)
def test_every_framework_env_name_is_reserved(name: str, workers: int, gpus: int) -> None:
    for ctx in every_rank(workers, gpus):
        emitted = framework_for(name).worker_env(ctx)
        assert emitted, "each framework injects at least one variable"
        assert [n for n in emitted if not is_reserved(n)] == []


def _full_job(framework: str) -> TrainingJob:
    return TrainingJob.from_body(
        {
            "metadata": {"name": "mnist", "namespace": "ml", "uid": "u-1"},
            "spec": {
                "framework": framework,
                "image": "train:1",
                "command": ["python"],
                "workers": 3,
                "gpuPerWorker": 2,
                "model": "resnet50",
                "dataset": "imagenet",
                "dataVolume": {"claimName": "data", "mountPath": "/datasets"},
                "hyperparameters": {"learningRate": 0.1, "batch-size": 64, "nesterov": True},
                "env": [{"name": "USER_VAR", "value": "1"}],
            },
        }
    )


@pytest.mark.parametrize("attempt", [0, 2])
def test_every_identity_env_name_is_reserved(attempt: int) -> None:
    names = identity_env(_full_job("pytorch"), 1, attempt)
    assert {"MODEL", "DATASET", "DATA_DIR"} <= set(names), "the optional variables are part of the check"
    assert [n for n in names if not is_reserved(n)] == []


def test_every_hyperparameter_env_name_is_reserved() -> None:
    names = hyperparameter_env({"learningRate": 1, "a.b": 2, "__x__": 3, "ALREADY": 4})
    assert len(names) == 6, "ours for each key, and the guide's HYPERPARAM_LEARNINGRATE and HYPERPARAM___X__"
    assert [n for n in names if not is_reserved(n)] == []


@pytest.mark.parametrize("framework", k.FRAMEWORKS)
def test_only_user_env_is_unreserved_in_a_full_worker_env(framework: str) -> None:
    env = worker_env(_full_job(framework), 2, 1)
    assert [e["name"] for e in env if not is_reserved(e["name"])] == ["USER_VAR"]


def _job_with(framework: str, **extra: object) -> TrainingJob:
    body = _full_job(framework)
    return TrainingJob.from_body({"metadata": {"name": "mnist", "namespace": "ml"}, "spec": {**body.raw_spec, **extra}})


def test_every_reserved_name_is_injected_for_some_framework_and_spec() -> None:
    """The other direction: a reserved name nobody injects only stops users from setting a variable for nothing."""
    injected = {e["name"] for f in k.FRAMEWORKS for index in (0, 1) for e in worker_env(_full_job(f), index, 1)}
    injected |= set(identity_env(_full_job_with_keep_last(), 0, 0))
    launcher = _job_with("mpi", roles={"launcher": {}})
    elastic = _job_with("pytorch", elastic={"minWorkers": 1, "maxWorkers": 4})
    injected |= {e["name"] for job in (launcher, elastic) for e in worker_env(job, 0, 0)}
    assert sorted(set(RESERVED_ENV_NAMES) - injected) == []
    assert len(RESERVED_ENV_NAMES) == len(set(RESERVED_ENV_NAMES))


def test_identity_names_outside_the_prefixes_are_exactly_the_listed_ones() -> None:
    names = set(identity_env(_full_job_with_keep_last(), 0, 1)) | {e["name"] for e in downward_env()}
    assert {n for n in names if not n.startswith(k.RESERVED_ENV_PREFIXES)} == set(k.IDENTITY_ENV_NAMES)


def _full_job_with_keep_last() -> TrainingJob:
    body = {"metadata": {"name": "mnist", "namespace": "ml"}, "spec": {**_full_job("pytorch").raw_spec}}
    body["spec"]["checkpoint"] = {"keepLast": 3, "enabled": True, "storage": {"type": "s3", "path": "s3://b/ckpt"}}
    return TrainingJob.from_body(body)
