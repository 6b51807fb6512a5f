"""The LLMModel planner, pure: children it creates, repairs and deletes, its status, conditions and Events."""

from __future__ import annotations

import copy
import datetime
from pathlib import Path
from typing import Any

import yaml

from trainingjob.api import constants as k
from trainingjob.api.status import Phase
from trainingjob.config import ServingConfig
from trainingjob.operator.llmmodel.apply import creation_events
from trainingjob.operator.runtime.writer import DONE, EXISTED
from trainingjob.planning.actions import CreateChild, DeleteChild, ReplaceChild
from trainingjob.serving import builders
from trainingjob.serving.observed import ObservedServing, SourceJob, child_view
from trainingjob.serving.planner import plan_model
from trainingjob.serving.types import LLMModel, ModelStore

SEED = Path(__file__).resolve().parents[2] / "examples" / "llmmodel" / "seed.yaml"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
CONFIG = ServingConfig(
    image="server:1", gpu_types={"H100": H100}, gpu_tolerations=({"key": "gpu", "operator": "Exists"},)
)


def model(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> LLMModel:
    body = yaml.safe_load(SEED.read_text())
    body["metadata"].update(namespace="ns", uid="uid-1", generation=1, resourceVersion="1")
    body["spec"].update(spec or {})
    body["status"] = status or {}
    return LLMModel.from_body(body)


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def observed_from(manifests: list[dict[str, Any]], rollout: dict[str, Any] | None = None, **kw: Any) -> ObservedServing:
    views = {}
    for manifest in manifests:
        body = copy.deepcopy(manifest)
        body["metadata"]["uid"] = f"child-{manifest['kind']}"
        body["metadata"]["generation"] = 1
        if manifest["kind"] == "Deployment":
            body["status"] = rollout or {}
        views[manifest["kind"]] = child_view(body)
    return ObservedServing(children=views, **kw)


def test_the_seed_becomes_a_deployment_of_three_gpu_replicas_and_a_service() -> None:
    plan = plan_model(model(), ObservedServing(), CONFIG, NOW)
    created = {a.kind: a.manifest for a in plan.actions if isinstance(a, CreateChild)}
    assert set(created) == {"Deployment", "Service"} and len(plan.actions) == 2
    deployment = created["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == H100 and pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    server = pod["containers"][0]
    assert server["image"] == "server:1" and server["resources"]["limits"] == {k.GPU_RESOURCE: "1"}
    assert {"name": "MODEL_NAME", "value": "llama-3-70b"} in server["env"], "no modelName: metadata.name"
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("LLMModel", "uid-1", True)
    assert plan.status["selector"] == f"{k.LABEL_MODEL}=llama-3-70b"
    assert plan.status["modelName"] == "llama-3-70b"
    assert conditions(plan.status) == {
        "Available": ("False", "DeploymentNotCreated"),
        "Progressing": ("True", "Reconciling"),
        "Degraded": ("False", "AsExpected"),
    }
    assert [e.reason for e in plan.events] == []  # Created comes from the applier, for what it really created


def test_created_events_only_for_children_this_apply_really_created() -> None:
    """A create retried while the cache lags finds the object there (409, created=False): no second Event."""
    plan = plan_model(model(), ObservedServing(), CONFIG, NOW)
    service, deployment = (a for a in plan.actions if isinstance(a, CreateChild))
    outcomes = [DONE if a is service else EXISTED for a in plan.actions]
    (event,) = creation_events(plan.actions, outcomes)
    assert (event.reason, event.message) == ("Created", f"created Service {service.name}")
    assert creation_events(plan.actions, [EXISTED] * len(plan.actions)) == []
    assert deployment.kind == "Deployment"


def test_a_gpu_type_without_a_mapping_only_requests_gpus() -> None:
    plan = plan_model(model({"gpuType": "B200", "gpusPerReplica": 4}), ObservedServing(), CONFIG, NOW)
    pod = next(a.manifest for a in plan.actions if a.kind == "Deployment")["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod and pod["containers"][0]["resources"]["limits"] == {k.GPU_RESOURCE: "4"}


def test_a_complete_rollout_is_available_and_plans_nothing() -> None:
    seed = model()
    children = [builders.deployment(seed, CONFIG, None), builders.service(seed)]
    rollout = {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3}
    plan = plan_model(seed, observed_from(children, rollout), CONFIG, NOW)
    assert plan.actions == [] and plan.events == []
    assert plan.status["readyReplicas"] == 3 and plan.status["replicas"] == 3
    assert conditions(plan.status) == {
        "Available": ("True", "AllReplicasAvailable"),
        "Progressing": ("False", "RolloutComplete"),
        "Degraded": ("False", "AsExpected"),
    }


def test_an_edited_deployment_is_put_back_and_a_spec_change_rolls_out() -> None:
    seed = model()
    edited = builders.deployment(seed, CONFIG, None)
    edited["spec"]["replicas"] = 1
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "someone-else:2"
    plan = plan_model(seed, observed_from([edited, builders.service(seed)]), CONFIG, NOW)
    assert [type(a) for a in plan.actions] == [ReplaceChild]
    assert plan.actions[0].manifest["spec"]["replicas"] == 3
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "DriftRepaired")]
    scaled = model({"replicas": 5})
    current = [builders.deployment(seed, CONFIG, None), builders.service(seed)]
    plan = plan_model(scaled, observed_from(current), CONFIG, NOW)
    assert [(type(a), a.manifest["spec"]["replicas"]) for a in plan.actions] == [(ReplaceChild, 5)]
    assert [e.reason for e in plan.events] == ["Updated"]


def test_a_model_waits_for_its_training_job_and_then_mounts_its_checkpoints() -> None:
    waiting = model({"source": {"trainingJob": "train"}})
    running = plan_model(waiting, ObservedServing(job=SourceJob(Phase.RUNNING, "train-checkpoints")), CONFIG, NOW)
    assert [a.kind for a in running.actions] == ["Service"]
    assert conditions(running.status)["Progressing"] == ("True", "WaitingForTraining")
    assert running.status["source"] == {"trainingJob": "train", "jobPhase": "Running"}
    after = model({"source": {"trainingJob": "train"}}, status=running.status)
    done = plan_model(
        after, ObservedServing(job=SourceJob(Phase.SUCCEEDED, "train-checkpoints", run_dir="uid-7")), CONFIG, NOW
    )
    deployment = next(a.manifest for a in done.actions if a.kind == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "model", "persistentVolumeClaim": {"claimName": "train-checkpoints", "readOnly": True}}
    ]
    # The job's own run directory in the claim (its uid), not an earlier run's of the same name.
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "model", "mountPath": k.MODEL_MOUNT_PATH, "readOnly": True, "subPath": "uid-7"}
    ]
    assert {"name": "MODEL_DIR", "value": k.MODEL_MOUNT_PATH} in pod["containers"][0]["env"]
    assert "SourceReady" in [e.reason for e in done.events]
    assert done.status["source"] == {
        "trainingJob": "train",
        "jobPhase": "Succeeded",
        "claimName": "train-checkpoints",
        "path": "uid-7",
    }
    chosen = model({"source": {"trainingJob": "train", "path": "exported"}}, status=running.status)
    served = plan_model(
        chosen, ObservedServing(job=SourceJob(Phase.SUCCEEDED, "train-checkpoints", run_dir="uid-7")), CONFIG, NOW
    )
    mounts = next(a.manifest for a in served.actions if a.kind == "Deployment")["spec"]["template"]["spec"]
    assert mounts["containers"][0]["volumeMounts"][0]["subPath"] == "exported"


