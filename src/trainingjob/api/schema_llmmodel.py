"""The LLMModel CustomResourceDefinition (ai.example.com/v1): a model served by a Deployment the operator keeps.

The seed's fields keep their names and meaning: `modelName`, `replicas`, `gpuType`. Everything else (image, port,
resources, scheduling, source, autoscaling) is optional, so the seed's three-field manifest applies unchanged.
deploy/crd/llmmodels.ai.example.com.yaml is generated from here by `make generate`, like the TrainingJob CRD.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, integer, node, obj, rule, string, string_map

DNS_1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


def _source() -> Schema:
    return obj(
        "Where the model comes from. Without a source the image must hold the model itself. With `trainingJob`, "
        "the operator creates nothing until that TrainingJob (same namespace) has Succeeded, then mounts its "
        f"checkpoint volume read-only at {c.MODEL_MOUNT_PATH} and the server loads the newest checkpoint there (the "
        "final one); a job keeping its checkpoints in S3 is served from there as with `uri`. With `claimName`, "
        "that PersistentVolumeClaim is mounted instead, at once. With `uri`, the server gets CHECKPOINT_URI (and "
        f"CHECKPOINT_DIR, an emptyDir at {c.MODEL_MOUNT_PATH}) and downloads the newest complete checkpoint under "
        "it (trainingjob.sdk's latest_checkpoint), at once.",
        {
            "trainingJob": string(
                "Name of a TrainingJob in this namespace whose final checkpoint is served once it has Succeeded; "
                "it must have checkpointing enabled on a volume (spec.checkpoint.storage of type pvc) or in S3 "
                "(type s3; its secretName gives the server the credentials too)."
            ),
            "uri": string(
                "s3://<bucket>/<prefix> under which checkpoints are named as trainingjob.sdk saves them: the newest "
                "complete one is served.",
                pattern=r"^s3://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9](/[^\s]*)?$",
                max_length=1024,
            ),
            "secretName": string(
                "With uri: a Secret in this namespace whose keys become the server's environment (envFrom), e.g. "
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION.",
                min_length=1,
                max_length=253,
            ),
            "claimName": string("A PersistentVolumeClaim in this namespace that holds the model (a checkpoint path)."),
            "path": string(
                "Directory inside the volume to serve (a subPath). Default: for trainingJob, the directory that "
                "job's run wrote its checkpoints to (its uid, see checkpoint.dir of TrainingJob); for claimName, "
                "the volume's root.",
                pattern=r"^[^/].*$",
            ),
        },
        rules=[
            rule(
                "(has(self.trainingJob) ? 1 : 0) + (has(self.claimName) ? 1 : 0) + (has(self.uri) ? 1 : 0) == 1",
                "source names exactly one of trainingJob, claimName and uri",
            ),
            rule("!has(self.path) || !has(self.uri)", "source.path is a directory in a volume: not used with uri"),
            rule(
                "!has(self.secretName) || has(self.uri)",
                "source.secretName goes with uri (a trainingJob's own checkpoint.storage.secretName is used for it)",
            ),
        ],
    )


def _autoscaling() -> Schema:
    return obj(
        "A HorizontalPodAutoscaler (autoscaling/v2, named after the model) that scales this LLMModel through its "
        "scale subresource by the serving pods' average CPU utilization; it then owns spec.replicas. Removing this "
        "field deletes the autoscaler.",
        {
            "minReplicas": integer("Fewest replicas the autoscaler keeps.", minimum=1, default=1),
            "maxReplicas": integer("Most replicas the autoscaler may create.", minimum=1),
            "targetCPUUtilizationPercentage": integer(
                "Average CPU utilization (percent of the request) the autoscaler aims for.", minimum=1, default=80
            ),
        },
        required=["maxReplicas"],
        rules=[rule("self.minReplicas <= self.maxReplicas", "minReplicas must not exceed maxReplicas")],
    )


def _scheduling() -> Schema:
    return obj(
        "Placement of the serving pods beyond what gpuType selects.",
        {
            "nodeSelector": string_map("Extra node labels the pods require.", string("A node label value.")),
            "tolerations": array(
                "Tolerations of the serving pods (a core/v1 Toleration each), added to the GPU tolerations.",
                node("object", "A core/v1 Toleration.", preserve_unknown=True),
            ),
        },
    )


def _env() -> Schema:
    return array(
        "Extra environment variables of the server container (name/value pairs).",
        obj(
            "One environment variable.",
            {"name": string("Variable name."), "value": string("Variable value.")},
            required=["name"],
        ),
    )


def spec_schema() -> Schema:
    return obj(
        "Desired state of the served model.",
        {
            "modelName": string(
                "Name of the model the server answers for: predictions are POSTed to /v1/models/<modelName>:predict. "
                "Optional, as in the seed's schema and example: unset, the model is named by the object "
                "(metadata.name).",
                min_length=1,
                max_length=253,
            ),
            "replicas": integer(
                "Serving pods to run (the Deployment's replicas). The scale subresource sets it, so "
                "`kubectl scale llmmodel` and an autoscaler work; with spec.autoscaling the autoscaler owns it.",
                minimum=0,
                default=1,
            ),
            "gpuType": string(
                "GPU model each replica needs, e.g. H100. The operator maps it to node labels by its settings "
                "(`tj operator --gpu-type H100=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`); a type without a "
                "mapping only requests GPUs. Unset: a CPU-only server.",
                max_length=63,
            ),
            "gpusPerReplica": integer(
                f"GPUs ({c.GPU_RESOURCE}) each replica requests when gpuType is set.",
                minimum=1,
                maximum=c.MAX_GPUS_PER_WORKER,
                default=1,
            ),
            "image": string(
                "Image of the model server (default: the operator's --serving-image, "
                f"{c.DEFAULT_SERVING_IMAGE}, the SDK's server)."
            ),
            "command": array("Entrypoint of the server container (default: the image's).", string("An argument.")),
            "args": array("Arguments of the server container.", string("An argument.")),
            "port": integer(
                "Port the server listens on; the Service exposes it as port 80 (name http).",
                minimum=1,
                maximum=65535,
                default=c.DEFAULT_SERVING_PORT,
            ),
            "env": _env(),
            "resources": node(
                "object",
                "Resources of the server container (a core/v1 ResourceRequirements); the GPU request comes from "
                "gpuType and gpusPerReplica.",
                preserve_unknown=True,
            ),
            "scheduling": _scheduling(),
            "source": _source(),
            "autoscaling": _autoscaling(),
        },
    )


def _condition() -> Schema:
    return obj(
        "A condition of the model: Available, Progressing or Degraded.",
        {
            "type": string("Condition type."),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": string("One-word reason in CamelCase."),
            "message": string("What happened, for people."),
            "lastTransitionTime": string("When the status last changed.", format="date-time"),
            "observedGeneration": integer("The generation the condition was computed from."),
        },
        required=["type", "status"],
    )


def status_schema() -> Schema:
    return obj(
        "Observed state, written by the operator only.",
        {
            "observedGeneration": integer("The spec generation this status describes."),
            "replicas": integer("Serving pods that exist (the Deployment's status.replicas)."),
            "readyReplicas": integer("Serving pods that are Ready."),
            "availableReplicas": integer("Serving pods Ready for at least minReadySeconds."),
            "updatedReplicas": integer("Serving pods of the current pod template."),
            "selector": string("Label selector of the serving pods (for the scale subresource and autoscalers)."),
            "url": string("In-cluster URL of the model's prediction endpoint."),
            "modelName": string("The name the server answers for: spec.modelName, else metadata.name."),
            "source": obj(
                "The model source as the operator last saw it.",
                {
                    "trainingJob": string("The TrainingJob whose checkpoint is served."),
                    "jobPhase": string("That job's phase when last seen (Unknown: no such job)."),
                    "claimName": string("The claim mounted at the model path."),
                    "path": string("The directory inside the claim that is served."),
                },
            ),
            "conditions": array(
                "Available, Progressing and Degraded.",
                _condition(),
                list_type="map",
                list_map_keys=["type"],
            ),
        },
    )


def _column(name: str, type_: str, path: str, description: str, priority: int = 0) -> Schema:
    column: Schema = {"name": name, "type": type_, "jsonPath": path, "description": description}
    if priority:
        column["priority"] = priority
    return column


def printer_columns() -> list[Schema]:
    return [
        _column("Model", "string", ".status.modelName", "Served model name"),
        _column("GPU", "string", ".spec.gpuType", "GPU type per replica"),
        _column("Replicas", "integer", ".spec.replicas", "Desired serving pods"),
        _column("Ready", "integer", ".status.readyReplicas", "Ready serving pods"),
        _column("Available", "string", '.status.conditions[?(@.type=="Available")].status', "Serving"),
        _column("Source", "string", ".spec.source.trainingJob", "TrainingJob served", priority=1),
        _column("URL", "string", ".status.url", "Prediction endpoint", priority=1),
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def root_schema() -> Schema:
    root = obj(
        f"{c.MODEL_KIND} serves a model: the operator keeps a Deployment of model servers (GPUs by gpuType), a "
        "Service in front of them and optionally an autoscaler, and can wait for a TrainingJob to finish and serve "
        "its final checkpoint (docs/serving.md).",
        {
            "apiVersion": string(f"Versioned schema of this object: {c.MODEL_API_VERSION}."),
            "kind": string(f"Kind of this object: {c.MODEL_KIND}."),
            "spec": spec_schema(),
            "status": status_schema(),
        },
        required=["spec"],
        rules=[
            rule(
                f"self.metadata.name.size() <= {c.MAX_MODEL_NAME_LENGTH} && "
                f"self.metadata.name.matches('{DNS_1035_LABEL}')",
                f"metadata.name must be a DNS-1035 label of at most {c.MAX_MODEL_NAME_LENGTH} characters: the "
                "model's Service is named after it",
                field_path=".metadata.name",
            )
        ],
    )
    # metadata takes no description (kubectl explain shows the standard ObjectMeta); declaring name lets the name
    # rule report its error at metadata.name.
    name = string(f"Name of the model resource: a DNS-1035 label of at most {c.MAX_MODEL_NAME_LENGTH} characters.")
    root["properties"] = {"metadata": {"type": "object", "properties": {"name": name}}, **root["properties"]}
    return root


def llmmodel_crd_manifest() -> Schema:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of LLMModel, as a dict ready to apply."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": c.MODEL_CRD_NAME},
        "spec": {
            "group": c.MODEL_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": c.MODEL_KIND,
                "listKind": f"{c.MODEL_KIND}List",
                "plural": c.MODEL_PLURAL,
                "singular": c.MODEL_SINGULAR,
                "shortNames": list(c.MODEL_SHORT_NAMES),
                "categories": ["all", "ml"],
            },
            "versions": [
                {
                    "name": c.MODEL_VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root_schema()},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": printer_columns(),
                }
            ],
        },
    }
