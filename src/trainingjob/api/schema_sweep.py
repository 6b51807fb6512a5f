"""The TrainingSweep CustomResourceDefinition (ml.example.com/v1): a hyperparameter search over TrainingJobs.

A sweep samples hyperparameters with Optuna (random, grid, TPE, CMA-ES), runs each sample as a TrainingJob it owns
(a trial, built from `trialTemplate`), stops trials early with Optuna's pruners fed by each trial's per-epoch
progress, and records every trial and the best one in its status (docs/sweeps.md). The trial template embeds the
TrainingJob v1 spec schema itself (schema_spec.py), so a template the API server would refuse as a job is refused
as a sweep, with the same messages, before any trial exists. deploy/crd/trainingsweeps.ml.example.com.yaml is
generated from here by `make generate`.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, boolean, cel_string, integer, node, obj, rule, string
from trainingjob.api.schema_spec import spec_schema
from trainingjob.api.schema_sweep_status import status_schema
from trainingjob.api.versions import V1

DNS_1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
HYPERPARAMETER_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$"


def _scalar(description: str) -> Schema:
    """A string, number or boolean (what a hyperparameter holds), as the TrainingJob schema accepts one."""
    return node(None, description, preserve_unknown=True, min_properties=1, max_properties=0, min_items=1, max_items=0)


def _parameter() -> Schema:
    return obj(
        "One hyperparameter to search: a float or int range (optionally on a log scale or in steps), or a list of "
        "choices. Each trial gets the sampled value as spec.hyperparameters.<name>, over the template's.",
        {
            "name": string(
                "The hyperparameter's key in the trials' spec.hyperparameters (and HYPERPARAM_<NAME> in their env).",
                pattern=HYPERPARAMETER_NAME,
                max_length=63,
            ),
            "type": string(
                "float (a real range), int (an integer range) or categorical (one of `values`).",
                enum=list(c.SWEEP_PARAMETER_TYPES),
            ),
            "min": node("number", "Lowest value of a float or int range (inclusive)."),
            "max": node("number", "Highest value of a float or int range (inclusive)."),
            "log": boolean("Sample the range on a log scale (min must then be positive), as learning rates are."),
            "step": node(
                "number",
                "Sample only min, min+step, min+2*step, ... (int ranges: default 1). The grid algorithm needs it for "
                "float ranges. Not with log.",
                exclusive_minimum=True,
                minimum=0,
            ),
            "values": array(
                "The choices of a categorical parameter.",
                _scalar("One choice: a string, number or boolean."),
                min_items=1,
                max_items=c.MAX_CATEGORICAL_VALUES,
            ),
        },
        required=["name", "type"],
        rules=[
            # `values` holds untyped scalars, which CEL cannot see: the planner checks that a categorical
            # parameter has them, and a range none (sweeps/validation.py).
            rule(
                "self.type == 'categorical' ? !has(self.min) && !has(self.max) : has(self.min) && has(self.max)",
                "a categorical parameter takes values and no min or max; a float or int parameter takes min and max",
            ),
            rule("!has(self.min) || !has(self.max) || self.min <= self.max", "min must not exceed max"),
            rule(
                "!has(self.log) || !self.log || (self.type != 'categorical' && has(self.min) && self.min > 0.0)",
                "log scale needs a float or int range whose min is positive",
            ),
            rule("!has(self.log) || !self.log || !has(self.step)", "step and log cannot be combined"),
            rule(
                "self.type != 'int' || ((!has(self.min) || self.min == double(int(self.min))) && "
                "(!has(self.max) || self.max == double(int(self.max))) && "
                "(!has(self.step) || self.step == double(int(self.step))))",
                "an int parameter's min, max and step must be whole numbers",
            ),
            rule("self.type != 'categorical' || !has(self.step)", "a categorical parameter takes no step"),
        ],
    )


def _objective() -> Schema:
    return obj(
        "What the sweep optimises: one metric of the trials' progress reports (status.progress.metrics, "
        "docs/progress-protocol.md). A trial's value is the metric's last report; a trial that finishes without "
        "reporting it is a failed trial, never a good one.",
        {
            "metric": string(
                "Name of the metric, as the training script reports it (e.g. accuracy, loss).",
                pattern=HYPERPARAMETER_NAME,
                max_length=63,
            ),
            "direction": string(
                "maximize (accuracy) or minimize (loss).", enum=list(c.SWEEP_DIRECTIONS), default="maximize"
            ),
            "goal": node(
                "number",
                "Optional: the sweep ends Succeeded (reason GoalReached) as soon as a trial's value reaches it (at "
                "least it when maximizing, at most it when minimizing); trials still running are stopped.",
            ),
        },
        required=["metric"],
    )


def _algorithm() -> Schema:
    return obj(
        "How trial hyperparameters are sampled: Optuna's samplers.",
        {
            "name": string(
                "random (RandomSampler), grid (GridSampler: every combination once; int and categorical "
                "parameters, float ones with a step), tpe (TPESampler) or cmaes (CmaEsSampler: float and int "
                "parameters only).",
                enum=list(c.SWEEP_ALGORITHMS),
                default="tpe",
            ),
            "seed": integer(
                "Seed of the sampler (default: derived from the sweep's uid). The same seed and the same trial "
                "results give the same samples, also after the operator restarts.",
                minimum=0,
                maximum=2**31 - 1,
            ),
            "startupTrials": integer(
                "tpe and cmaes: trials sampled at random before the model takes over (Optuna's n_startup_trials).",
                minimum=0,
                default=4,
            ),
        },
    )


def _early_stopping() -> Schema:
    return obj(
        "Stopping trials that do worse than the others at the same epoch: Optuna's pruners, fed by each trial's "
        "per-epoch values of the objective (status.progress.history). A pruned trial is suspended (its workers "
        "end, the TrainingJob and its history stay) and marked ml.example.com/trial-stopped=Pruned.",
        {
            "pruner": string(
                "none, median (MedianPruner: below the median of earlier trials at the same epoch), "
                "successiveHalving (SuccessiveHalvingPruner) or hyperband (HyperbandPruner).",
                enum=list(c.SWEEP_PRUNERS),
                default="median",
            ),
            "startupTrials": integer(
                "median: no trial is pruned until this many trials have finished (n_startup_trials).",
                minimum=0,
                default=2,
            ),
            "warmupEpochs": integer(
                "median: no trial is pruned before it has reported this many epochs (n_warmup_steps).",
                minimum=0,
                default=1,
            ),
            "minEpochs": integer(
                "successiveHalving and hyperband: epochs a trial runs at least (min_resource).", minimum=1, default=1
            ),
            "maxEpochs": integer(
                "hyperband: epochs of a full trial (max_resource; default: the trials' totalEpochs when reported).",
                minimum=1,
            ),
            "reductionFactor": integer(
                "successiveHalving and hyperband: 1/reductionFactor of the trials go on at each rung.",
                minimum=2,
                default=3,
            ),
        },
    )


def _template() -> Schema:
    template_spec = spec_schema(V1)
    template_spec["description"] = (
        "The trials' TrainingJob spec (ml.example.com/v1, as `kubectl explain trainingjob.spec` documents it); "
        "sampled values are set in its hyperparameters."
    )
    # The sweep reads its trials' results from the status this operator writes: a trial another controller
    # manages (spec.managedBy) would never report one, and the sweep would wait for it forever.
    template_spec.setdefault("x-kubernetes-validations", []).append(
        rule(
            "!has(self.managedBy) || self.managedBy == " + cel_string(c.CONTROLLER_NAME),
            f"trials are run by this operator: managedBy may only be {c.CONTROLLER_NAME} in a sweep's template",
            field_path=".managedBy",
        )
    )
    labels = node(
        "object", "Labels every trial gets.", additional_properties=string("A label value."), max_properties=32
    )
    annotations = node(
        "object", "Annotations every trial gets.", additional_properties=string("A value."), max_properties=32
    )
    return obj(
        "The TrainingJob each trial is made from; trials are named <sweep>-trial-<index> and owned by the sweep. "
        "Changes apply to trials created afterwards.",
        {
            "metadata": obj("Labels and annotations of the trials.", {"labels": labels, "annotations": annotations}),
            "spec": template_spec,
        },
        required=["spec"],
    )


def _immutable(field: str) -> Schema:
    """A transition rule that holds for optional fields too: CEL's `self.x == oldSelf.x` is an error ("no such
    key") when x is absent, and the API server then refused every status write of a sweep without it."""
    return rule(
        f"has(self.{field}) == has(oldSelf.{field}) && (!has(self.{field}) || self.{field} == oldSelf.{field})",
        f"spec.{field} cannot change once the sweep exists: its trials were sampled from it (create a new sweep)",
        field_path=f".{field}",
    )


