"""What a user sees of a real XGBoost job (examples/xgboost/, on the local process nodes) is true, and stopping it
is safe: a fast job Succeeds at 100 %; a suspended job stops within seconds with a checkpoint that its resume
starts from; a job deleted and submitted again starts from scratch and keeps its own checkpoints; `tj delete
--wait` returns only once the workers are gone.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.jobs import create_job
from tests.kube import Kube
from tests.operator_harness import REPO
from tests.real_roles import log_of, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def xgboost_job(name: str, **hyperparameters: Any) -> dict[str, Any]:
    """The XGBoost example as its README applies it, renamed, with `hyperparameters` over its own."""
    body = yaml.safe_load((REPO / "examples" / "xgboost" / "trainingjob-local.yaml").read_text())
    body["metadata"]["name"] = name
    body["spec"]["hyperparameters"].update(hyperparameters)
    return body


def chief_log(kube: Kube, namespace: str, job: str) -> str:
    return log_of(kube, namespace, f"{job}-worker-0")


def sdk_job(name: str, script: str, workers: int = 1) -> dict[str, Any]:
    """`script` run by the XGBoost example's image, which carries the SDK as `trainingjob_sdk`."""
    body = xgboost_job(name)
    body["spec"].update(workers=workers, command=["python", "-c", script], hyperparameters={})
    return body


# A loop as the SDK's README writes it: progress, then a checkpoint, each epoch; four epochs in milliseconds, and
# no flush() at the end (the SDK's own exit flush is what delivers the last report).
FAST = """
import trainingjob_sdk as sdk
for epoch in range(1, 5):
    sdk.report_progress(epoch=epoch, total_epochs=4, loss=1.0 / epoch)
    sdk.save_checkpoint(lambda path: path.write_text(str(epoch)), epoch=epoch, suffix=".txt")
"""


def test_a_fast_real_job_succeeds_at_100_percent(kube: Kube, namespace: str) -> None:
    """Every report after the first falls in the SDK's throttle window; the checkpoint reports (never throttled)
    must carry the epochs along. They used to drop them, and the job Succeeded at 25 % with an ETA of seconds."""
    create_job(kube, namespace, sdk_job("fast", FAST))
    status = wait_status(kube, namespace, "fast", lambda s: s.get("phase") == "Succeeded", "Succeeded")
    progress = status["progress"]
    assert (progress["epoch"], progress["totalEpochs"], progress["percent"]) == (4, 4, 100.0), progress
    assert progress.get("estimatedRemainingSeconds", 0) == 0
    assert status["lastCheckpoint"]["epoch"] == 4
