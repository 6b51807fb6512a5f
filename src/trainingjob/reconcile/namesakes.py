"""Who holds a worker's name when creating the worker met AlreadyExists: pure functions.

Worker names are deterministic (`<job>-worker-<i>`), so a pod of that name that is not the job's worker keeps the
worker from ever being created. The operator's caches cannot show such a pod: the pod watch selects by the
managed-by label and files pods under their job-name label, and the planner takes only pods the job controls. It
happens when someone relabels a worker to take it out of its job (the ReplicaSet way of quarantining a pod for
debugging: a ReplicaSet then creates a pod under a new random name, a TrainingJob cannot), when another controller
or a person created a pod of that name, or for a moment while garbage collection removes the pods of an earlier job
of the same name. Without a word the job would stay Pending or Restarting; the planner reports it as a blocker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as k


def namesake_holder(job_name: str, job_uid: str, body: Mapping[str, Any]) -> str | None:
    """Why the pod `body`, named like one of the job's workers, is not that worker and what frees the name, in
    words; None when it is the job's own worker (the cache has not shown it yet: its watch event will)."""
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    owner = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)
    reasons = []
    if owner is None:
        reasons.append("it has no controller")
    elif owner.get("uid") != job_uid:
        reasons.append(_other_owner(job_name, owner))
    for label, wanted in ((k.LABEL_JOB_NAME, job_name), (k.LABEL_MANAGED_BY, k.MANAGED_BY)):
        value = labels.get(label)
        if value != wanted:
            reasons.append(f"its label {label} is {value!r}, not {wanted!r}" if value else f"it lacks label {label}")
    if not reasons:
        return None
    return f"{'; '.join(reasons)}; {_remedy(job_name, metadata, owner)}"


def _other_owner(job_name: str, owner: Mapping[str, Any]) -> str:
    kind, name, uid = owner.get("kind") or "?", owner.get("name") or "?", owner.get("uid") or "?"
    if _earlier_job(job_name, owner):
        return f"it belongs to an earlier {k.KIND} of this name (uid {uid})"
    return f"it belongs to {kind} {name} (uid {uid})"


def _earlier_job(job_name: str, owner: Mapping[str, Any] | None) -> bool:
    return owner is not None and owner.get("kind") == k.KIND and owner.get("name") == job_name


def _remedy(job_name: str, metadata: Mapping[str, Any], owner: Mapping[str, Any] | None) -> str:
    if metadata.get("deletionTimestamp"):
        return "it is being deleted, and the worker is created once it is gone"
    if _earlier_job(job_name, owner) and metadata.get("labels", {}).get(k.LABEL_JOB_NAME) == job_name:
        return "garbage collection deletes it, then the worker is created"
    namespace = metadata.get("namespace") or "default"
    return f"the worker is created once it is gone (kubectl delete pod {metadata.get('name')} -n {namespace})"
