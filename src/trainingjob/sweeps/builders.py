"""A trial's TrainingJob manifest, and the patch that stops one (pure).

A stopped trial is suspended, not deleted: its TrainingJob, its status (the per-epoch history the pruner judged it
by) and its Events stay, so the sweep's record survives a restart of the operator, a person can read why it was
stopped, and `tj resume` can let it finish. Suspending ends its workers (and gives back a Kueue admission) like
deleting would.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as c
from trainingjob.sweeps.types import TrainingSweep, trial_name


def history_annotation(sweep: TrainingSweep) -> str:
    """The objective first, then whatever the template's own annotation names (progress/history.py keeps 4)."""
    names = [sweep.spec.objective.metric]
    template = sweep.spec.template_annotations.get(c.ANNOTATION_METRIC_HISTORY, "")
    names += [name.strip() for name in template.split(",") if name.strip()]
    return ",".join(dict.fromkeys(names))


def trial_manifest(sweep: TrainingSweep, index: int, params: Mapping[str, Any], attrs: Mapping[str, Any]) -> dict:
    """TrainingJob <sweep>-trial-<index>: the template with the sampled values over its hyperparameters, owned by
    the sweep, labelled with the sweep, the index and the sweep's Kueue queue (so Kueue admits trials)."""
    spec = copy.deepcopy(dict(sweep.spec.template_spec))
    spec["hyperparameters"] = {**(spec.get("hyperparameters") or {}), **params}
    labels = {**sweep.spec.template_labels, c.LABEL_SWEEP: sweep.name, c.LABEL_TRIAL_INDEX: str(index)}
    queue = sweep.labels.get(c.LABEL_KUEUE_QUEUE)
    if queue and c.LABEL_KUEUE_QUEUE not in labels:
        labels[c.LABEL_KUEUE_QUEUE] = queue
    annotations = {**sweep.spec.template_annotations, c.ANNOTATION_METRIC_HISTORY: history_annotation(sweep)}
    if attrs:
        annotations[c.ANNOTATION_SAMPLER_STATE] = json.dumps(dict(attrs), separators=(",", ":"), sort_keys=True)
    return {
        "apiVersion": c.WATCHED_API_VERSION,
        "kind": c.KIND,
        "metadata": {
            "name": trial_name(sweep.name, index),
            "namespace": sweep.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": c.SWEEP_API_VERSION,
                    "kind": c.SWEEP_KIND,
                    "name": sweep.name,
                    "uid": sweep.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def stop_patch(mark: str) -> dict[str, Any]:
    """Suspend the trial and mark why (ml.example.com/trial-stopped: 'Pruned at epoch 3: ...' or 'Stopped: ...')."""
    return {"metadata": {"annotations": {c.ANNOTATION_TRIAL_STOPPED: mark[:256]}}, "spec": {"suspend": True}}


def attrs_patch(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Record the Optuna system attributes a pruner gave the trial (SuccessiveHalving's rungs)."""
    text = json.dumps(dict(attrs), separators=(",", ":"), sort_keys=True)
    return {"metadata": {"annotations": {c.ANNOTATION_SAMPLER_STATE: text}}}
