"""The downward API: pod fields (fieldRef) and container resources (resourceFieldRef) as strings.

Shared by env resolution and downwardAPI/projected volumes, which accept the same selectors (volumes also accept
the whole `metadata.labels` and `metadata.annotations` maps, formatted one `key="value"` per line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from trainingjob.kube.quantity import ceil_ratio, parse_quantity

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


class FieldPathError(ValueError):
    """A selector the downward API does not support (the API server validates most of them first)."""


def format_map(values: Mapping[str, str]) -> str:
    """Kubernetes' FormatMap: sorted `key="value"` lines, values quoted like Go's %q."""
    return "\n".join(f"{key}={json.dumps(values[key], ensure_ascii=False)}" for key in sorted(values))


def pod_field(pod: Mapping[str, Any], path: str, allow_maps: bool = False) -> str:
    """The value of a fieldRef `path` on `pod` (whose status carries the IPs the node assigned)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    match = _SUBSCRIPT.match(path)
    if match:
        return (metadata.get(match.group(1)) or {}).get(match.group(2), "")
    simple = {
        "metadata.name": lambda: metadata.get("name", ""),
        "metadata.namespace": lambda: metadata.get("namespace", ""),
        "metadata.uid": lambda: metadata.get("uid", ""),
        "spec.nodeName": lambda: spec.get("nodeName", ""),
        "spec.serviceAccountName": lambda: spec.get("serviceAccountName", ""),
        "status.hostIP": lambda: status.get("hostIP", ""),
        "status.hostIPs": lambda: ",".join(entry["ip"] for entry in status.get("hostIPs") or []),
        "status.podIP": lambda: status.get("podIP", ""),
        "status.podIPs": lambda: ",".join(entry["ip"] for entry in status.get("podIPs") or []),
    }
    if path in simple:
        return simple[path]()
    if allow_maps and path in ("metadata.labels", "metadata.annotations"):
        return format_map(metadata.get(path.split(".")[1]) or {})
    raise FieldPathError(f"unsupported fieldPath: {path}")


def resource_field(
    container: Mapping[str, Any], resource: str, divisor: str | None, allocatable: Mapping[str, str]
) -> str:
    """A resourceFieldRef: the container's limit (the node's allocatable when unset) or request, divided by
    `divisor` and rounded up, as the kubelet computes it."""
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or name not in _RESOURCES:
        raise FieldPathError(f"unsupported container resource: {resource}")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(name)
    if value is None and kind == "limits":
        value = allocatable.get(name)
    amount = parse_quantity(value) if value is not None else parse_quantity("0")
    divide_by = parse_quantity(divisor or "1")
    if divide_by == 0:  # the API server defaults an omitted divisor to "0", meaning 1
        divide_by = parse_quantity("1")
    if name == "cpu":
        return str(ceil_ratio(amount * 1000, divide_by * 1000))
    return str(ceil_ratio(amount, divide_by))
