"""TrainingJob manifests for `tj submit`: built from flags, or read from YAML files (pure functions)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from trainingjob.api import constants as k
from trainingjob.kube.yaml_text import yaml_problem


class ManifestError(ValueError):
    """A manifest that cannot be submitted as given; the message says why."""


def parse_hp_value(text: str) -> str | int | float | bool:
    """A hyperparameter value from the command line: a JSON number or boolean when it is one (`0.1`, `3`, `1e-4`,
    `true`), a JSON string's content when quoted (`'"3"'` stays the string "3"), else the text as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return value
    return text  # null, lists, objects, NaN and Infinity are not hyperparameter values: keep the text


def split_key_value(item: str, what: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ManifestError(f"{what} {item!r} is not KEY=VALUE")
    return key, value


def parse_hyperparameters(items: Iterable[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for item in items:
        key, value = split_key_value(item, "--hp")
        result[key] = parse_hp_value(value)
    return result


def parse_env(items: Iterable[str]) -> list[dict[str, str]]:
    """spec.env entries from NAME=VALUE items (the last one wins for a repeated name); names the operator sets
    itself are refused here already, with the reason the API server would give."""
    env: dict[str, str] = {}
    for item in items:
        key, value = split_key_value(item, "--env")
        if key in k.RESERVED_ENV_NAMES or key.startswith(k.RESERVED_ENV_PREFIXES):
            raise ManifestError(f"--env {key} is set by the operator and may not be overridden")
        env[key] = value
    return [{"name": key, "value": value} for key, value in env.items()]


def parse_annotations(items: Iterable[str]) -> dict[str, str]:
    return dict(split_key_value(item, "--annotation") for item in items)


def manifest_from_flags(
    name: str,
    *,
    framework: str,
    image: str | None,
    command: Sequence[str],
    workers: int = 1,
    gpus: int = 0,
    hyperparameters: Iterable[str] = (),
    env: Iterable[str] = (),
    annotations: Iterable[str] = (),
    model: str | None = None,
    dataset: str | None = None,
    restart_policy: str | None = None,
    suspend: bool = False,
    namespace: str | None = None,
    runtime: str | None = None,
    runtime_kind: str = k.CLUSTER_RUNTIME_KIND,
) -> dict[str, Any]:
    """The TrainingJob `tj submit NAME --framework … -- COMMAND ARGS…` creates: the first word after `--` is the
    container command, the rest its args; --annotation goes to spec.podAnnotations (the worker pods). With
    --runtime, image and command may come from the runtime (docs/runtimes.md)."""
    if not command and not runtime:
        raise ManifestError("give the training command after --, e.g. `-- python train.py --lr 0.1`")
    if not image and not runtime:
        raise ManifestError("give --image, or --runtime naming a runtime that sets one")
    spec: dict[str, Any] = {"framework": framework}
    if runtime:
        spec["runtimeRef"] = {"kind": runtime_kind, "name": runtime}
    if image:
        spec["image"] = image
    if command:
        spec["command"] = [command[0]]
    if len(command) > 1:
        spec["args"] = list(command[1:])
    spec.update(workers=workers, gpuPerWorker=gpus)
    optional = {
        "model": model,
        "dataset": dataset,
        "restartPolicy": restart_policy,
        "hyperparameters": parse_hyperparameters(hyperparameters),
        "env": parse_env(env),
        "podAnnotations": parse_annotations(annotations),
    }
    spec.update({key: value for key, value in optional.items() if value})
    if suspend:
        spec["suspend"] = True
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": metadata, "spec": spec}


def yaml_documents(text: str, source: str, kind: str = k.KIND) -> list[Any]:
    """The documents of a YAML stream, empty ones skipped; none at all, or no YAML, is a ManifestError."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise ManifestError(f"{source}: not valid YAML: {yaml_problem(error)}") from None
    if not documents:
        raise ManifestError(f"{source}: no {kind} in it")
    return documents


def manifests_from_yaml(text: str, source: str) -> list[dict[str, Any]]:
    """Every TrainingJob in a YAML stream (empty documents skipped); anything else is a ManifestError."""
    documents = yaml_documents(text, source)
    for number, document in enumerate(documents, 1):
        check_manifest(document, f"{source} (document {number})" if len(documents) > 1 else source)
    return documents


def check_manifest(document: Any, where: str) -> None:
    """A TrainingJob of a served version with a name, else a ManifestError saying what `where` holds instead."""
    if not isinstance(document, dict):
        raise ManifestError(f"{where}: expected a TrainingJob object, got {type(document).__name__}")
    kind, api_version = document.get("kind"), document.get("apiVersion")
    served = [f"{k.GROUP}/{version}" for version in k.SERVED_VERSIONS]
    if kind != k.KIND or api_version not in served:
        raise ManifestError(f"{where}: is {api_version}/{kind}, not a {k.KIND} ({' or '.join(served)})")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise ManifestError(f"{where}: metadata.name is missing")


def place(manifest: dict[str, Any], namespace_flag: str | None, default_namespace: str) -> str:
    """The namespace to create `manifest` in: -n, else its own metadata.namespace, else the default. A manifest
    naming another namespace than -n is refused (like kubectl)."""
    own = manifest["metadata"].get("namespace")
    if namespace_flag and own and own != namespace_flag:
        name = manifest["metadata"]["name"]
        raise ManifestError(f"trainingjob {name} is in namespace {own}, but -n says {namespace_flag}")
    return namespace_flag or own or default_namespace
