"""The pod-level part of TrainingJob.spec: env, resources, scheduling, volumes and security of every worker.

These mirror the matching Pod fields, narrowed where the operator owns something (reserved env names, GPU
resources, its labels and volumes). Strings that CEL rules read have a maxLength and lists a maxItems, so the API
server's cost estimate for the rules stays within its budget.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import (
    Schema,
    array,
    boolean,
    cel_list,
    cel_string,
    integer,
    node,
    obj,
    rule,
    string,
    string_map,
)
from trainingjob.api.versions import VersionShape
from trainingjob.kube.meta import DNS_SUBDOMAIN

# The Kubernetes resource.Quantity syntax, e.g. 500m, 4Gi, 1e3. The pattern Kubernetes documents for Quantity allows
# a decimal exponent (1e.5, 2E+1.5) that its parser refuses: a pod carrying one is answered 400 "cannot be handled
# as a Pod", so the exponent here is an integer, as the parser's own expression has it (the fuzzing found it). At most
# three digits: an exponent of 10^8 or more kept kube-apiserver 1.35 computing for minutes on one pod (growing past
# 1.5 GiB), and one over the int64 range is refused as an unparsable suffix.
QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,3}))?$"
# An absolute path without a trailing slash or empty segments, and not "/" itself: comparable as a string.
ABSOLUTE_PATH = r"^(/[^/]+)+$"
MAX_PATH_LENGTH = 1024
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_ENV = 128
MAX_NAME_LENGTH = 253
MAX_LABELS = 64
MAX_RESOURCES = 32
MAX_VOLUMES = 64
MAX_TOLERATIONS = 32
# Paths the operator mounts into every worker, besides dataVolume.mountPath and the checkpoint directory.
# Names of objects the validating webhook reads (a ServiceAccount, PriorityClass, PersistentVolumeClaim): a DNS-1123
# subdomain, as the API server requires of those objects. Without it a name such as "x/status" reached the webhook's
# GET as a subresource path (found by the spec fuzzing: serviceAccountName "F/HX7" read serviceaccounts/F/HX7).
OBJECT_NAME = DNS_SUBDOMAIN
OPTIONAL_OBJECT_NAME = f"^$|{DNS_SUBDOMAIN}"  # empty: the default (ServiceAccount) or none (PriorityClass)
OPERATOR_MOUNTS = (c.SHM_MOUNT_PATH, c.CONFIG_MOUNT_PATH)


def _reserved_env_rule() -> Schema:
    prefixes = [f"{prefix}*" for prefix in c.RESERVED_ENV_PREFIXES]
    # Names under a reserved prefix are covered by it; listing them again would only lengthen the message.
    names = [name for name in c.RESERVED_ENV_NAMES if not name.startswith(c.RESERVED_ENV_PREFIXES)]
    reserved = ", ".join(prefixes + names)
    prefix_checks = " || ".join(f"self.startsWith({cel_string(prefix)})" for prefix in c.RESERVED_ENV_PREFIXES)
    return rule(
        f"!(self in {cel_list(c.RESERVED_ENV_NAMES)} || {prefix_checks})",
        f"env names injected by the operator are reserved: {reserved}",
        message_expression=f"'env name ' + self + ' is injected by the operator; reserved: ' + {cel_string(reserved)}",
    )


def _label_value(description: str) -> Schema:
    """A label value: pods with any other value would be refused when the operator creates them."""
    return string(description, max_length=63, pattern=LABEL_VALUE)


def _operator_labels_rule() -> Schema:
    prefixes = (c.GROUP + "/", c.LAB_LABEL_PREFIX)
    offending = " || ".join(
        [*(f"k.startsWith({cel_string(p)})" for p in prefixes), f"k == {cel_string(c.LABEL_MANAGED_BY)}"]
    )
    message = f"podLabels keys under {' and '.join(prefixes)} and {c.LABEL_MANAGED_BY} are reserved for the operator"
    return rule(
        f"self.all(k, !({offending}))",
        message,
        message_expression=f"{cel_string(message + ': ')} + self.filter(k, {offending})[0]",
    )


def env_schema(description: str, item: str = "An environment variable for every worker's container.") -> Schema:
    """A list of environment variables (merged by name), with the reserved names refused."""
    variable = obj(
        item,
        {
            "name": string(
                "Variable name, a C identifier. Names the operator injects are reserved (see env).",
                pattern=ENV_NAME,
                max_length=MAX_NAME_LENGTH,
                rules=[_reserved_env_rule()],
            ),
            "value": string("Literal value. Mutually exclusive with valueFrom."),
            "valueFrom": node(
                "object",
                "Source of the value, as in a Pod's env[].valueFrom (secretKeyRef, configMapKeyRef, fieldRef, "
                "resourceFieldRef).",
                preserve_unknown=True,
            ),
        },
        required=["name"],
    )
    return array(description, variable, max_items=MAX_ENV, list_type="map", list_map_keys=["name"])


def _env() -> Schema:
    return env_schema(
        "Extra environment variables for every worker, merged by name. Names the operator injects are reserved "
        f"and rejected: any starting with {' or '.join(c.RESERVED_ENV_PREFIXES)}, and "
        f"{', '.join(c.RESERVED_ENV_NAMES)}. At most {MAX_ENV} entries."
    )


def _quantities(which: str, shape: VersionShape) -> Schema:
    quantity = node(
        None,
        "A resource quantity: an integer or a Kubernetes quantity string such as 500m or 4Gi.",
        any_of=[{"type": "integer"}, {"type": "string"}],
        pattern=QUANTITY,
        int_or_string=True,
    )
    return string_map(
        f"Compute resource {which} of each worker's container by resource name (cpu, memory, "
        f"ephemeral-storage, ...). GPUs are not set here: {c.GPU_RESOURCE} comes from {shape.gpus}.",
        quantity,
        max_properties=MAX_RESOURCES,
        rules=[
            rule(
                f"!({cel_string(c.GPU_RESOURCE)} in self)",
                f"{c.GPU_RESOURCE} must not be set in resources.{which}: use spec.{shape.gpus}",
            )
        ],
    )


def _resources(shape: VersionShape) -> Schema:
    return obj(
        "CPU, memory and other resources of each worker's container, as in a Pod's resources.",
        {"requests": _quantities("requests", shape), "limits": _quantities("limits", shape)},
    )


def _toleration() -> Schema:
    return obj(
        "A toleration, as in a Pod's tolerations.",
        {
            "key": string("Taint key to tolerate; empty with operator Exists tolerates every taint.", max_length=316),
            "operator": string(
                "Exists (any value) or Equal (the value must match). Defaults to Equal.",
                enum=["Exists", "Equal"],
            ),
            "value": string("Taint value to match with operator Equal; empty with Exists.", max_length=63),
            "effect": string(
                "Taint effect to tolerate; empty tolerates all effects.",
                enum=["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ),
            "tolerationSeconds": integer(
                "For effect NoExecute: seconds the pod stays bound after the taint appears; unset means forever.",
            ),
        },
        rules=[
            rule(
                "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
                "a toleration with operator Exists must not set a value",
            ),
            rule(
                "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
                "a toleration with an empty key must use operator Exists",
            ),
        ],
    )


def _gang() -> Schema:
    return obj(
        "Gang scheduling: the scheduler places all workers of an attempt together or none of them, so two jobs can "
        "never each hold part of the GPUs they both need and wait forever. The operator creates one gang object per "
        "attempt (owned by the job) before the workers, and each worker joins it. Without this field the provider "
        "is Auto.",
        {
            "provider": string(
                "Which scheduler's gang API to use. Auto (default): a job whose gang has 2 or more pods is ganged "
                "with the API its scheduler reads, when the cluster serves it: Kubernetes' own Workload API "
                "(scheduling.k8s.io, alpha in 1.35, v1alpha2 PodGroups in 1.36) for the default scheduler, "
                "Volcano's PodGroup for schedulerName volcano, scheduler-plugins' coscheduling PodGroup for any "
                "other scheduler; otherwise pods are placed one by one. Native, Coscheduling, Volcano: that API, "
                "and the job waits (condition Blocked, GangSchedulingUnavailable) while the cluster does not serve "
                "it; with no schedulerName, Volcano sets volcano and Coscheduling scheduler-plugins-scheduler. "
                "Disabled: never.",
                enum=list(c.GANG_PROVIDERS),
                default="Auto",
            ),
            "minCount": integer(
                "Workers that must be placeable together before any is bound. Defaults to workers (all of them), "
                "or elastic.minWorkers for elastic training; larger values count as workers. Lower it only for "
                "launchers that start with fewer workers (elastic training). The gang's own minCount adds every "
                "pod of the other roles (chief, ps, evaluator, launcher) to it.",
                minimum=1,
                maximum=c.MAX_WORKERS,
            ),
            "queue": string(
                "Volcano only: the Volcano Queue of the job's PodGroup (default: the queue named default).",
                max_length=63,
                pattern=LABEL_VALUE,
            ),
        },
    )


def _scheduling() -> Schema:
    return obj(
        "Where the workers may run: applied to every worker pod.",
        {
            "nodeSelector": string_map(
                "Node labels a worker's node must have.",
                _label_value("Required label value."),
            ),
            "tolerations": array(
                f"Taints the workers tolerate (at most {MAX_TOLERATIONS}).",
                _toleration(),
                max_items=MAX_TOLERATIONS,
            ),
            "affinity": node(
                "object",
                "Node and pod (anti-)affinity, as in a Pod's affinity.",
                preserve_unknown=True,
            ),
            "priorityClassName": string(
                "PriorityClass of the worker pods.", max_length=MAX_NAME_LENGTH, pattern=OPTIONAL_OBJECT_NAME
            ),
            "schedulerName": string(
                "Scheduler that places the worker pods; the default scheduler when empty.", max_length=MAX_NAME_LENGTH
            ),
            "gang": _gang(),
        },
    )


def _identity_fields() -> dict[str, Schema]:
    return {
        "serviceAccountName": string(
            "ServiceAccount the workers run as; the namespace's default ServiceAccount when empty.",
            max_length=MAX_NAME_LENGTH,
            pattern=OPTIONAL_OBJECT_NAME,
        ),
        "imagePullSecrets": array(
            "Secrets holding registry credentials for pulling image.",
            obj(
                "A reference to a Secret of type kubernetes.io/dockerconfigjson in the job's namespace.",
                {"name": string("Name of the Secret.", min_length=1, max_length=MAX_NAME_LENGTH)},
                required=["name"],
            ),
            list_type="map",
            list_map_keys=["name"],
        ),
        "podLabels": string_map(
            f"Extra labels on every worker pod. Keys under {c.GROUP}/ and {c.LAB_LABEL_PREFIX} and "
            f"{c.LABEL_MANAGED_BY} are set by the operator (it finds its pods by them) and rejected here.",
            _label_value("Label value."),
            max_properties=MAX_LABELS,
            rules=[_operator_labels_rule()],
        ),
        "podAnnotations": string_map(
            "Extra annotations on every worker pod.",
            string("Annotation value."),
        ),
    }


def _volumes() -> Schema:
    volume = node(
        "object",
        "A volume, as in a Pod's volumes: a name plus one volume source (persistentVolumeClaim, configMap, secret, "
        "emptyDir, ...).",
        preserve_unknown=True,
        required=["name"],
        properties={
            "name": string(
                f"Volume name, unique in the job; {', '.join(c.RESERVED_VOLUME_NAMES)} are used by the operator.",
                min_length=1,
                max_length=63,
                rules=[
                    rule(
                        f"!(self in {cel_list(c.RESERVED_VOLUME_NAMES)})",
                        f"volume names used by the operator are reserved: {', '.join(c.RESERVED_VOLUME_NAMES)}",
                        message_expression=(
                            "'volume name ' + self + ' is reserved: the operator adds "
                            f"{', '.join(c.RESERVED_VOLUME_NAMES)}'"
                        ),
                    )
                ],
            )
        },
    )
    return array(
        f"Extra volumes for every worker pod, unique by name (at most {MAX_VOLUMES}); mount them with volumeMounts.",
        volume,
        max_items=MAX_VOLUMES,
        list_type="map",
        list_map_keys=["name"],
    )


def _volume_mounts() -> Schema:
    mount = obj(
        "Where one of spec.volumes appears in the worker's container.",
        {
            "name": string(
                "Name of an entry of spec.volumes (or of a volume the operator adds, e.g. data).",
                min_length=1,
                max_length=63,
            ),
            "mountPath": string(
                "Absolute path in the container, unique among volumeMounts; must differ from the operator's own "
                f"mounts ({', '.join(OPERATOR_MOUNTS)}, dataVolume.mountPath and, while checkpoint.enabled, the "
                "checkpoint directory).",
                pattern=ABSOLUTE_PATH,
                max_length=MAX_PATH_LENGTH,
            ),
            "readOnly": boolean("Mount read-only. Defaults to false."),
            "subPath": string("Path inside the volume to mount instead of its root."),
        },
        required=["name", "mountPath"],
    )
    return array(
        f"Mounts of spec.volumes into every worker's container, unique by mountPath (at most {MAX_VOLUMES}).",
        mount,
        max_items=MAX_VOLUMES,
        list_type="map",
        list_map_keys=["mountPath"],
    )


def pod_fields(shape: VersionShape) -> dict[str, Schema]:
    """The spec fields that shape every worker pod."""
    return {
        "env": _env(),
        "resources": _resources(shape),
        "scheduling": _scheduling(),
        **_identity_fields(),
        "volumes": _volumes(),
        "volumeMounts": _volume_mounts(),
        "securityContext": node(
            "object",
            "Security context of every worker's container, as in a Pod container's securityContext. Unset, the "
            "operator's defaults apply: no privilege escalation, all capabilities dropped and RuntimeDefault "
            "seccomp everywhere, plus runAsNonRoot where the namespace enforces PodSecurity restricted (its "
            "pod-security.kubernetes.io/enforce label, or PodSecurity refusing a pod without it): images that run "
            "as root start in other namespaces, and in restricted ones the job reports "
            "CreateContainerConfigError until the image has a numeric non-root USER or this sets runAsUser. When "
            "set it replaces those defaults as a whole (the pod-level ones too), so a namespace enforcing "
            "PodSecurity restricted may reject the pods.",
            preserve_unknown=True,
        ),
    }
