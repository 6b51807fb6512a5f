"""Preemption by a real Kueue (v0.17.0) of a job that really trains: the XGBoost example on the local process nodes,
queued in a ClusterQueue that holds one job at a time, is preempted by a higher-priority job, saves a checkpoint on
its way out (sdk.on_stop), waits in the queue while the other job runs, and once Kueue admits it again trains on
from that checkpoint to the end. No kwok here: every worker is a real process that reads its environment.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.jobs import create_job, env_of, get_job, job_pods
from tests.kube import Kube, wait_until
from tests.kueue_support import Queues
from tests.operator_harness import REPO
from tests.real_roles import RUN_TIMEOUT, log_of, wait_status
from trainingjob.api.times import parse_time
from trainingjob.queueing.workload import PRIORITY_LABEL, QUEUE_LABEL

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kueue_operator")]
EPOCHS = 10
# Each job asks for more than half of the ClusterQueue's CPU (QUOTA), so the two never run together.
QUOTA = {"cpu": "1", "memory": "4Gi"}
LOW_REQUESTS = {"cpu": "400m", "memory": "256Mi"}  # x 2 workers: 800m
HIGH_REQUESTS = {"cpu": "400m", "memory": "256Mi"}  # with the low job's: 1200m, over the quota

# The higher-priority job: a short real run (the SDK as its README writes a loop), so it finishes by itself and
# Kueue takes its quota back as the job's Workload is marked Finished.
SHORT = """
import trainingjob_sdk as sdk
for epoch in range(1, 4):
    sdk.report_progress(epoch=epoch, total_epochs=3, loss=1.0 / epoch)
    sdk.save_checkpoint(lambda path: path.write_text(str(epoch)), epoch=epoch, suffix=".txt")
"""


def queued_example(name: str, queue: str, priority: str, requests: dict[str, str], **spec: Any) -> dict[str, Any]:
    """The XGBoost example as its README applies it, renamed, labelled for `queue` at `priority`, with `spec`."""
    body = yaml.safe_load((REPO / "examples" / "xgboost" / "trainingjob-local.yaml").read_text())
    body["metadata"] = {"name": name, "labels": {QUEUE_LABEL: queue, PRIORITY_LABEL: priority}}
    body["spec"]["resources"]["requests"] = requests
    body["spec"].update(spec)
    return body


def events_of(kube: Kube, namespace: str, name: str) -> list[tuple[str, str, str]]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.type, e.reason, e.message) for e in events]


def uid_of(kube: Kube, namespace: str, name: str) -> str:
    job = get_job(kube, namespace, name)
    assert job is not None
    return job["metadata"]["uid"]


@pytest.mark.timeout(4 * RUN_TIMEOUT)
def test_a_really_training_job_preempted_by_kueue_stops_into_a_checkpoint_and_resumes_from_it(
    kube: Kube, namespace: str, queues: Queues
) -> None:
    process_nodes = {"ml.example.com/node-runtime": "process"}
    preempting = {"preemption": {"withinClusterQueue": "LowerPriority"}}
    cluster_queue = queues.cluster_queue(
        "process",
        queues.flavor("process", process_nodes),
        gpus=0,
        cpu=QUOTA["cpu"],
        memory=QUOTA["memory"],
        **preempting,
    )
    queues.local_queue("team", cluster_queue)
    low, high = queues.priority_class("low", 100), queues.priority_class("high", 1000)

    hyperparameters = {**queued_example("x", "team", low, LOW_REQUESTS)["spec"]["hyperparameters"]}
    hyperparameters.update(epochs=EPOCHS, epochSeconds=2)
    create_job(
        kube, namespace, queued_example("low", "team", low, LOW_REQUESTS, workers=2, hyperparameters=hyperparameters)
    )
    wait_status(kube, namespace, "low", lambda s: (s.get("lastCheckpoint") or {}).get("epoch", 0) >= 2, "epoch 2")
    workers = {pod.metadata.name for pod in job_pods(kube, namespace, "low")}
    assert len(workers) == 2, workers
    uid = uid_of(kube, namespace, "low")

    create_job(
        kube,
        namespace,
        queued_example(
            "high",
            "team",
            high,
            HIGH_REQUESTS,
            workers=1,
            command=["python", "-c", SHORT],
            hyperparameters={},
        ),
    )
    preempted = wait_status(
        kube, namespace, "low", lambda s: (s.get("queue") or {}).get("reason") == "Preempted", "preempted"
    )
    assert preempted["phase"] == "Queued", preempted
    wait_until(lambda: not job_pods(kube, namespace, "low"), RUN_TIMEOUT, "the preempted job's workers to leave")
    stopped = wait_status(kube, namespace, "low", lambda s: (s.get("lastStop") or {}).get("checkpointed"), "its stop")
    stop = stopped["lastStop"]
    saved = stop["checkpoint"]
    assert stop["reason"] == "Preempted", stop
    assert saved["epoch"] >= 2 and saved["path"] == f"/checkpoints/{uid}/ckpt-{saved['epoch']:08d}.json", saved
    assert stopped["lastCheckpoint"]["path"] == saved["path"]
    assert stopped["phase"] == "Queued" and stopped.get("restartCount", 0) == 0, stopped
    assert ("Warning", "Preempted") in [(kind, reason) for kind, reason, _ in events_of(kube, namespace, "low")]

    ran = wait_status(kube, namespace, "high", lambda s: s.get("phase") == "Succeeded", "the high job Succeeded")
    assert ran["progress"]["percent"] == 100.0, ran["progress"]
    assert parse_time(ran["queue"]["admittedTime"]) >= parse_time(stop["time"]), (ran["queue"], stop)

    resumed = f"resuming from {saved['path']} at epoch {saved['epoch'] + 1}"
    chief = "low-worker-0"
    wait_until(lambda: resumed in log_of(kube, namespace, chief), RUN_TIMEOUT, "the resume from the stop's checkpoint")
    again = [pod for pod in job_pods(kube, namespace, "low") if pod.metadata.name == chief]
    assert again and env_of(again[0])["RESUME_FROM_CHECKPOINT"] == saved["path"], again

    done = wait_status(kube, namespace, "low", lambda s: s.get("phase") == "Succeeded", "Succeeded after the resume")
    # The resumed chief boosts on from the saved model (its rounds go on from there) and trains none of the saved
    # epochs again.
    log, first, rounds = log_of(kube, namespace, chief), saved["epoch"] + 1, hyperparameters["roundsPerEpoch"]
    assert f"epoch {first}/{EPOCHS} ({first * rounds} rounds)" in log, log[-3000:]
    assert not [e for e in range(1, first) if f"epoch {e}/{EPOCHS} " in log], log[-3000:]
    assert (done["progress"]["epoch"], done["progress"]["percent"]) == (EPOCHS, 100.0), done["progress"]
    assert done["lastCheckpoint"]["epoch"] == EPOCHS and done["lastCheckpoint"]["path"].startswith(
        f"/checkpoints/{uid}/"
    )
    assert (done["disruptionCount"], done.get("restartCount", 0), done["attempt"]) == (1, 0, 1), done
    resumes = [message for _, reason, message in events_of(kube, namespace, "low") if reason == "Resumed"]
    assert sorted(resumes) == [
        "admitted by Kueue: creating the workers",  # the first admission
        f"admitted by Kueue: recreating the workers, from checkpoint {saved['path']}, saved when they were stopped",
    ], resumes
