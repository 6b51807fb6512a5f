"""The env contract and the pods of multi-role and elastic jobs, built without a server.

Proves: TF_CONFIG lists chief, worker and ps (never the evaluator) with each pod's own task; the evaluator gets the
training cluster with task type evaluator; an MPI launcher job's hostfile lists the workers only, its pods get the
rsh agent and the key, its workers run the agent; elastic PyTorch gets torchrun's c10d variables and no static
ranks; role overrides (command, args, resources, gpus, env) apply to their role only; names are <job>-<role>-<i>;
the Service selects every role; fingerprints ignore an elastic job's worker count and the roles' restart policies.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from trainingjob.api import constants as k
from trainingjob.api.replicas import Replica, chief_replica, desired_replicas
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import spec_hash
from trainingjob.builders.configmap import desired_config_data
from trainingjob.builders.pod import desired_worker_pod, framework_children
from trainingjob.builders.service import service_selector
from trainingjob.config import OperatorConfig
from trainingjob.frameworks import mpi

CONFIG = OperatorConfig()


def make_job(framework: str, **spec: Any) -> TrainingJob:
    body = {"framework": framework, "image": "img", "command": ["train"], "workers": 2, **spec}
    return TrainingJob.from_body({"metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": body})


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def pod_of(job: TrainingJob, role: str, index: int = 0) -> dict[str, Any]:
    return desired_worker_pod(job, index, 0, CONFIG, role=role)


def tf_config(job: TrainingJob, role: str, index: int = 0) -> dict[str, Any]:
    return json.loads(env_of(pod_of(job, role, index))["TF_CONFIG"])


PS_JOB = {"roles": {"chief": {}, "ps": {"replicas": 2}, "evaluator": {}}}


def host(role: str, index: int) -> str:
    return f"j-{role}-{index}.j-workers.ns.svc:29500"


def test_tf_config_of_a_parameter_server_cluster_names_every_task_but_the_evaluator() -> None:
    job = make_job("tensorflow", **PS_JOB)
    cluster = {
        "chief": [host("chief", 0)],
        "worker": [host("worker", 0), host("worker", 1)],
        "ps": [host("ps", 0), host("ps", 1)],
    }
    for role, index in (("chief", 0), ("worker", 1), ("ps", 1)):
        assert tf_config(job, role, index) == {
            "cluster": cluster,
            "task": {"type": role, "index": index},
            "environment": "cloud",
        }
    assert tf_config(job, "evaluator") == {
        "cluster": cluster,
        "task": {"type": "evaluator", "index": 0},
        "environment": "cloud",
    }


def test_a_workers_only_tf_config_is_what_it_always_was() -> None:
    assert env_of(pod_of(make_job("tensorflow"), "worker", 1))["TF_CONFIG"] == (
        '{"cluster":{"worker":["j-worker-0.j-workers.ns.svc:29500","j-worker-1.j-workers.ns.svc:29500"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


def test_replicas_names_and_the_chief() -> None:
    job = make_job("tensorflow", **PS_JOB)
    assert desired_replicas(job.spec) == [
        Replica("chief", 0),
        Replica("ps", 0),
        Replica("ps", 1),
        Replica("worker", 0),
        Replica("worker", 1),
        Replica("evaluator", 0),
    ]
    assert chief_replica(job.spec) == Replica("chief", 0)
    assert chief_replica(make_job("tensorflow").spec) == Replica("worker", 0)
    pod = pod_of(job, "ps", 1)
    assert pod["metadata"]["name"] == pod["spec"]["hostname"] == "j-ps-1"
    assert pod["metadata"]["labels"][k.LABEL_ROLE] == "ps"
    assert pod["metadata"]["labels"][k.LABEL_WORKER_INDEX] == "1"
    identity = [(r, i, env_of(pod_of(job, r, i))["TRAININGJOB_IS_CHIEF"]) for r, i in desired_replicas(job.spec)]
    assert [(r, i) for r, i, chief in identity if chief == "true"] == [("chief", 0)]
    assert env_of(pod)["TRAININGJOB_ROLE"] == "ps"


def test_a_role_overrides_command_args_resources_gpus_and_env_for_itself_only() -> None:
    job = make_job(
        "tensorflow",
        args=["--epochs", "3"],
        gpuPerWorker=1,
        resources={"limits": {"cpu": "4"}},
        env=[{"name": "A", "value": "spec"}, {"name": "B", "value": "spec"}],
        roles={
            "ps": {
                "command": ["serve"],
                "resources": {"limits": {"memory": "1Gi"}},
                "env": [{"name": "B", "value": "ps"}],
            },
            "chief": {"args": ["--chief"], "gpus": 2},
            "evaluator": {},
        },
    )
    ps, chief, evaluator, worker = (
        pod_of(job, r)["spec"]["containers"][0] for r in ("ps", "chief", "evaluator", "worker")
    )
    assert (ps["command"], ps.get("args")) == (["serve"], None)
    assert ps["resources"] == {"limits": {"memory": "1Gi"}}  # no GPU: roles default to 0
    assert [(e["name"], e["value"]) for e in ps["env"] if e["name"] in "AB"] == [("A", "spec"), ("B", "ps")]
    assert (chief["command"], chief["args"]) == (["train"], ["--chief"])
    assert chief["resources"]["limits"] == {"cpu": "4", k.GPU_RESOURCE: "2"}
    assert (evaluator["command"], evaluator["args"]) == (["train"], ["--epochs", "3"])
    assert evaluator["resources"] == {"limits": {"cpu": "4"}}
    assert worker["resources"]["limits"] == {"cpu": "4", k.GPU_RESOURCE: "1"}
    assert [(e["name"], e["value"]) for e in worker["env"] if e["name"] in "AB"] == [("A", "spec"), ("B", "spec")]


def test_the_service_stands_for_every_role_of_a_multi_role_job_and_only_workers_otherwise() -> None:
    assert service_selector(make_job("tensorflow", **PS_JOB)) == {k.LABEL_JOB_NAME: "j"}
    assert service_selector(make_job("tensorflow")) == {
        k.LABEL_JOB_NAME: "j",
        k.LABEL_ROLE: "worker",
    }


MPI_JOB = {"workers": 3, "gpuPerWorker": 2, "command": ["mpirun", "python3", "t.py"], "roles": {"launcher": {}}}


def test_an_mpi_launcher_job_starts_ranks_through_the_agent() -> None:
    job = make_job("mpi", **MPI_JOB)
    data = desired_config_data(job)
    assert data["hostfile"] == "".join(f"j-worker-{i}.j-workers.ns.svc slots=2\n" for i in range(3))
    assert data["mpi-agent.py"] == mpi.agent_source() and "def serve()" in data["mpi-agent.py"]
    launcher, worker = pod_of(job, "launcher"), pod_of(job, "worker", 2)
    assert launcher["spec"]["containers"][0]["command"] == ["mpirun", "python3", "t.py"]
    assert worker["spec"]["containers"][0]["command"] == ["python3", "/etc/trainingjob/mpi-agent.py", "serve"]
    for pod in (launcher, worker):
        env = env_of(pod)
        assert env["OMPI_MCA_plm_rsh_agent"] == "python3 /etc/trainingjob/mpi-agent.py"
        assert env["TRAININGJOB_MPI_KEY_FILE"] == "/var/run/secrets/trainingjob/mpi/key"
        assert env["TRAININGJOB_MPI_AGENT_PORT"] == "29500"
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["tj-mpi-key"]["secret"]["secretName"] == "j-mpi-key"
    assert "resources" not in launcher["spec"]["containers"][0]  # the launcher needs no GPU
    [secret] = framework_children(job)  # the framework's child, made the job's
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "j-mpi-key"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert framework_children(job)[0]["data"] != secret["data"]  # a fresh key each time
    fixed = mpi.key_secret("j", b"\x01" * 32)
    assert base64.b64decode(fixed["data"][mpi.KEY_FILE]).decode() == "01" * 32  # hex, as the agent reads it


def test_an_mpi_job_without_a_launcher_keeps_its_old_contract() -> None:
    job = make_job("mpi", command=["mpirun", "x"])
    env = env_of(pod_of(job, "worker"))
    assert "OMPI_MCA_plm_rsh_agent" not in env and set(desired_config_data(job)) == {"hyperparameters.json", "hostfile"}
    assert pod_of(job, "worker")["spec"]["containers"][0]["command"] == ["mpirun", "x"]


ELASTIC = {"workers": 3, "elastic": {"minWorkers": 2, "maxWorkers": 4, "maxRestarts": 7}}


def test_elastic_pytorch_gets_torchruns_c10d_rendezvous_and_no_static_ranks() -> None:
    env = env_of(pod_of(make_job("pytorch", **ELASTIC), "worker", 2))
    pet = {name: value for name, value in env.items() if name.startswith("PET_")}
    assert pet == {
        "PET_NNODES": "2:4",
        "PET_NPROC_PER_NODE": "1",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "j-worker-0.j-workers.ns.svc:29500",
        "PET_RDZV_ID": "j",
        "PET_MAX_RESTARTS": "7",
    }
    assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE", "PET_NODE_RANK"} & set(env)
    # Rank 0 publishes the round's master address in every round, so a worker that joins later is not stuck.
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    # Worker 0 hosts the store, whether or not its own DNS name resolves yet.
    assert env_of(pod_of(make_job("pytorch", **ELASTIC), "worker", 0))["PET_RDZV_ENDPOINT"] == "localhost:29500"


@pytest.mark.parametrize(
    ("before", "after", "same"),
    [
        ({**ELASTIC}, {**ELASTIC, "workers": 4}, True),  # elastic: scaling is not a new worker spec
        ({"workers": 2}, {"workers": 3}, False),  # a gang: it is
        (PS_JOB, {"roles": {**PS_JOB["roles"], "ps": {"replicas": 2, "restartPolicy": "Never"}}}, True),
        (PS_JOB, {"roles": {**PS_JOB["roles"], "ps": {"replicas": 3}}}, False),
        ({**ELASTIC}, {**ELASTIC, "elastic": {"minWorkers": 1, "maxWorkers": 4, "maxRestarts": 7}}, False),
    ],
)
def test_fingerprints_of_role_and_elastic_edits(before: dict, after: dict, same: bool) -> None:
    framework = "pytorch" if "elastic" in before or "roles" not in before else "tensorflow"
    first, second = make_job(framework, **before), make_job(framework, **after)
    assert (spec_hash(first) == spec_hash(second)) is same


def test_defaults_of_the_new_fields_do_not_change_a_fingerprint() -> None:
    plain = make_job("tensorflow", roles={"ps": {}})
    defaulted = make_job("tensorflow", roles={"ps": {"replicas": 1, "gpus": 0}})
    assert spec_hash(plain) == spec_hash(defaulted)
    elastic = make_job("pytorch", elastic={"minWorkers": 1, "maxWorkers": 2})
    assert spec_hash(elastic) == spec_hash(
        make_job("pytorch", elastic={"minWorkers": 1, "maxWorkers": 2, "maxRestarts": 10})
    )
