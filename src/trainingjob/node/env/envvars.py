"""A container's environment from every source, in the kubelet's order (makeEnvironmentVariables).

Order: `envFrom` sources first (later ones override earlier), then `env` entries in order (each value `$(VAR)`
expanded against what is defined so far and the service variables), then the service variables not already
defined. The image's ENV sits below all of that and is merged by the runtime (see `final_environment`).

ConfigMaps and Secrets are fetched beforehand (`EnvSources`); a missing one or a missing key is the error the
kubelet reports as CreateContainerConfigError, unless the reference is optional.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.kube.quantity import cpu_threads
from trainingjob.node.env.expansion import expand, mapping_for
from trainingjob.node.env.fieldpath import pod_field, resource_field

# Libraries that size their thread pools from the machine's CPUs unless told: two pods on two cores each starting
# one thread per core oversubscribe the machine (measured 20-50x slower). Set from the CPU limit when the pod's
# own env and the image's ENV leave them unset.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class EnvError(Exception):
    """Why a container's environment cannot be built (waiting reason CreateContainerConfigError)."""


@dataclass
class EnvSources:
    """ConfigMaps and Secrets of the pod's namespace by name; None marks one the API server does not have."""

    config_maps: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    secrets: dict[str, dict[str, Any] | None] = field(default_factory=dict)


def referenced_objects(container: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(ConfigMap names, Secret names) the container's env refers to, so they can be fetched first."""
    config_maps: set[str] = set()
    secrets: set[str] = set()
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            config_maps.add(source["configMapRef"]["name"])
        if "secretRef" in source:
            secrets.add(source["secretRef"]["name"])
    for variable in container.get("env") or []:
        value_from = variable.get("valueFrom") or {}
        if "configMapKeyRef" in value_from:
            config_maps.add(value_from["configMapKeyRef"]["name"])
        if "secretKeyRef" in value_from:
            secrets.add(value_from["secretKeyRef"]["name"])
    return config_maps, secrets


def _config_map_data(config_map: Mapping[str, Any]) -> dict[str, str]:
    data = dict(config_map.get("data") or {})
    for key, value in (config_map.get("binaryData") or {}).items():
        data[key] = base64.b64decode(value).decode(errors="replace")
    return data


def _secret_data(secret: Mapping[str, Any]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode(errors="replace") for key, value in (secret.get("data") or {}).items()}


def _valid_name(name: str) -> bool:
    """Relaxed env var names (GA in 1.34): printable ASCII except '='."""
    return bool(name) and all(32 <= ord(ch) <= 126 for ch in name) and "=" not in name


def _from_source(namespace: str, source: Mapping[str, Any], sources: EnvSources) -> dict[str, str]:
    prefix = source.get("prefix", "")
    if "configMapRef" in source:
        ref, kind, objects, decode = source["configMapRef"], "configmap", sources.config_maps, _config_map_data
    else:
        ref, kind, objects, decode = source["secretRef"], "secret", sources.secrets, _secret_data
    found = objects.get(ref["name"])
    if found is None:
        if ref.get("optional"):
            return {}
        raise EnvError(f'{kind} "{ref["name"]}" not found')
    return {prefix + key: value for key, value in decode(found).items() if _valid_name(prefix + key)}


def _key_ref(namespace: str, ref: Mapping[str, Any], kind: str, sources: EnvSources) -> str | None:
    """The value of a configMapKeyRef/secretKeyRef; None when optional and missing."""
    objects, decode, label = (
        (sources.config_maps, _config_map_data, "ConfigMap")
        if kind == "configmap"
        else (sources.secrets, _secret_data, "Secret")
    )
    found = objects.get(ref["name"])
    if found is None:
        if ref.get("optional"):
            return None
        raise EnvError(f'{kind} "{ref["name"]}" not found')
    data = decode(found)
    if ref["key"] not in data:
        if ref.get("optional"):
            return None
        raise EnvError(f"couldn't find key {ref['key']} in {label} {namespace}/{ref['name']}")
    return data[ref["key"]]


def _value_from(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    value_from: Mapping[str, Any],
    sources: EnvSources,
    allocatable: Mapping[str, str],
) -> str | None:
    namespace = pod["metadata"]["namespace"]
    if "fieldRef" in value_from:
        return pod_field(pod, value_from["fieldRef"]["fieldPath"])
    if "resourceFieldRef" in value_from:
        ref = value_from["resourceFieldRef"]
        target = container
        if ref.get("containerName") and ref["containerName"] != container.get("name"):
            every = (pod["spec"].get("initContainers") or []) + pod["spec"]["containers"]
            target = next((c for c in every if c["name"] == ref["containerName"]), container)
        return resource_field(target, ref["resource"], ref.get("divisor"), allocatable)
    if "configMapKeyRef" in value_from:
        return _key_ref(namespace, value_from["configMapKeyRef"], "configmap", sources)
    if "secretKeyRef" in value_from:
        return _key_ref(namespace, value_from["secretKeyRef"], "secret", sources)
    raise EnvError(f"unsupported env source: {sorted(value_from)}")


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    sources: EnvSources,
    service_env: Mapping[str, str],
    allocatable: Mapping[str, str],
) -> dict[str, str]:
    """The container's variables (without the image's ENV), as the kubelet builds them."""
    namespace = pod["metadata"]["namespace"]
    defined: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        defined.update(_from_source(namespace, source, sources))
    lookup = mapping_for(defined, service_env)
    for variable in container.get("env") or []:
        if "valueFrom" in variable:
            value = _value_from(pod, container, variable["valueFrom"], sources, allocatable)
            if value is None:
                continue
        else:
            value = expand(variable.get("value") or "", lookup)
        defined[variable["name"]] = value
    return {**{k: v for k, v in service_env.items() if k not in defined}, **defined}


def expand_command(words: list[str], env: Mapping[str, str]) -> list[str]:
    """command/args with `$(VAR)` expanded against the container's env (not the image's ENV)."""
    lookup = mapping_for(env)
    return [expand(word, lookup) for word in words]


def thread_env(container: Mapping[str, Any], machine_cpus: int) -> dict[str, str]:
    """Thread-pool sizes from the CPU limit (or the request when there is no limit), capped at the machine."""
    resources = container.get("resources") or {}
    cpu = (resources.get("limits") or {}).get("cpu") or (resources.get("requests") or {}).get("cpu")
    threads = cpu_threads(cpu, machine_cpus)
    if threads is None:
        return {}
    return dict.fromkeys(THREAD_VARIABLES, str(threads))


def final_environment(
    image_env: Mapping[str, str],
    runtime_path: str | None,
    hostname: str,
    threads: Mapping[str, str],
    container_vars: Mapping[str, str],
) -> dict[str, str]:
    """What the process gets: PATH and HOSTNAME as a runtime sets them, the image's ENV, the thread limits
    (only where neither the image nor the pod sets them) and the pod's variables on top."""
    path = image_env.get("PATH", DEFAULT_PATH)
    if runtime_path:
        path = f"{runtime_path}:{path}"
    env = {"PATH": path, "HOSTNAME": hostname, **{k: v for k, v in image_env.items() if k != "PATH"}}
    for name, value in threads.items():
        env.setdefault(name, value)
    env.update(container_vars)
    return env
