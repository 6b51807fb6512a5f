"""The worker pod manifest `builders/pod.py` produces, field by field.

Proves: name, hostname and subdomain give every worker its DNS name; the operator's labels (job-name, role,
worker-index, attempt, spec-hash, managed-by) are set next to the user's podLabels; the ownerReference makes the job
the controlling owner; the kubelet never restarts a worker; GPUs are requested with requests == limits only when
asked for, merged with the user's resources; cluster GPU placement defaults apply only with GPUs and the job's own
scheduling wins; the restricted security defaults apply unless spec.securityContext replaces them; the operator's
volumes (shared memory, config, data) come first and the user's are appended; and, as a property, every pod of a
job has a distinct name and the same spec-hash.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.builders import pod as pod_module
from trainingjob.builders.common import spec_hash
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.config import OperatorConfig

CONFIG = OperatorConfig()
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def make_job(name: str = "mnist", **spec: Any) -> TrainingJob:
    body = {"framework": "pytorch", "image": "train:1", "command": ["python", "train.py"], "workers": 4, **spec}
    return TrainingJob.from_body({"metadata": {"name": name, "namespace": "ml", "uid": "uid-123"}, "spec": body})


def build(index: int = 0, attempt: int = 0, config: OperatorConfig = CONFIG, **spec: Any) -> dict[str, Any]:
    return desired_worker_pod(make_job(**spec), index, attempt, config)


def container(pod: dict[str, Any]) -> dict[str, Any]:
    [only] = pod["spec"]["containers"]
    return only


@pytest.mark.parametrize("index", [0, 1, 3, 1023])
def test_name_hostname_and_subdomain(index: int) -> None:
    pod = build(index, workers=1024)
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert pod["metadata"]["name"] == f"mnist-worker-{index}"
    assert pod["metadata"]["namespace"] == "ml"
    assert pod["spec"]["hostname"] == f"mnist-worker-{index}"
    assert pod["spec"]["subdomain"] == "mnist-workers"


@pytest.mark.parametrize(("index", "attempt"), [(0, 0), (2, 0), (3, 5)])
def test_operator_labels(index: int, attempt: int) -> None:
    job = make_job()
    labels = desired_worker_pod(job, index, attempt, CONFIG)["metadata"]["labels"]
    assert labels == {
        "ml.example.com/job-name": "mnist",
        "app.kubernetes.io/managed-by": "trainingjob-operator",
        "ml.example.com/role": "worker",
        "ml.example.com/worker-index": str(index),
        "ml.example.com/attempt": str(attempt),
        "ml.example.com/spec-hash": spec_hash(job),
        "trainingjob.ml.example.com/worker": "mnist",  # seed 001's label, for its kubectl checks
    }


def test_user_pod_labels_and_annotations_are_kept() -> None:
    pod = build(podLabels={"team": "vision", "app": "resnet"}, podAnnotations={"note": "x", "sim/complete": "2s"})
    labels = pod["metadata"]["labels"]
    assert (labels["team"], labels["app"]) == ("vision", "resnet")
    assert labels[k.LABEL_ROLE] == "worker"
    assert pod["metadata"]["annotations"] == {"note": "x", "sim/complete": "2s"}
    assert build()["metadata"]["annotations"] == {}


@pytest.mark.parametrize(
    "key",
    [
        k.LABEL_MANAGED_BY,
        k.LABEL_JOB_NAME,
        k.LABEL_ROLE,
        k.LABEL_WORKER_INDEX,
        k.LABEL_ATTEMPT,
        k.LABEL_SPEC_HASH,
        k.LABEL_LAB_WORKER,
    ],
)
def test_user_pod_labels_cannot_override_operator_labels(key: str) -> None:
    # app.kubernetes.io/managed-by: Helm is what Helm charts set; the schema only rejects ml.example.com/ keys.
    job = make_job(podLabels={key: "Helm", "team": "vision"})
    labels = desired_worker_pod(job, 1, 2, CONFIG)["metadata"]["labels"]
    ours = {
        k.LABEL_MANAGED_BY: k.MANAGED_BY,
        k.LABEL_JOB_NAME: "mnist",
        k.LABEL_ROLE: "worker",
        k.LABEL_WORKER_INDEX: "1",
        k.LABEL_ATTEMPT: "2",
        k.LABEL_SPEC_HASH: spec_hash(job),
        k.LABEL_LAB_WORKER: "mnist",
    }
    assert labels[key] == ours[key]
    assert labels["team"] == "vision"


def test_owner_reference_makes_the_job_the_controller() -> None:
    assert build()["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "ml.example.com/v1",
            "kind": "TrainingJob",
            "name": "mnist",
            "uid": "uid-123",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_pod_spec_basics() -> None:
    pod = build(args=["--epochs", "3"], networking={"masterPort": 23456})
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["enableServiceLinks"] is False
    c = container(pod)
    assert (c["name"], c["image"], c["command"], c["args"]) == (
        "trainer",
        "train:1",
        ["python", "train.py"],
        ["--epochs", "3"],
    )
    assert c["ports"] == [{"name": "dist", "containerPort": 23456, "protocol": "TCP"}]
    assert "args" not in container(build())


def test_no_resources_without_gpus_or_user_resources() -> None:
    assert "resources" not in container(build())


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_gpu_requests_equal_limits(gpus: int) -> None:
    resources = container(build(gpuPerWorker=gpus))["resources"]
    assert resources == {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}


@pytest.mark.parametrize(
    ("gpus", "user", "expected"),
    [
        (0, {"requests": {"cpu": "2"}}, {"requests": {"cpu": "2"}}),
        (0, {"limits": {"memory": "8Gi"}}, {"limits": {"memory": "8Gi"}}),
        (
            2,
            {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi"}},
            {
                "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"},
                "limits": {"memory": "16Gi", "nvidia.com/gpu": "2"},
            },
        ),
        (
            1,
            {"requests": {"cpu": "1"}},
            {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
        ),
    ],
)
def test_gpu_resources_merge_with_user_resources(gpus: int, user: dict, expected: dict) -> None:
    assert container(build(gpuPerWorker=gpus, resources=user))["resources"] == expected


def test_no_placement_without_gpus_or_scheduling() -> None:
    spec = build()["spec"]
    for key in (
        "nodeSelector",
        "tolerations",
        "affinity",
        "priorityClassName",
        "schedulerName",
        "serviceAccountName",
        "imagePullSecrets",
    ):
        assert key not in spec


def test_gpu_defaults_apply_only_with_gpus() -> None:
    spec = build(gpuPerWorker=1)["spec"]
    assert "nodeSelector" not in spec, "the nvidia.com/gpu request alone finds GPU nodes; no default label"
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_job_scheduling_wins_and_appends() -> None:
    toleration = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    scheduling = {
        "nodeSelector": {"accelerator": "a100", "zone": "z1"},
        "tolerations": [toleration],
        "affinity": affinity,
        "priorityClassName": "high",
        "schedulerName": "volcano",
    }
    spec = build(
        gpuPerWorker=2, scheduling=scheduling, serviceAccountName="trainer", imagePullSecrets=[{"name": "regcred"}]
    )["spec"]
    assert spec["nodeSelector"] == {"accelerator": "a100", "zone": "z1"}
    assert spec["tolerations"] == [*CONFIG.gpu_tolerations, toleration]
    assert (spec["affinity"], spec["priorityClassName"], spec["schedulerName"]) == (affinity, "high", "volcano")
    assert (spec["serviceAccountName"], spec["imagePullSecrets"]) == ("trainer", [{"name": "regcred"}])
    cpu_only = build(scheduling={"nodeSelector": {"zone": "z1"}, "tolerations": [toleration]})["spec"]
    assert (cpu_only["nodeSelector"], cpu_only["tolerations"]) == ({"zone": "z1"}, [toleration])


def test_custom_operator_config_is_used() -> None:
    config = OperatorConfig(gpu_node_selector={"gpu": "yes"}, gpu_tolerations=[])
    spec = build(gpuPerWorker=1, config=config)["spec"]
    assert spec["nodeSelector"] == {"gpu": "yes"}
    assert "tolerations" not in spec


def test_restricted_security_defaults() -> None:
    pod = build()
    assert container(pod)["securityContext"] == RESTRICTED_CONTAINER
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def test_outside_restricted_namespaces_the_defaults_let_root_images_start() -> None:
    """Everything PodSecurity restricted asks except runAsNonRoot, which a root image cannot meet."""
    pod = desired_worker_pod(make_job(), 0, 0, CONFIG, restricted=False)
    assert container(pod)["securityContext"] == {
        key: value for key, value in RESTRICTED_CONTAINER.items() if key != "runAsNonRoot"
    }
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_the_spec_label_marks_the_spec_the_pod_was_built_for() -> None:
    pod = desired_worker_pod(make_job(), 0, 0, CONFIG, spec_label="abc")
    assert pod["metadata"]["labels"][k.LABEL_SPEC_HASH] == "abc"


def test_spec_security_context_replaces_the_defaults() -> None:
    custom = {"runAsUser": 0, "privileged": True}
    pod = build(securityContext=custom)
    assert container(pod)["securityContext"] == custom
    assert "securityContext" not in pod["spec"], "the pod-level restricted context is omitted too"


def test_built_pods_do_not_share_the_security_defaults() -> None:
    saved = copy.deepcopy((pod_module.RESTRICTED_CONTAINER_SECURITY, pod_module.RESTRICTED_POD_SECURITY))
    try:
        first = build()
        container(first)["securityContext"]["runAsNonRoot"] = False
        first["spec"]["securityContext"]["runAsUser"] = 0
        second = build(index=1)
        assert container(second)["securityContext"] == RESTRICTED_CONTAINER
        assert "runAsUser" not in second["spec"]["securityContext"]
    finally:  # undo the leak, so other tests still see the real defaults
        for constant, original in zip(
            (pod_module.RESTRICTED_CONTAINER_SECURITY, pod_module.RESTRICTED_POD_SECURITY), saved, strict=True
        ):
            constant.clear()
            constant.update(original)


def test_operator_volumes_and_mounts() -> None:
    pod = build()
    assert pod["spec"]["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "tj-config", "configMap": {"name": "mnist-config"}},
    ]
    assert container(pod)["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tj-config", "mountPath": "/etc/trainingjob", "readOnly": True},
    ]


@pytest.mark.parametrize(
    ("data_volume", "read_only", "path"),
    [
        ({"claimName": "imagenet"}, True, "/data"),
        ({"claimName": "imagenet", "readOnly": False}, False, "/data"),
        ({"claimName": "imagenet", "mountPath": "/mnt/in"}, True, "/mnt/in"),
        ({"claimName": "imagenet", "readOnly": False, "mountPath": "/scratch"}, False, "/scratch"),
    ],
)
def test_data_volume(data_volume: dict, read_only: bool, path: str) -> None:
    pod = build(dataVolume=data_volume)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
    mount = next(m for m in container(pod)["volumeMounts"] if m["name"] == "data")
    assert volume == {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": read_only}}
    assert mount == {"name": "data", "mountPath": path, "readOnly": read_only}


def test_user_volumes_and_mounts_are_appended() -> None:
    volumes = [{"name": "cache", "emptyDir": {}}, {"name": "creds", "secret": {"secretName": "s3"}}]
    mounts = [{"name": "cache", "mountPath": "/cache"}, {"name": "creds", "mountPath": "/creds", "readOnly": True}]
    pod = build(dataVolume={"claimName": "d"}, volumes=volumes, volumeMounts=mounts)
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["dshm", "tj-config", "data", "cache", "creds"]
    assert pod["spec"]["volumes"][-2:] == volumes
    assert [m["name"] for m in container(pod)["volumeMounts"]] == ["dshm", "tj-config", "data", "cache", "creds"]
    assert container(pod)["volumeMounts"][-2:] == mounts


@pytest.mark.parametrize(("attempt", "resume"), [(0, "false"), (1, "true"), (3, "true")])
def test_container_env_ordering_and_attempt(attempt: int, resume: str) -> None:
    user = [{"name": "LOG_LEVEL", "value": "info"}]
    env = container(build(index=2, attempt=attempt, env=user, hyperparameters={"lr": 0.01}))["env"]
    by_name = {e["name"]: e.get("value") for e in env}
    assert env[0] == {"name": "MASTER_ADDR", "value": "mnist-worker-0.mnist-workers.ml.svc"}
    assert env[-1] == user[0]
    assert (by_name["RANK"], by_name["HYPERPARAM_LR"]) == ("2", "0.01")
    assert by_name["RESUME_FROM_CHECKPOINT"] == resume
    assert by_name["TRAININGJOB_RESTART_COUNT"] == str(attempt)


@settings(max_examples=40, deadline=None)
@given(
    workers=st.integers(min_value=1, max_value=40),
    attempt=st.integers(min_value=0, max_value=9),
    gpus=st.integers(min_value=0, max_value=8),
    hyperparameters=st.dictionaries(st.sampled_from(["lr", "epochs", "momentum"]), st.integers(), max_size=3),
)
def test_every_pod_of_a_job_has_a_distinct_name_and_the_same_spec_hash(
    workers: int, attempt: int, gpus: int, hyperparameters: dict
) -> None:
    job = make_job(workers=workers, gpuPerWorker=gpus, hyperparameters=hyperparameters)
    pods = [desired_worker_pod(job, i, attempt, CONFIG) for i in range(workers)]
    assert len({p["metadata"]["name"] for p in pods}) == workers
    assert {p["metadata"]["labels"][k.LABEL_SPEC_HASH] for p in pods} == {spec_hash(job)}
    assert [p["metadata"]["labels"][k.LABEL_WORKER_INDEX] for p in pods] == [str(i) for i in range(workers)]
    assert all(len(p["metadata"]["name"]) <= 63 for p in pods)


def test_an_object_stores_secret_becomes_every_workers_environment_and_only_scratch_is_mounted() -> None:
    storage = {"type": "s3", "path": "s3://checkpoints/mnist", "secretName": "s3-credentials"}
    pod = build(1, checkpoint={"enabled": True, "storage": storage})
    assert container(pod)["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    env = {e["name"]: e.get("value") for e in container(pod)["env"]}
    assert env["CHECKPOINT_URI"] == "s3://checkpoints/mnist/uid-123"  # the run's own prefix
    assert {"name": "checkpoints", "emptyDir": {}} in pod["spec"]["volumes"]
    assert {"name": "checkpoints", "mountPath": "/checkpoints"} in container(pod)["volumeMounts"]
    disabled = build(1, checkpoint={"enabled": False, "storage": storage})
    assert "envFrom" not in container(disabled) and "envFrom" not in container(build(1))
    assert "checkpoints" not in {volume["name"] for volume in disabled["spec"]["volumes"]}