def test_a_failed_or_checkpointless_source_job_degrades_the_model() -> None:
    waiting = model({"source": {"trainingJob": "train"}})
    failed = plan_model(waiting, ObservedServing(job=SourceJob(Phase.FAILED, "train-checkpoints")), CONFIG, NOW)
    assert conditions(failed.status)["Degraded"] == ("True", "TrainingFailed")
    assert ("Warning", "TrainingFailed") in [(e.type, e.reason) for e in failed.events]
    assert not any(a.kind == "Deployment" for a in failed.actions)
    nowhere = plan_model(waiting, ObservedServing(job=SourceJob(Phase.SUCCEEDED, None)), CONFIG, NOW)
    assert conditions(nowhere.status)["Degraded"] == ("True", "NoCheckpointVolume")
    missing = plan_model(waiting, ObservedServing(), CONFIG, NOW)
    assert conditions(missing.status)["Progressing"] == ("True", "WaitingForTraining")


def test_a_model_in_s3_is_downloaded_by_the_server_with_the_credentials_of_its_secret() -> None:
    store = ModelStore("s3://checkpoints/ns/digits", "s3-credentials")
    direct = model({"source": {"uri": store.uri, "secretName": store.secret_name}})
    job = model({"source": {"trainingJob": "train"}})
    for planned, observed in (
        (direct, ObservedServing()),
        (job, ObservedServing(job=SourceJob(Phase.SUCCEEDED, None, store))),
    ):
        plan = plan_model(planned, observed, CONFIG, NOW)
        pod = next(a.manifest for a in plan.actions if a.kind == "Deployment")["spec"]["template"]["spec"]
        [server] = pod["containers"]
        assert pod["volumes"] == [{"name": "model", "emptyDir": {}}]
        assert server["volumeMounts"] == [{"name": "model", "mountPath": k.MODEL_MOUNT_PATH}]
        assert server["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
        env = {e["name"]: e["value"] for e in server["env"]}
        assert (env["CHECKPOINT_URI"], env["CHECKPOINT_DIR"]) == (store.uri, k.MODEL_MOUNT_PATH)
        assert plan.status["source"]["uri"] == store.uri
    running = plan_model(job, ObservedServing(job=SourceJob(Phase.RUNNING, None, store)), CONFIG, NOW)
    assert conditions(running.status)["Progressing"] == ("True", "WaitingForTraining")


def test_a_model_name_given_is_the_name_served() -> None:
    plan = plan_model(model({"modelName": "llama-2-7b"}), ObservedServing(), CONFIG, NOW)
    deployment = next(a.manifest for a in plan.actions if a.kind == "Deployment")
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "MODEL_NAME", "value": "llama-2-7b"} in server["env"]
    assert (plan.status["modelName"], plan.status["url"].rsplit("/", 1)[1]) == ("llama-2-7b", "llama-2-7b:predict")


