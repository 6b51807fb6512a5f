"""Make a spec drawn field by field (tests/spec_strategies.py) satisfy what its schema cannot say per field: the CRD's
cross-field CEL rules and the validating webhook's lookups, so that "as drawn" specs reach the operator instead of
stopping at the first rule (issue 41).

Every rule of the schema is either repaired here or named as one that cannot fail on CREATE (its transition rules,
which compare with oldSelf): RULES lists the expression patterns this module knows, and
tests/unit/test_spec_rules.py fails on a rule of the schema none of them matches, so a new rule makes this module
learn it. What the rules name (the frameworks of roles, the fields a runtime may give instead, the GPU field that
nccl needs) is read from the rules themselves; the reserved names and paths come from the same constants the schema
is built from. Pure: the same drawn spec and World give the same result.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as c
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_checkpoint import PARENT_SEGMENT, URI_SCHEMES
from trainingjob.api.schema_pod import OPERATOR_MOUNTS

Spec = dict[str, Any]
WORKERS = {"v1alpha1": "workers", "v1": "numWorkers"}
GPUS = {"v1alpha1": "gpuPerWorker", "v1": "gpusPerWorker"}

# The rule shapes this module repairs (spec level and nested), or knows to hold on CREATE. Each is a regex on the
# rule's expression; groups capture what the repair reads from the rule.
REQUIRED_UNLESS_RUNTIME = re.compile(r"^has\(self\.(\w+)\) \|\| has\(self\.runtimeRef\)$")
ROLE_FRAMEWORK = re.compile(r"^!has\(self\.roles\) \|\| !has\(self\.roles\.(\w+)\) \|\| self\.framework == '(\w+)'$")
FIELD_FRAMEWORK = re.compile(r"^!has\(self\.(\w+)\) \|\| self\.framework == '(\w+)'$")
BACKEND_GPUS = re.compile(r"self\.networking\.backend != '(\w+)' \|\| \(has\(self\.(\w+)\) && self\.\2 > 0\)$")
RULES = (
    REQUIRED_UNLESS_RUNTIME,
    ROLE_FRAMEWORK,
    FIELD_FRAMEWORK,
    BACKEND_GPUS,
    re.compile(r"oldSelf"),  # transition rules: not evaluated on CREATE
    re.compile(r"self\.dataVolume\.mountPath != self\.checkpointDir"),
    re.compile(r"self\.checkpoint\.dir != self\.dataVolume\.mountPath"),
    re.compile(r"self\.volumeMounts\.all\(m, m\.name in"),
    re.compile(r"self\.volumeMounts\.all\(m, !\(m\.mountPath in"),
    re.compile(r"self\.volumeMounts\.all\(m, m\.mountPath != \(has\(self\.checkpoint\.dir\)"),
    re.compile(r"self\.elastic\.minWorkers <= \(has\(self\.\w+\)"),
    re.compile(r"^self\.minWorkers <= self\.maxWorkers$"),
    re.compile(r"self\.maxSeconds >= self\.baseSeconds"),
    re.compile(r"^!has\(self\.enabled\) \|\| !self\.enabled \|\| has\(self\.storage\)$"),
    re.compile(r"has\(self\.claimName\)|self\.path|self\.storageClass|self\.secretName"),  # checkpoint.storage
    re.compile(r"quantity\(string\(self\)\)\.isGreaterThan"),
    re.compile(r"^!self\.matches\("),  # checkpoint.resumeFrom
    re.compile(r"^!\(self in \["),  # reserved env names, volume names, mount paths
    re.compile(r"^!\('[^']+' in self\)$"),  # no GPU in resources
    re.compile(r"self\.operator"),  # tolerations
    re.compile(r"^self\.all\(k, !\(k\.startsWith"),  # podLabels
)


@dataclass(frozen=True)
class World:
    """What exists in the cluster for a drawn spec to name (the test creates it): runtimes by framework (kind and
    name), PersistentVolumeClaims and PriorityClasses. Names the spec draws for these are replaced by these."""

    runtimes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # framework -> kind -> name
    claims: tuple[str, ...] = ()
    priority_classes: tuple[str, ...] = ()


@functools.cache
def spec_schema(version: str) -> Mapping[str, Any]:
    """The `spec` schema of a served version of the TrainingJob CRD (built once: building it takes a while)."""
    versions = {v["name"]: v for v in crd_manifest()["spec"]["versions"]}
    return versions[version]["schema"]["openAPIV3Schema"]["properties"]["spec"]


@functools.cache
def spec_rules(version: str) -> tuple[str, ...]:
    """Every CEL rule under spec (the spec's own and nested ones), as expressions."""
    return tuple(_rules_in(spec_schema(version)))


def _rules_in(schema: Mapping[str, Any]) -> Iterator[str]:
    for entry in schema.get("x-kubernetes-validations") or ():
        yield entry["rule"]
    children = list((schema.get("properties") or {}).values())
    nested = (schema.get("items"), schema.get("additionalProperties"))
    children += [child for child in nested if isinstance(child, Mapping)]
    for child in children:
        yield from _rules_in(child)


def unknown_rules(version: str) -> list[str]:
    """Rules of the schema none of RULES matches: rules this module does not know how to satisfy."""
    return [rule for rule in spec_rules(version) if not any(pattern.search(rule) for pattern in RULES)]


@functools.cache
def _matches(version: str, pattern: re.Pattern[str]) -> list[tuple[str, ...]]:
    return [match.groups() for rule in spec_rules(version) if (match := pattern.search(rule))]


def required_unless_runtime(version: str) -> list[str]:
    """The fields a spec must have unless it names a runtime (image, and in v1alpha1 command)."""
    return [name for (name,) in _matches(version, REQUIRED_UNLESS_RUNTIME)]


def conform(spec: Spec, version: str, world: World, defaults: Mapping[str, Any]) -> Spec:
    """`spec` changed as little as the rules need to pass: what conflicts with the drawn framework dropped, counts
    put in order, reserved names and paths removed, references pointed at what `world` holds. `defaults` gives
    the values for fields a rule requires that were not drawn (e.g. image and command without a runtime)."""
    spec = copy.deepcopy(spec)
    framework = spec.get("framework") or "pytorch"
    _frameworks(spec, version, framework)
    _references(spec, framework, world)
    for name in required_unless_runtime(version):
        if "runtimeRef" not in spec and name not in spec:
            spec[name] = copy.deepcopy(defaults[name])
    for backend, gpus in _matches(version, BACKEND_GPUS):
        if (spec.get("networking") or {}).get("backend") == backend and not spec.get(gpus):
            spec[gpus] = 1
    _elastic(spec, version)
    _paths(spec)
    _pod_fields(spec)
    for role in (spec.get("roles") or {}).values():
        if isinstance(role, dict):
            _pod_fields(role)
    _lifecycle(spec, version)
    return spec


def _frameworks(spec: Spec, version: str, framework: str) -> None:
    """Roles and fields that belong to another framework than the drawn one are dropped."""
    roles = spec.get("roles")
    for role, owner in _matches(version, ROLE_FRAMEWORK):
        if isinstance(roles, dict) and owner != framework:
            roles.pop(role, None)
    for name, owner in _matches(version, FIELD_FRAMEWORK):
        if owner != framework:
            spec.pop(name, None)


def _references(spec: Spec, framework: str, world: World) -> None:
    """Names the validating webhook looks up point at what exists; without such a thing, the field goes."""
    ref, runtimes = spec.get("runtimeRef"), world.runtimes.get(framework) or {}
    if ref is not None:
        kind = ref.get("kind") or c.CLUSTER_RUNTIME_KIND
        if kind in runtimes:
            spec["runtimeRef"] = {**ref, "name": runtimes[kind]}
        else:
            del spec["runtimeRef"]
    claim = world.claims[0] if world.claims else None
    for holder, key in ((spec.get("dataVolume"), "dataVolume"), (_at(spec, "checkpoint", "storage"), "storage")):
        if isinstance(holder, dict) and holder.get("claimName"):
            if claim:
                holder["claimName"] = claim
            elif key == "dataVolume":
                del spec["dataVolume"]
            else:
                del holder["claimName"]
    scheduling = spec.get("scheduling")
    if isinstance(scheduling, dict) and "priorityClassName" in scheduling:
        if world.priority_classes:
            scheduling["priorityClassName"] = world.priority_classes[0]
        else:
            del scheduling["priorityClassName"]


def _elastic(spec: Spec, version: str) -> None:
    elastic = spec.get("elastic")
    if not isinstance(elastic, dict):
        return
    low, high = sorted((elastic["minWorkers"], elastic["maxWorkers"]))
    elastic.update(minWorkers=low, maxWorkers=high)
    workers = WORKERS[version]
    spec[workers] = min(max(spec.get(workers, 1), low), high)


def _paths(spec: Spec) -> None:
    """No two of the operator's mounts, the data volume, the checkpoint directory and extra mounts share a path;
    no extra mount names a volume that is not there."""
    data = (spec.get("dataVolume") or {}).get("mountPath")
    if data in OPERATOR_MOUNTS:
        del spec["dataVolume"]["mountPath"]
        data = None
    if data is not None and spec.get("checkpointDir") == data:
        del spec["checkpointDir"]
    checkpoint = spec.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("dir") in {*OPERATOR_MOUNTS, data} - {None}:
        del checkpoint["dir"]
    checkpoint_path = _at(spec, "checkpoint", "dir") or spec.get("checkpointDir") or c.DEFAULT_CHECKPOINT_DIR
    enabled = bool(_at(spec, "checkpoint", "enabled"))
    volumes = spec.get("volumes") or []
    for volume in volumes:
        if volume.get("name") in c.RESERVED_VOLUME_NAMES:
            volume["name"] = f"x-{volume['name']}"
    names = {volume.get("name") for volume in volumes} | set(c.RESERVED_VOLUME_NAMES)
    if "volumeMounts" in spec:
        spec["volumeMounts"] = [
            mount
            for mount in spec["volumeMounts"]
            if mount.get("mountPath") not in {*OPERATOR_MOUNTS, data}
            and not (enabled and mount.get("mountPath") == checkpoint_path)
            and ("runtimeRef" in spec or mount.get("name") in names)
        ]


def _pod_fields(holder: Spec) -> None:
    """Reserved env names, GPU resources, operator labels and inconsistent tolerations removed from a spec or a
    role (the same fields, under the same rules)."""
    if isinstance(holder.get("env"), list):
        holder["env"] = [entry for entry in holder["env"] if not _reserved_env(str(entry.get("name", "")))]
    for which in ("requests", "limits"):
        quantities = _at(holder, "resources", which)
        if isinstance(quantities, dict):
            quantities.pop(c.GPU_RESOURCE, None)
    labels = holder.get("podLabels")
    if isinstance(labels, dict):
        reserved = (c.GROUP + "/", c.LAB_LABEL_PREFIX)
        for key in [k for k in labels if k.startswith(reserved) or k == c.LABEL_MANAGED_BY]:
            del labels[key]
    for toleration in _at(holder, "scheduling", "tolerations") or ():
        if not toleration.get("key"):
            toleration["operator"] = "Exists"
        if toleration.get("operator") == "Exists":
            toleration.pop("value", None)


def _reserved_env(name: str) -> bool:
    return name in c.RESERVED_ENV_NAMES or name.startswith(c.RESERVED_ENV_PREFIXES)


def _lifecycle(spec: Spec, version: str) -> None:
    backoff = _at(spec, "failurePolicy", "backoff")
    if isinstance(backoff, dict) and "maxSeconds" in backoff:  # baseSeconds has a default the rule compares with
        base = backoff.get("baseSeconds", _default(version, "failurePolicy", "backoff", "baseSeconds"))
        backoff["maxSeconds"] = max(backoff["maxSeconds"], base)
    enabled_by_default = _default(version, "checkpoint", "enabled")
    checkpoint = spec.get("checkpoint")
    if not isinstance(checkpoint, dict):
        return
    if "resumeFrom" in checkpoint and re.search(PARENT_SEGMENT, checkpoint["resumeFrom"]):
        checkpoint["resumeFrom"] = re.sub(r"(^|/)\.\.(?=/|$)", r"\1up", checkpoint["resumeFrom"])
    storage = checkpoint.get("storage")
    if checkpoint.get("enabled", enabled_by_default) and not isinstance(storage, dict):
        checkpoint["enabled"] = False
    if isinstance(storage, dict):
        _storage(storage)


def _storage(storage: Spec) -> None:
    """checkpoint.storage as one coherent kind: an object store with its URI, or a PVC named or sized."""
    kind = storage.get("type")
    if kind in URI_SCHEMES:
        for key in ("claimName", "size", "storageClassName", "storageClass"):
            storage.pop(key, None)
        path = str(storage.get("path") or "bucket/prefix")
        if not path.startswith(URI_SCHEMES[kind]):
            storage["path"] = URI_SCHEMES[kind] + path.split("://")[-1].lstrip("/")
        return
    storage.pop("path", None)
    storage.pop("secretName", None)
    if "storageClass" in storage and "storageClassName" in storage:
        storage["storageClass"] = storage["storageClassName"]
    if "claimName" in storage:
        storage.pop("size", None)
    elif not _positive(storage.get("size")):
        storage["size"] = "1Gi"


def _positive(size: Any) -> bool:
    """Whether a quantity drawn by the schema's pattern is above zero (its digits are not all 0)."""
    digits = re.match(r"[+-]?[0-9.]*", str(size or "")).group(0)
    return bool(size) and not str(size).startswith("-") and any(d not in "0." for d in digits)


def _default(version: str, *path: str) -> Any:
    """The schema's default for spec.<path> (None without one)."""
    schema = spec_schema(version)
    for key in path:
        schema = schema["properties"][key]
    return schema.get("default")


def _at(spec: Any, *path: str) -> Any:
    for key in path:
        spec = spec.get(key) if isinstance(spec, Mapping) else None
    return spec
