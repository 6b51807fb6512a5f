"""From a container in a pod spec to the shim's LaunchSpec: image, runtime, security, env, command, mounts.

Each failure carries the waiting reason the kubelet would show: ErrImagePull for an image with no local runtime
(or whose venv failed to build), CreateContainerConfigError for a missing ConfigMap/Secret or key and for
runAsNonRoot meeting a root user, CreateContainerError for what this node cannot do. A venv still building is
not a failure: the container waits in ContainerCreating, as during a pull.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trainingjob.kube.quantity import QuantityError
from trainingjob.node.devices.advertise import PROC_GPUS, device_env, device_mounts
from trainingjob.node.devices.allocator import DeviceAllocator
from trainingjob.node.devices.gpus import GpuInventory
from trainingjob.node.env.envvars import (
    EnvError,
    EnvSources,
    container_env,
    expand_command,
    final_environment,
    referenced_objects,
    thread_env,
)
from trainingjob.node.env.expansion import expand, mapping_for
from trainingjob.node.env.fieldpath import FieldPathError
from trainingjob.node.images.catalog import ImageCatalog, ImageError, ImageSpec
from trainingjob.node.images.runtimes import Runtime, RuntimeBuildError, built_runtime, ensure_runtime
from trainingjob.node.network.sandbox import Sandbox
from trainingjob.node.runtime.cgroups import Cgroups
from trainingjob.node.runtime.launch import LaunchSpec, Mount
from trainingjob.node.runtime.limits import container_limits
from trainingjob.node.runtime.security import process_security, verify_run_as_non_root
from trainingjob.node.volumes.manager import HostVolume
from trainingjob.paths import cache_root

HIDDEN = ("/root", "/home")
DEFAULT_TERMINATION_PATH = "/dev/termination-log"


class StartError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class StillPreparing(Exception):
    """The container's runtime is being built; the pod worker is woken when it is done."""


class RuntimeCache:
    """Venv builds in a thread, one per venv at a time, shared by every pod that needs it."""

    def __init__(self) -> None:
        self._builds: dict[str, asyncio.Future[Runtime]] = {}

    def request(self, image: ImageSpec, on_done: Callable[[], None]) -> Runtime:
        try:
            ready = built_runtime(image)
        except (RuntimeBuildError, OSError) as error:
            raise StartError("ErrImagePull", str(error)) from error
        if ready is not None:
            return ready
        key = "|".join(str(path) for path in image.requirements)
        build = self._builds.get(key)
        if build is None:
            build = asyncio.get_running_loop().run_in_executor(None, ensure_runtime, image)
            self._builds[key] = build
        if build.done():
            self._builds.pop(key, None)
            error = build.exception()
            if error is not None:
                raise StartError("ErrImagePull", f"building the runtime of {image.name} failed: {error}")
            return build.result()
        build.add_done_callback(lambda _: on_done())
        raise StillPreparing()


@dataclass
class Prepared:
    spec: LaunchSpec
    image_id: str


def hidden_paths() -> list[str]:
    cache = str(cache_root().resolve())
    hidden = list(HIDDEN)
    if not any(cache == h or cache.startswith(h + "/") for h in hidden):
        hidden.append(cache)
    return hidden


def command_line(container: dict[str, Any], image: ImageSpec, env: dict[str, str]) -> list[str]:
    """Kubernetes' rules: `command` replaces the ENTRYPOINT (and drops CMD), `args` replace CMD."""
    command = container.get("command") or []
    args = container.get("args") or []
    words = [*command, *args] if command else [*image.entrypoint, *(args or image.cmd)]
    return expand_command(words, env)


def container_mounts(
    pod: dict[str, Any],
    container: dict[str, Any],
    volumes: dict[str, HostVolume],
    env: dict[str, str],
    image: ImageSpec,
    runtime: Runtime,
    pod_dir: Path,
    attempt_dir: Path,
) -> list[Mount]:
    mounts = [Mount("/tmp", str(attempt_dir / "tmp"))]
    mounts += [Mount(target, str(source), read_only=True) for target, source in image.files.items()]
    mounts.append(Mount(str(runtime.venv), str(runtime.venv), read_only=True))
    mounts += [Mount(f"/etc/{name}", str(pod_dir / "etc" / name)) for name in ("hosts", "resolv.conf", "hostname")]
    termination = container.get("terminationMessagePath") or DEFAULT_TERMINATION_PATH
    mounts.append(Mount(termination, str(attempt_dir / "termination-log")))
    lookup = mapping_for(env)
    for entry in container.get("volumeMounts") or []:
        volume = volumes.get(entry["name"])
        if volume is None:
            raise StartError(
                "CreateContainerConfigError",
                f"cannot find volume {entry['name']!r} to mount into container {container['name']!r}",
            )
        source = volume.path
        sub_path = entry.get("subPath") or (expand(entry["subPathExpr"], lookup) if entry.get("subPathExpr") else "")
        if sub_path:
            if sub_path.startswith("/") or ".." in sub_path.split("/"):
                raise StartError("CreateContainerConfigError", f"invalid subPath {sub_path!r}")
            source = Path(os.path.realpath(source / sub_path))
            if not source.exists():
                source.mkdir(parents=True, mode=0o755)
        read_only = bool(entry.get("readOnly")) or volume.read_only
        mounts.append(Mount(entry["mountPath"], str(source), read_only=read_only))
    return mounts


