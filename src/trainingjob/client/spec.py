"""The TrainingJob a `train()` call submits, built from Python arguments (pure).

Written in the internal shape (v1alpha1's names: `workers`, `gpuPerWorker`), which the CLI's client layer converts
to the storage version on create. Nothing is checked here that the API server checks itself (reserved environment
names, ranges, hyperparameter values): its answer comes back as `Invalid` with its own words.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from trainingjob.api import constants as k
from trainingjob.client.code import DEFAULT_LAUNCHER, CodePackage, code_mount, code_volume, from_function, from_script
from trainingjob.client.errors import TrainingClientError

NAME_SUFFIX_LENGTH = 6  # "-" and 5 random characters


def job_name(base: str) -> str:
    """A fresh job name from `base` (a function or script name): a DNS label that leaves room for the children's
    suffixes, with a random tail so that running the same cell twice submits two jobs."""
    slug = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-") or "job"
    slug = slug[: k.MAX_JOB_NAME_LENGTH - NAME_SUFFIX_LENGTH].rstrip("-") or "job"
    if not slug[0].isalpha():
        slug = f"j{slug}"[: k.MAX_JOB_NAME_LENGTH - NAME_SUFFIX_LENGTH]
    return f"{slug}-{secrets.token_hex(3)[:5]}"


def code_config_map_name(job: str) -> str:
    return f"{job}-code"


def merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`extra` over `base`: objects merged key by key, anything else (lists included) replaced, as a JSON merge
    patch would (RFC 7386, without deleting by null)."""
    result = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def job_manifest(
    name: str,
    *,
    framework: str | None,
    image: str | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    workers: int | None = None,
    gpus: int | None = None,
    resources: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A TrainingJob manifest: the named arguments, then `spec` (any other spec fields, in the API's names) over
    them. Arguments left None are left out, so the API server's defaults apply."""
    fields: dict[str, Any] = {
        "framework": framework,
        "image": image,
        "command": command,
        "args": args,
        "workers": workers,
        "gpuPerWorker": gpus,
        "resources": dict(resources) if resources else None,
        "env": [{"name": key, "value": str(value)} for key, value in env.items()] if env else None,
        "hyperparameters": dict(hyperparameters) if hyperparameters else None,
    }
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    body = {key: value for key, value in fields.items() if value is not None}
    return {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": metadata, "spec": merged(body, spec or {})}


def with_code(manifest: Mapping[str, Any], code: CodePackage) -> dict[str, Any]:
    """The manifest running `code`: its command is the launcher, and the code's ConfigMap is mounted read-only
    beside the volumes the manifest already has."""
    spec = dict(manifest["spec"])
    config_map = code_config_map_name(manifest["metadata"]["name"])
    spec["command"] = code.command()
    spec.pop("args", None)
    spec["volumes"] = [*(spec.get("volumes") or []), code_volume(config_map)]
    spec["volumeMounts"] = [*(spec.get("volumeMounts") or []), code_mount()]
    return {**manifest, "spec": spec}


class TrainOptions(TypedDict, total=False):
    """What `train()` takes besides the function, all optional.

    func_args: the function's keyword arguments (JSON). script, args: a script file and its arguments instead of a
    function. name: the job's name (default: the function's or script's, with a random tail). framework (default
    pytorch), image, workers (default 1), gpus, resources, env, hyperparameters, labels: the TrainingJob's fields.
    launcher: what starts the launcher script (default ["python3"]; e.g. ["torchrun"]). spec: any other
    TrainingJob.spec fields in the API's names (scheduling, checkpoint, networking, …), merged over the rest.
    runtime, runtime_kind: a ClusterTrainingRuntime (default kind) or TrainingRuntime to start from
    (docs/runtimes.md): its image, resources, env… apply where these options leave them unset, and the framework
    defaults to the runtime's.
    """

    func_args: Mapping[str, Any]
    script: str | Path
    args: Sequence[Any]
    name: str
    framework: str
    image: str
    workers: int
    gpus: int
    resources: Mapping[str, Any]
    env: Mapping[str, str]
    hyperparameters: Mapping[str, Any]
    launcher: Sequence[str]
    spec: Mapping[str, Any]
    labels: Mapping[str, str]
    runtime: str
    runtime_kind: str


def train_request(func: Callable[..., Any] | None, options: TrainOptions) -> tuple[dict[str, Any], CodePackage]:
    """The manifest and the code package of one `train()` call."""
    script = options.get("script")
    if (func is None) == (script is None):
        raise TrainingClientError("give either a function or a script file (script=...), not both")
    launcher = options.get("launcher", DEFAULT_LAUNCHER)
    if func is not None:
        code, base = from_function(func, options.get("func_args"), launcher), func.__name__
    else:
        if options.get("func_args"):
            raise TrainingClientError("func_args go with a function; a script takes args")
        code, base = from_script(str(script), options.get("args", ()), launcher), Path(str(script)).stem
    runtime = options.get("runtime")
    spec = dict(options.get("spec") or {})
    if runtime:
        spec["runtimeRef"] = {"kind": options.get("runtime_kind", k.CLUSTER_RUNTIME_KIND), "name": runtime}
    manifest = job_manifest(
        options.get("name") or job_name(base),
        framework=options.get("framework", None if runtime else "pytorch"),
        image=options.get("image"),
        workers=options.get("workers", 1),
        gpus=options.get("gpus"),
        resources=options.get("resources"),
        env=options.get("env"),
        hyperparameters=options.get("hyperparameters"),
        labels=options.get("labels"),
        spec=spec,
    )
    return with_code(manifest, code), code