def test_autoscaling_adds_an_autoscaler_of_the_model_and_removing_it_deletes_it() -> None:
    scaled = model({"autoscaling": {"minReplicas": 2, "maxReplicas": 6, "targetCPUUtilizationPercentage": 70}})
    plan = plan_model(scaled, ObservedServing(), CONFIG, NOW)
    hpa = next(a.manifest for a in plan.actions if a.kind == "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": k.MODEL_API_VERSION,
        "kind": "LLMModel",
        "name": "llama-3-70b",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    current = [builders.deployment(scaled, CONFIG, None), builders.service(scaled), hpa]
    plan = plan_model(model(), observed_from(current), CONFIG, NOW)
    assert [type(a) for a in plan.actions if a.kind == "HorizontalPodAutoscaler"] == [DeleteChild]


def test_a_namesake_of_another_owner_is_left_alone_and_reported() -> None:
    seed = model()
    foreign = builders.deployment(seed, CONFIG, None)
    foreign["metadata"]["ownerReferences"] = []
    plan = plan_model(seed, observed_from([foreign, builders.service(seed)]), CONFIG, NOW)
    assert plan.actions == []
    assert conditions(plan.status)["Degraded"] == ("True", "NameTaken")


def test_a_stuck_rollout_is_degraded() -> None:
    seed = model()
    stuck = {
        "observedGeneration": 1,
        "replicas": 3,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
    }
    plan = plan_model(
        seed, observed_from([builders.deployment(seed, CONFIG, None), builders.service(seed)], stuck), CONFIG, NOW
    )
    assert conditions(plan.status)["Degraded"] == ("True", "ProgressDeadlineExceeded")
    assert conditions(plan.status)["Available"] == ("False", "NoReplicasAvailable")