def spec_schema_sweep() -> Schema:
    return obj(
        "Desired state of the sweep: what to search, how, and how many trials.",
        {
            "trialTemplate": _template(),
            "parameters": array(
                "The search space: one entry per hyperparameter, names unique.",
                _parameter(),
                min_items=1,
                max_items=c.MAX_SWEEP_PARAMETERS,
                list_type="map",
                list_map_keys=["name"],
            ),
            "objective": _objective(),
            "algorithm": _algorithm(),
            "earlyStopping": _early_stopping(),
            "maxTrials": integer(
                "Trials to run in all (finished, pruned and failed ones count).",
                minimum=1,
                maximum=c.MAX_SWEEP_TRIALS,
                default=10,
            ),
            "parallelism": integer("Trials running at once at most.", minimum=1, maximum=100, default=1),
            "maxFailedTrials": integer(
                "The sweep ends Failed (reason TooManyFailedTrials) when more trials than this have failed "
                "(including those that finished without reporting the objective).",
                minimum=0,
                default=3,
            ),
        },
        required=["trialTemplate", "parameters", "objective"],
        rules=[
            _immutable("parameters"),
            _immutable("objective"),
            _immutable("algorithm"),
            rule(
                "!has(self.algorithm) || self.algorithm.name != 'grid' || "
                "self.parameters.all(p, p.type != 'float' || has(p.step))",
                "the grid algorithm needs a step for every float parameter (a grid has finitely many points)",
            ),
            rule(
                "!has(self.algorithm) || self.algorithm.name != 'cmaes' || "
                "self.parameters.all(p, p.type != 'categorical')",
                "the cmaes algorithm searches float and int ranges only; use tpe or random with categorical parameters",
            ),
        ],
    )