async def fetch_env_sources(api: Any, namespace: str, container: dict[str, Any]) -> EnvSources:
    config_maps, secrets = referenced_objects(container)
    sources = EnvSources()
    for name in config_maps:
        sources.config_maps[name] = await api.get_or_none(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    for name in secrets:
        sources.secrets[name] = await api.get_or_none(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    return sources


SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _mounts_needed(container: dict[str, Any]) -> list[str]:
    """Volume mounts a node without root would have to make; the API-access token the ServiceAccount admission
    plugin adds to every pod is left out (such a node runs the pod without it, see docs/local-cluster.md)."""
    return [m["mountPath"] for m in container.get("volumeMounts") or [] if m["mountPath"] != SERVICE_ACCOUNT_MOUNT]


def check_host_ports(container: dict[str, Any]) -> None:
    """In the host's network (hostNetwork, or a node without root) two pods cannot listen on one port: say so
    before starting rather than letting the second die of EADDRINUSE with a less clear message."""
    for port in container.get("ports") or []:
        number = port.get("hostPort") or port.get("containerPort")
        protocol = port.get("protocol") or "TCP"
        kind = socket.SOCK_DGRAM if protocol == "UDP" else socket.SOCK_STREAM
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind(("0.0.0.0", int(number)))
            except OSError:
                raise StartError(
                    "CreateContainerError",
                    f"port {number}/{protocol} is already in use on the node: this pod shares the host's network "
                    "(hostNetwork, or a node agent not running as root), where two pods cannot listen on one port",
                ) from None


class NodeResources(Protocol):
    """What a node confines a container with (context.NodeContext has them)."""

    cgroups: Cgroups
    gpus: GpuInventory
    devices: DeviceAllocator


def confine(spec: LaunchSpec, node: NodeResources, pod_uid: str, container: dict[str, Any], attempt: int) -> None:
    """The container's cgroups, made with its limits (none where the node cannot enforce them), and its GPUs: the
    devices assigned at admission, their variables and, in its own mount namespace, their device nodes."""
    try:
        spec.cgroups = node.cgroups.create(pod_uid, container["name"], attempt, container_limits(container))
    except (OSError, QuantityError) as error:
        raise StartError("CreateContainerError", f"creating the container's cgroup failed: {error}") from error
    devices = node.devices.devices_of(pod_uid, container["name"])
    spec.env.update(device_env(devices, spec.env))
    if spec.isolate:
        spec.mounts += device_mounts(devices, node.gpus, os.path.isdir(PROC_GPUS))


def lookup_image(images: ImageCatalog, container: dict[str, Any]) -> ImageSpec:
    try:
        return images.lookup(container.get("image") or "")
    except ImageError as error:
        raise StartError("ErrImagePull", str(error)) from error


def build_launch(
    pod: dict[str, Any],
    container: dict[str, Any],
    *,
    image: ImageSpec,
    runtime: Runtime,
    sources: EnvSources,
    service_env: dict[str, str],
    allocatable: dict[str, str],
    sandbox: Sandbox,
    volumes: dict[str, HostVolume],
    isolate: bool,
    pod_dir: Path,
    attempt_dir: Path,
) -> Prepared:
    """Everything checked and resolved; raises StartError with the kubelet's waiting reason."""
    refusal = verify_run_as_non_root(pod, container, image.uid)
    if refusal:
        raise StartError("CreateContainerConfigError", refusal)
    try:
        variables = container_env(pod, container, sources, service_env, allocatable)
    except (EnvError, FieldPathError, QuantityError) as error:
        raise StartError("CreateContainerConfigError", str(error)) from error
    threads = thread_env(container, int(allocatable.get("cpu", "1")))
    env = final_environment(image.env, str(runtime.bin_dir), sandbox.hostname, threads, variables)
    security = process_security(pod, container, image.uid, image.gid)
    mounts = container_mounts(pod, container, volumes, variables, image, runtime, pod_dir, attempt_dir)
    if sandbox.netns is None:
        check_host_ports(container)
    if not isolate and (_mounts_needed(container) or image.files):
        raise StartError(
            "CreateContainerError",
            "this node runs without root, so it cannot mount volumes or image files into a container "
            f"({', '.join(_mounts_needed(container) + list(image.files))}); "
            "run `tj cluster up` as root for such pods (docs/local-cluster.md)",
        )
    spec = LaunchSpec(
        argv=command_line(container, image, variables),
        env=env,
        cwd=container.get("workingDir") or image.working_dir,
        uid=security.uid,
        gid=security.gid,
        groups=list(security.groups),
        capabilities=sorted(security.capabilities),
        no_new_privs=security.no_new_privs,
        read_only_root=security.read_only_root,
        hostname=sandbox.hostname,
        isolate=isolate,
        netns=sandbox.netns_path,
        root=str(attempt_dir / "root"),
        upper=str(attempt_dir / "upper"),
        work=str(attempt_dir / "work"),
        hide=hidden_paths(),
        mounts=mounts,
    )
    if not spec.argv:
        raise StartError(
            "CreateContainerError", "no command specified (neither the pod nor the image mapping gives one)"
        )
    return Prepared(spec, runtime.image_id)
