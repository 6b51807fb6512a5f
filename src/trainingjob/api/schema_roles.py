"""The multi-role and elastic parts of TrainingJob.spec: spec.roles (the roles besides worker that the frameworks
declare) and spec.elastic (PyTorch elastic training with torchrun's c10d rendezvous).

Every role is described once, by the framework whose it is (frameworks/base.py: Role), and served by both API
versions; schema_spec.py merges role_fields() into spec and role_rules() into its cross-field rules.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, integer, node, obj, rule, string, string_map
from trainingjob.api.schema_pod import QUANTITY, env_schema
from trainingjob.api.versions import VersionShape

MAX_ELASTIC_RESTARTS = 10000
DEFAULT_ELASTIC_RESTARTS = 10

# What each role is, for its description (the framework's own words) and its limit.
ROLE_TEXTS = {role.name: role.description for role in c.EXTRA_ROLES}


def _role_resources() -> Schema:
    quantity = node(
        None,
        "A resource quantity: an integer or a Kubernetes quantity string such as 500m or 4Gi.",
        any_of=[{"type": "integer"}, {"type": "string"}],
        pattern=QUANTITY,
        int_or_string=True,
    )

    def quantities(which: str) -> Schema:
        return string_map(
            f"Compute resource {which} of this role's container by resource name; GPUs come from gpus.",
            quantity,
            max_properties=32,
            rules=[
                rule(
                    f"!('{c.GPU_RESOURCE}' in self)",
                    f"{c.GPU_RESOURCE} must not be set in a role's resources.{which}: use the role's gpus",
                )
            ],
        )

    return obj(
        "CPU, memory and other resources of this role's container, as in a Pod's resources. Unset: the workers' "
        "(spec.resources).",
        {"requests": quantities("requests"), "limits": quantities("limits")},
    )


def _role(role: str) -> Schema:
    limit = 1 if role in c.SINGLE_ROLES else c.MAX_WORKERS
    return obj(
        f"{ROLE_TEXTS[role]} At most {limit}.",
        {
            "replicas": integer(
                f"Number of {role} pods ({'exactly 1' if limit == 1 else f'1 to {limit}'}), named "
                f"<job>-{role}-<index>. Defaults to 1.",
                minimum=1,
                maximum=limit,
                default=1,
            ),
            "gpus": integer(
                f"GPUs ({c.GPU_RESOURCE}) requested and limited for each {role} pod, 0 to {c.MAX_GPUS_PER_WORKER}. "
                "Defaults to 0: the workers' GPUs are not inherited.",
                minimum=0,
                maximum=c.MAX_GPUS_PER_WORKER,
                default=0,
            ),
            "resources": _role_resources(),
            "command": array(
                f"Entrypoint of the {role}'s container. Unset: spec.command.",
                string("One element of the command."),
                min_items=1,
            ),
            "args": array(
                f"Arguments of the {role}'s container. Unset: spec.args when command is unset too, else none.",
                string("One argument."),
            ),
            "env": env_schema(
                f"Environment variables for the {role} pods only, added to spec.env (a name in both takes this "
                "value). The same names are reserved as in spec.env.",
                f"An environment variable for the {role} pods.",
            ),
            "restartPolicy": string(
                f"What a failure of a {role} pod does, as spec.restartPolicy (which applies when this is unset): "
                "OnFailure, Never or ExitCode. failurePolicy.rules still take precedence.",
                enum=list(c.RESTART_POLICIES),
            ),
        },
    )


def _roles_by_framework() -> str:
    """Which framework's jobs may have which roles, read from the registry (each framework declares its own)."""
    owners: dict[str, list[str]] = {}
    for role, framework in c.FRAMEWORK_ROLES.items():
        owners.setdefault(framework, []).append(role)
    return "; ".join(f"{framework}: {', '.join(roles)}" for framework, roles in owners.items())


def _roles() -> Schema:
    return obj(
        "Pods of roles other than worker, each with its own count, resources, command, env and restart policy, "
        "on the job's headless Service like the workers (<job>-<role>-<index>.<job>-workers.<namespace>.svc). "
        f"Each role belongs to the framework that declares it ({_roles_by_framework()}). Every pod "
        "gets TRAININGJOB_ROLE and TRAININGJOB_IS_CHIEF (true on the pod that reports progress: the chief, else "
        "worker 0). Roles cannot be added to or removed from an existing job (its Service selects by them); their "
        "counts and settings may change, which restarts the pods.",
        {role: _role(role) for role in ROLE_TEXTS},
    )