def printer_columns() -> list[Schema]:
    def column(name: str, type_: str, path: str, description: str, priority: int = 0) -> Schema:
        entry: Schema = {"name": name, "type": type_, "jsonPath": path, "description": description}
        if priority:
            entry["priority"] = priority
        return entry

    return [
        column("Phase", "string", ".status.phase", "Running, Succeeded or Failed"),
        column("Done", "integer", ".status.trialsDone", "Trials finished (succeeded, pruned, failed or stopped)"),
        column("Running", "integer", ".status.trialsRunning", "Trials running now"),
        column("Max", "integer", ".spec.maxTrials", "Trials to run in all"),
        column("Metric", "string", ".spec.objective.metric", "The objective metric"),
        column("Best", "number", ".status.bestTrial.value", "Best objective value so far"),
        column("Best Trial", "string", ".status.bestTrial.name", "The trial that reached it", priority=1),
        column("Algorithm", "string", ".spec.algorithm.name", "Sampler", priority=1),
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def root_schema() -> Schema:
    root = obj(
        f"{c.SWEEP_KIND} searches hyperparameters: it runs TrainingJobs (trials) sampled by Optuna, stops bad ones "
        "early from their per-epoch progress, and reports the best trial (docs/sweeps.md).",
        {
            "apiVersion": string(f"Versioned schema of this object: {c.SWEEP_API_VERSION}."),
            "kind": string(f"Kind of this object: {c.SWEEP_KIND}."),
            "spec": spec_schema_sweep(),
            "status": status_schema(),
        },
        required=["spec"],
        rules=[
            rule(
                f"self.metadata.name.size() <= {c.MAX_SWEEP_NAME_LENGTH} && "
                f"self.metadata.name.matches('{DNS_1035_LABEL}')",
                f"metadata.name must be a DNS-1035 label of at most {c.MAX_SWEEP_NAME_LENGTH} characters: trials "
                f"are named <name>{c.TRIAL_SUFFIX}<index>",
                field_path=".metadata.name",
            )
        ],
    )
    name = string(f"Name of the sweep: a DNS-1035 label of at most {c.MAX_SWEEP_NAME_LENGTH} characters.")
    root["properties"] = {"metadata": {"type": "object", "properties": {"name": name}}, **root["properties"]}
    return root


def sweep_crd_manifest() -> Schema:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of TrainingSweep, as a dict ready to apply."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": c.SWEEP_CRD_NAME},
        "spec": {
            "group": c.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": c.SWEEP_KIND,
                "listKind": f"{c.SWEEP_KIND}List",
                "plural": c.SWEEP_PLURAL,
                "singular": c.SWEEP_SINGULAR,
                "shortNames": list(c.SWEEP_SHORT_NAMES),
                "categories": ["all", "ml"],
            },
            "versions": [
                {
                    "name": c.SWEEP_VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root_schema()},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer_columns(),
                }
            ],
        },
    }
