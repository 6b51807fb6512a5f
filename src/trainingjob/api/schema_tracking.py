"""spec.tracking and status.tracking of a TrainingJob: MLflow experiment tracking (docs/serving.md, "MLflow").

The same field, by the same name, in every served version, so conversion copies it unchanged (a unit test holds
that). Without spec.tracking the operator's default tracking server (`tj operator --mlflow-tracking-uri`) applies;
without either, workers get no MLflow settings.
"""

from __future__ import annotations

from trainingjob.api.schema_builders import Schema, boolean, obj, string


def tracking_spec() -> Schema:
    return obj(
        "MLflow experiment tracking. The workers get MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME and "
        "MLFLOW_RUN_NAME; the SDK (trainingjob.sdk.tracking) logs hyperparameters, per-epoch metrics and "
        "checkpoints from the chief only, and status.tracking links the run.",
        {
            "enabled": boolean(
                "Track this job (default true when a tracking server is known: this field's mlflowTrackingUri or "
                "the operator's --mlflow-tracking-uri); false turns the operator's default off for this job.",
                default=True,
            ),
            "mlflowTrackingUri": string(
                "Base URL of the MLflow tracking server as the workers reach it, e.g. http://mlflow.mlops:5000 "
                "(default: the operator's --mlflow-tracking-uri).",
                pattern=r"^https?://",
            ),
            "experimentName": string(
                "MLflow experiment to log the run in (default: <namespace>/<job name>); created if missing.",
                max_length=256,
            ),
        },
    )


def tracking_status() -> Schema:
    return obj(
        "The MLflow run of this job, once the chief has created it.",
        {
            "trackingUri": string("The MLflow tracking server."),
            "experimentName": string("The experiment the run is in."),
            "runName": string("Name of the run: <job name>-<first 8 characters of the job's uid>."),
            "experimentId": string("MLflow's id of the experiment."),
            "runId": string("MLflow's id of the run."),
            "url": string("The run in the MLflow UI."),
        },
    )
