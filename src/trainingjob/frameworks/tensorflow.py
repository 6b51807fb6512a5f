"""TensorFlow: TF_CONFIG, the cluster spec and this pod's task, as `TFConfigClusterResolver` reads it.

Workers only (MultiWorkerMirroredStrategy): every pod is a `worker` and worker 0 acts as chief. With spec.roles the
cluster also has a `chief` (the coordinator of ParameterServerStrategy, or Estimator's chief) and `ps` tasks, each
pod reachable at its own DNS name on the job's port. An `evaluator` is not part of the training cluster (TensorFlow
allows at most one; it evaluates the checkpoints the chief writes, as tf.keras.utils.SidecarEvaluator does): its
TF_CONFIG carries the training cluster with task type evaluator, and no other task's cluster lists it, so nobody
waits for it.

What the roles mean to the job lives here too (the hooks of frameworks/base.py): chief 0's success is the job's
(success_rule), and the evaluator is optional (optional_roles): its failure is never a gang restart and never
fails the job; it is replaced alone while the restart policy allows, else left Failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from trainingjob.frameworks.base import WORKER, Plugin, Role, SuccessRule, WorkerContext

CHIEF, PS, EVALUATOR = "chief", "ps", "evaluator"
# spec.roles of a TensorFlow job, as the CRD schema describes them (api/schema_roles.py adds each one's limit).
ROLES = (
    Role(
        CHIEF,
        "TensorFlow's chief: the coordinator of ParameterServerStrategy (it runs the training loop, dispatches "
        "steps to the workers, writes checkpoints), or Estimator's chief. Listed as `chief` in every TF_CONFIG "
        "cluster spec. When the job has a chief, the chief judges success: the job has Succeeded once it exited "
        "0, and the other pods still running (parameter servers, workers, the evaluator) are then deleted; it is "
        "also the pod the operator takes progress reports from.",
        single=True,
        order=-2,
        chief=True,
    ),
    Role(
        PS,
        "TensorFlow's parameter servers (`ps` in TF_CONFIG): they hold the variables and serve the workers until "
        "the job ends; they do not count for success and are deleted once it has Succeeded. A failure restarts "
        "the job by failurePolicy like a worker's.",
        order=-1,
    ),
    Role(
        EVALUATOR,
        "TensorFlow's evaluator: evaluates the checkpoints the training writes (tf.keras.utils.SidecarEvaluator). "
        "As TensorFlow defines it, it is not part of the training cluster: its TF_CONFIG has the cluster of chief, "
        "workers and ps with task type evaluator, and no other task's cluster spec lists it. Its failure never "
        "fails or restarts the training: it is replaced alone (counted in restartCount, after the backoff delay) "
        "while backoffLimit and the restart policy allow, and otherwise left Failed while the training goes on. It "
        "does not count for success and, if still running, is deleted once the job has Succeeded.",
        single=True,
        order=1,
    ),
)
# The task types of the training cluster, in the order TensorFlow's own examples list them.
CLUSTER_ROLES = (CHIEF, WORKER, PS)


def cluster_spec(context: WorkerContext) -> dict[str, list[str]]:
    """{task type: ["host:port", ...]} for every role of the training cluster the job has."""
    return {
        role: [f"{host}:{context.port}" for host in context.hosts_of(role)]
        for role in CLUSTER_ROLES
        if context.hosts_of(role)
    }


class TensorFlow(Plugin):
    name = "tensorflow"
    roles = ROLES
    # The evaluator is not part of the training: its failure is never a gang restart and never fails the job.
    optional_roles = frozenset({EVALUATOR})

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        tf_config = {
            "cluster": cluster_spec(context),
            "task": {"type": context.role, "index": context.index},
            "environment": "cloud",
        }
        return {"TF_CONFIG": json.dumps(tf_config, separators=(",", ":"))}

    def success_rule(self, replicas: Mapping[str, int]) -> SuccessRule | None:
        """With a chief, chief 0 judges success (as Kubeflow's TFJob does); parameter servers and the evaluator
        never count for it."""
        if replicas.get(CHIEF, 0) > 0:
            return SuccessRule(CHIEF, 0, "ChiefSucceeded", "chief 0 succeeded")
        return None
