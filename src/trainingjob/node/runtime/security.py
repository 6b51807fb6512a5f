"""securityContext as the kubelet and containerd apply it (pure): user and groups, runAsNonRoot, capabilities.

The container's context overrides the pod's for runAsUser, runAsGroup and runAsNonRoot; fsGroup and
supplementalGroups are pod-wide and become supplementary groups of every process. Capabilities follow containerd:
its default set, plus `add`, minus `drop` (`ALL` drops every one), all of them when privileged; they are applied as
the bounding set, which is what a root process keeps across exec (a non-root process has none anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]
CAPABILITY_NUMBERS = {name: number for number, name in enumerate(CAPABILITIES)}
DEFAULT_CAPABILITIES = frozenset(
    [
        "CHOWN",
        "DAC_OVERRIDE",
        "FSETID",
        "FOWNER",
        "MKNOD",
        "NET_RAW",
        "SETGID",
        "SETUID",
        "SETFCAP",
        "SETPCAP",
        "NET_BIND_SERVICE",
        "SYS_CHROOT",
        "KILL",
        "AUDIT_WRITE",
    ]
)


@dataclass(frozen=True)
class ProcessSecurity:
    """What the container's process is started with."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    capabilities: frozenset[str]
    no_new_privs: bool
    read_only_root: bool


def format_pod(pod: Mapping[str, Any]) -> str:
    """The kubelet's format.Pod: name_namespace(uid)."""
    metadata = pod["metadata"]
    return f"{metadata['name']}_{metadata['namespace']}({metadata.get('uid', '')})"


def _effective(pod: Mapping[str, Any], container: Mapping[str, Any], field: str) -> Any:
    own = (container.get("securityContext") or {}).get(field)
    return own if own is not None else (pod["spec"].get("securityContext") or {}).get(field)


def verify_run_as_non_root(pod: Mapping[str, Any], container: Mapping[str, Any], image_uid: int) -> str | None:
    """The kubelet's verifyRunAsNonRoot: None when allowed, else its error message (CreateContainerConfigError)."""
    if not _effective(pod, container, "runAsNonRoot"):
        return None
    run_as_user = _effective(pod, container, "runAsUser")
    where = f'(pod: "{format_pod(pod)}", container: {container["name"]})'
    if run_as_user is not None:
        return f"container's runAsUser breaks non-root policy {where}" if run_as_user == 0 else None
    if image_uid == 0:
        return f"container has runAsNonRoot and image will run as root {where}"
    return None


def capabilities(container: Mapping[str, Any]) -> frozenset[str]:
    context = container.get("securityContext") or {}
    if context.get("privileged"):
        return frozenset(CAPABILITIES)
    requested = context.get("capabilities") or {}
    add = {c.removeprefix("CAP_") for c in requested.get("add") or []}
    drop = {c.removeprefix("CAP_") for c in requested.get("drop") or []}
    keep = set(CAPABILITIES) if "ALL" in add else set(DEFAULT_CAPABILITIES) | add
    return frozenset() if "ALL" in drop else frozenset(keep - drop)


def process_security(
    pod: Mapping[str, Any], container: Mapping[str, Any], image_uid: int, image_gid: int
) -> ProcessSecurity:
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}
    uid = _effective(pod, container, "runAsUser")
    gid = _effective(pod, container, "runAsGroup")
    primary = int(gid if gid is not None else image_gid)
    groups = [primary, *(int(g) for g in pod_context.get("supplementalGroups") or [])]
    if pod_context.get("fsGroup") is not None:
        groups.append(int(pod_context["fsGroup"]))
    return ProcessSecurity(
        uid=int(uid if uid is not None else image_uid),
        gid=primary,
        groups=tuple(dict.fromkeys(groups)),
        capabilities=capabilities(container),
        no_new_privs=context.get("allowPrivilegeEscalation") is False and not context.get("privileged"),
        read_only_root=bool(context.get("readOnlyRootFilesystem")),
    )