def _elastic(shape: VersionShape) -> Schema:
    return obj(
        "Elastic PyTorch training: torchrun's elastic agent in every worker meets the others through a c10d "
        "rendezvous hosted by worker 0 (PET_RDZV_BACKEND=c10d, PET_RDZV_ENDPOINT, PET_RDZV_ID; and "
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, so that a worker joining a running job learns each round's master "
        "address) and trains with "
        "whatever number of workers between minWorkers and maxWorkers is there (PET_NNODES=min:max), restarting "
        f"its training processes at every membership change. Changing {shape.workers} (kubectl scale) within the "
        "bounds adds or removes workers without restarting the others; a failed or disrupted worker is replaced "
        "alone while the others go on (a failure still counts against backoffLimit), except worker 0, which hosts "
        "the rendezvous: losing it restarts every worker. The job has Succeeded once worker 0 exited 0. The "
        "command must be torchrun, and the training script should resume from its newest checkpoint whenever it "
        "starts: torchrun restarts it on every membership change. Only for framework pytorch.",
        {
            "minWorkers": integer(
                f"Fewest workers the training runs with, 1 to {c.MAX_WORKERS}; torchrun waits for this many. Under "
                "Kueue it is the minCount of the workers' pod set: Kueue may admit fewer workers than "
                f"{shape.workers}, down to this many, when its quota has room for no more (status.queue."
                "admittedWorkers).",
                minimum=1,
                maximum=c.MAX_WORKERS,
            ),
            "maxWorkers": integer(
                f"Most workers the training runs with, at least minWorkers; {shape.workers} may not exceed it.",
                minimum=1,
                maximum=c.MAX_WORKERS,
            ),
            "maxRestarts": integer(
                "How many times torchrun's agent in each worker may restart its training processes after they "
                "failed (PET_MAX_RESTARTS): every removed or lost worker costs each remaining agent one. Adding "
                f"workers costs nothing. 0 to {MAX_ELASTIC_RESTARTS}, defaults to {DEFAULT_ELASTIC_RESTARTS}.",
                minimum=0,
                maximum=MAX_ELASTIC_RESTARTS,
                default=DEFAULT_ELASTIC_RESTARTS,
            ),
        },
        required=["minWorkers", "maxWorkers"],
        rules=[
            rule(
                "self.minWorkers <= self.maxWorkers",
                "elastic.minWorkers must not exceed elastic.maxWorkers",
                field_path=".minWorkers",
            )
        ],
    )


def role_fields(shape: VersionShape) -> dict[str, Schema]:
    return {"roles": _roles(), "elastic": _elastic(shape)}


def _has_roles(which: str) -> str:
    present = " || ".join(f"has({which}.roles.{role})" for role in ROLE_TEXTS)
    return f"(has({which}.roles) && ({present}))"


def role_rules(shape: VersionShape) -> list[Schema]:
    """Rules that tie roles and elastic to the framework and to the worker count."""
    rules = [
        rule(
            f"!has(self.roles) || !has(self.roles.{role}) || self.framework == '{framework}'",
            f"roles.{role} is a {framework} role: set framework {framework} or remove it",
            field_path=f".roles.{role}",
        )
        for role, framework in c.FRAMEWORK_ROLES.items()
    ]
    workers = f"(has(self.{shape.workers}) ? self.{shape.workers} : 1)"
    rules += [
        rule(
            "!has(self.elastic) || self.framework == 'pytorch'",
            "elastic is for framework pytorch (torchrun's elastic agent)",
            field_path=".elastic",
        ),
        rule(
            f"!has(self.elastic) || (self.elastic.minWorkers <= {workers} && {workers} <= self.elastic.maxWorkers)",
            f"{shape.workers} must be between elastic.minWorkers and elastic.maxWorkers",
            field_path=f".{shape.workers}",
        ),
    ]
    return rules


def role_transition_rules() -> list[Schema]:
    return [
        rule(
            f"{_has_roles('self')} == {_has_roles('oldSelf')}",
            "roles cannot be added to or removed from an existing TrainingJob (its Service selects its pods by "
            "them); create a new TrainingJob for another topology",
            field_path=".roles",
        )
    ]
