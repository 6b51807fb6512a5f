"""What the example scripts read, through their pure parsing functions (no ML library needed): hyperparameters from
TRAININGJOB_HYPERPARAMETERS_FILE over the defaults, with bad values as configuration errors; and the launcher
variables the operator really injects for the examples' own manifests (RANK/WORLD_SIZE, TF_CONFIG, DMLC_*, JAX_*),
with single-process defaults without them and inconsistent ones refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit import examples_support
from tests.unit.examples_support import FRAMEWORK_MANIFESTS, FRAMEWORKS, load, manifest
from trainingjob.api import constants as c
from trainingjob.api.types import TrainingJob
from trainingjob.builders.configmap import desired_config_data
from trainingjob.builders.env import worker_env

clean_env = examples_support.clean_env  # autouse: no launcher variable or default reporter leaks into a test

# --- hyperparameters -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hyperparameters_default_without_a_file(framework: str, tmp_path: Path) -> None:
    module = load(framework)
    assert module.parse_hyperparameters(None) == module.DEFAULTS
    assert module.parse_hyperparameters("") == module.DEFAULTS
    assert module.parse_hyperparameters(tmp_path / "missing.json") == module.DEFAULTS


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hyperparameters_from_the_file_take_the_type_of_their_default(framework: str, tmp_path: Path) -> None:
    module = load(framework)
    path = tmp_path / "hyperparameters.json"
    path.write_text(json.dumps({"epochs": 3.0, "learningRate": 1, "seed": "7", "somethingElse": True}))
    params = module.parse_hyperparameters(path)
    assert params == {**module.DEFAULTS, "epochs": 3, "learningRate": 1.0, "seed": 7}
    assert type(params["epochs"]) is int
    assert type(params["learningRate"]) is float
    assert "somethingElse" not in params  # unknown keys are ignored (with a warning)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object, not list"),
        (json.dumps({"epochs": True}), "hyperparameter epochs must be a int, got True"),
        (json.dumps({"epochs": 2.5}), "hyperparameter epochs must be a int, got 2.5"),
        (json.dumps({"learningRate": "fast"}), "hyperparameter learningRate must be a float, got 'fast'"),
        (json.dumps({"epochs": 0}), "hyperparameter epochs must be positive, got 0"),
        (json.dumps({"learningRate": -0.1}), "hyperparameter learningRate must be positive, got -0.1"),
    ],
)
def test_invalid_hyperparameters_are_config_errors(framework: str, content: str, message: str, tmp_path: Path) -> None:
    module = load(framework)
    path = tmp_path / "hyperparameters.json"
    path.write_text(content)
    with pytest.raises(module.ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")):
        module.parse_hyperparameters(path)


def test_framework_specific_hyperparameter_checks(tmp_path: Path) -> None:
    path = tmp_path / "hyperparameters.json"
    cases = [
        ("pytorch", {"numClasses": 1}, "numClasses must be at least 2"),
        ("tensorflow", {"numClasses": 1}, "numClasses must be at least 2"),
        ("xgboost", {"noise": -1}, "noise must not be negative"),
        ("xgboost", {"device": "tpu"}, "device must be cpu, cuda or cuda:<n>"),
        ("jax", {"noise": -1}, "noise must not be negative"),
    ]
    for framework, given, message in cases:
        path.write_text(json.dumps(given))
        with pytest.raises(load(framework).ConfigError, match=message):
            load(framework).parse_hyperparameters(path)
    path.write_text(json.dumps({"device": "cuda:1", "treeMethod": "approx"}))
    params = load("xgboost").parse_hyperparameters(path)
    assert load("xgboost").booster_parameters(params) == {
        "objective": "reg:squarederror",
        "eval_metric": "rmse",
        "eta": 0.1,
        "max_depth": 6,
        "tree_method": "approx",
        "device": "cuda:1",
        "seed": 42,
    }


# --- launcher variables: what the operator injects for the examples' own manifests ---------------------------------


def operator_env(framework: str, kind: str, index: int) -> dict[str, str]:
    body = manifest(framework, kind)
    body["metadata"]["namespace"] = "ml"
    job = TrainingJob.from_body(body)
    # POD_NAME and POD_IP come from the downward API (valueFrom): the node fills them in, not the operator.
    return {entry["name"]: entry["value"] for entry in worker_env(job, index, attempt=0) if "value" in entry}


@pytest.mark.parametrize(("framework", "kind"), FRAMEWORK_MANIFESTS)
def test_scripts_read_the_hyperparameters_file_the_operator_writes(framework: str, kind: str, tmp_path: Path) -> None:
    body = manifest(framework, kind)
    body["metadata"]["namespace"] = "ml"
    data = desired_config_data(TrainingJob.from_body(body))
    path = tmp_path / c.HYPERPARAMETERS_FILE
    path.write_text(data[c.HYPERPARAMETERS_FILE])
    module = load(framework)
    given = body["spec"]["hyperparameters"]
    assert set(given) <= set(module.DEFAULTS), "the manifest sets hyperparameters the script does not know"
    params = module.parse_hyperparameters(path)
    assert {key: params[key] for key in given} == given


@pytest.mark.parametrize(("framework", "kind"), FRAMEWORK_MANIFESTS)
def test_scripts_understand_the_launcher_env_of_their_manifests(framework: str, kind: str) -> None:
    module = load(framework)
    spec = manifest(framework, kind)["spec"]
    workers = spec["workers"]
    for index in range(workers):
        env = operator_env(framework, kind, index)
        if framework == "pytorch":
            # Without torchrun one process per pod; torchrun replaces RANK and WORLD_SIZE per process.
            settings = module.distributed_settings(env)
            assert (settings.rank, settings.world_size, settings.is_chief) == (index, workers, index == 0)
            assert settings.backend == spec["networking"]["backend"]
            assert env["PET_NPROC_PER_NODE"] == str(max(spec["gpuPerWorker"], 1))
            torchrun = {**env, "RANK": str(index * 2 + 1), "WORLD_SIZE": str(workers * 2), "LOCAL_RANK": "1"}
            assert module.distributed_settings(torchrun).local_rank == 1
        elif framework == "tensorflow":
            task = module.parse_tf_config(env["TF_CONFIG"])
            assert (task.task_type, task.index, task.num_workers, task.is_chief) == (
                "worker",
                index,
                workers,
                index == 0,
            )
            expected = {"gloo": "RING", "nccl": "NCCL"}[spec["networking"]["backend"]]
            assert module.communication_implementation(env["DISTRIBUTED_BACKEND"]) == expected
        elif framework == "xgboost":
            settings = module.collective_settings(env)
            assert (settings.num_workers, settings.task_index, settings.is_chief) == (workers, index, index == 0)
            assert (
                settings.tracker_host
                == f"{spec_name(framework, kind)}-worker-0.{spec_name(framework, kind)}-workers.ml.svc"
            )
            assert settings.tracker_port == spec.get("networking", {}).get("masterPort", c.DEFAULT_MASTER_PORT)
            args = settings.worker_args("10.0.0.7")
            assert args["dmlc_tracker_uri"] == "10.0.0.7"
            assert args["dmlc_task_id"] == str(index)
        else:
            process = module.jax_process(env)
            assert (process.num_processes, process.process_id, process.is_chief) == (workers, index, index == 0)
            assert process.coordinator_address == env["JAX_COORDINATOR_ADDRESS"]
            assert process.coordinator_address.endswith(f":{c.DEFAULT_MASTER_PORT}")
            assert process.backend == spec["networking"]["backend"]
        assert env["CHECKPOINT_INTERVAL"] == str(spec["checkpoint"]["interval"])
        assert env["CHECKPOINT_KEEP_LAST"] == str(spec["checkpoint"]["keepLast"])


def spec_name(framework: str, kind: str) -> str:
    return manifest(framework, kind)["metadata"]["name"]


def test_single_process_defaults_without_launcher_env() -> None:
    settings = load("pytorch").distributed_settings({})
    assert (settings.backend, settings.rank, settings.world_size, settings.distributed) == ("gloo", 0, 1, False)
    assert load("tensorflow").parse_tf_config(None).is_chief
    assert load("tensorflow").communication_implementation(None) == "AUTO"
    assert not load("xgboost").collective_settings({}).distributed
    assert not load("jax").jax_process({}).distributed


@pytest.mark.parametrize(
    ("framework", "env", "message"),
    [
        ("pytorch", {"DISTRIBUTED_BACKEND": "mpi"}, "DISTRIBUTED_BACKEND must be one of gloo, nccl"),
        ("pytorch", {"WORLD_SIZE": "2", "RANK": "2"}, "inconsistent RANK=2 WORLD_SIZE=2"),
        ("pytorch", {"WORLD_SIZE": "two"}, "WORLD_SIZE must be an integer"),
        ("xgboost", {"DMLC_NUM_WORKER": "2", "DMLC_TASK_ID": "0"}, "DMLC_TRACKER_URI and DMLC_TRACKER_PORT"),
        ("xgboost", {"DMLC_NUM_WORKER": "2", "DMLC_TASK_ID": "5"}, "DMLC_TASK_ID must be 0 to 1"),
        ("jax", {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, "JAX_COORDINATOR_ADDRESS must be set"),
        ("jax", {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"}, "inconsistent JAX_PROCESS_ID=2"),
    ],
)
def test_inconsistent_launcher_env_is_a_config_error(framework: str, env: dict[str, str], message: str) -> None:
    module = load(framework)
    parse = {
        "pytorch": module.__dict__.get("distributed_settings"),
        "xgboost": module.__dict__.get("collective_settings"),
        "jax": module.__dict__.get("jax_process"),
    }[framework]
    with pytest.raises(module.ConfigError, match=message):
        parse(env)


@pytest.mark.parametrize(
    ("tf_config", "expected"),
    [
        ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}', ("worker", 1, 2, False)),
        (
            '{"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}',
            ("chief", 0, 2, True),
        ),
        (
            '{"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}',
            ("worker", 0, 2, False),
        ),
    ],
)
def test_tf_config_chief(tf_config: str, expected: tuple[str, int, int, bool]) -> None:
    task = load("tensorflow").parse_tf_config(tf_config)
    assert (task.task_type, task.index, task.num_workers, task.is_chief) == expected


@pytest.mark.parametrize(
    "tf_config",
    [
        "{",
        "[]",
        '{"cluster": {"worker": ["a:1"]}}',
        '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
    ],
)
def test_invalid_tf_config_is_a_config_error(tf_config: str) -> None:
    module = load("tensorflow")
    with pytest.raises(module.ConfigError, match="TF_CONFIG"):
        module.parse_tf_config(tf_config)


def test_xgboost_resolves_the_tracker_host_and_gives_up_after_its_timeout() -> None:
    resolve = load("xgboost").resolve
    assert resolve("127.0.0.1", timeout=1) == "127.0.0.1"
    with pytest.raises(RuntimeError, match="cannot resolve the tracker host"):
        resolve("no-such-host.invalid", timeout=0, interval=0)
