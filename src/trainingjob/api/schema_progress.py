"""The parts of TrainingJob.status the workers' reports fill: progress (with the ETA's recent points), the newest
checkpoint, and the last stop (whether the workers saved a checkpoint on their way out). Written by the operator
from docs/progress-protocol.md's reports; schema_status.py puts them together.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, boolean, integer, node, obj, string, string_map


def _timestamp(description: str) -> Schema:
    return string(description, format="date-time")


def last_checkpoint(
    description: str = "The newest checkpoint the workers reported, filled from the workers' progress reports.",
) -> Schema:
    return obj(
        description,
        {
            "epoch": integer("Epoch the checkpoint was saved after."),
            "step": integer("Training step (iteration) the checkpoint was saved at."),
            "path": string("Where the checkpoint is, as the workers see it (under the checkpoint directory)."),
            "time": _timestamp("When the checkpoint was saved."),
        },
    )


def last_stop() -> Schema:
    return obj(
        "The last time running workers were stopped before they finished: suspend, a restart for a spec change "
        "(a scale), a disruption (preemption) or a failed peer. Workers using trainingjob.sdk.on_stop save a "
        "checkpoint on their way out (spec.terminationGracePeriodSeconds) and report it; the next attempt resumes "
        "from it.",
        {
            "reason": string(
                "Why: Suspended, SpecChanged, WorkerDisrupted or WorkerFailed (a restart's reason), or WorkerStopped "
                "for a worker that reported a stop the operator did not start (its pod deleted by hand)."
            ),
            "time": _timestamp("When the workers were told to stop."),
            "checkpointed": boolean("Whether a worker reported a checkpoint saved on its way out."),
            "checkpoint": last_checkpoint("The checkpoint saved on the way out, as the worker reported it."),
        },
    )


def progress() -> Schema:
    return obj(
        "Training progress as the chief worker reports it through the operator's progress endpoint "
        "(docs/progress-protocol.md); written at most once every few seconds per job.",
        {
            "percent": node(
                "number",
                "Completion in percent (0-100), from steps when known, else from epochs.",
                minimum=0,
                maximum=100,
            ),
            "epoch": integer("Current epoch.", minimum=0),
            "totalEpochs": integer("Epochs the training will run.", minimum=0),
            "step": integer("Current training step (iteration).", minimum=0),
            "totalSteps": integer("Steps the training will run.", minimum=0),
            "metrics": string_map(
                "Latest metrics the worker reported, by name (loss, accuracy, ...).",
                node("number", "A metric value."),
                max_properties=32,
            ),
            "estimatedRemainingSeconds": integer(
                "Estimated seconds until the training finishes, at the current attempt's recent pace (status."
                "progress.recent). Absent while unknown: until the attempt has made three progress points, so "
                "neither its start (scheduling, a blocked start, restoring a checkpoint) nor an earlier attempt "
                "before a restart or scale skews it. 0 once at 100 %.",
                minimum=0,
            ),
            "recent": array(
                f"The current attempt's last progress points (at most {c.RECENT_PROGRESS_POINTS}, oldest first, one "
                "per new percent), which estimatedRemainingSeconds is computed from; a new attempt starts them anew.",
                obj(
                    "Completion at one moment.",
                    {
                        "percent": node("number", "Completion in percent.", minimum=0, maximum=100),
                        "time": _timestamp("When the report with that completion was accepted."),
                    },
                ),
                max_items=c.RECENT_PROGRESS_POINTS,
            ),
            "lastUpdateTime": _timestamp("When the operator accepted the newest report."),
            "history": _metric_history(),
        },
    )


def _metric_history() -> Schema:
    point = obj(
        "The metric's value at the end of one epoch (the newest report of that epoch).",
        {"epoch": integer("The epoch.", minimum=0), "value": node("number", "The metric's value.")},
        required=["epoch", "value"],
    )
    return string_map(
        f"Per-epoch values of the metrics the job names in its {c.ANNOTATION_METRIC_HISTORY} annotation "
        f"(comma-separated, at most {c.HISTORY_METRICS}), by metric name, oldest epoch first: what a sweep's pruner "
        f"compares trials by (docs/sweeps.md). At most {c.HISTORY_POINTS} epochs each; beyond that the older half is "
        "thinned. An epoch the worker sent no report for is missing.",
        array("The metric's values by epoch.", point, max_items=c.HISTORY_POINTS),
        max_properties=c.HISTORY_METRICS,
    )
