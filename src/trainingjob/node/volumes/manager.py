"""Pod volumes on the host, ready to be bind-mounted into containers (the kubelet's volume manager, small).

Supported: emptyDir (a directory, or a tmpfs for `medium: Memory`), configMap, secret, downwardAPI, projected
(serviceAccountToken through TokenRequest bound to the pod, configMap, secret, downwardAPI), persistentVolumeClaim
and generic ephemeral volumes (through the bound PV's hostPath or local path), hostPath. Anything else fails
the mount with a message saying so. fsGroup owns emptyDir and the API-backed volumes, as the kubelet sets it.

Directories made by the hostPath provisioner (the local cluster's default StorageClass) are opened to every user
the first time a pod mounts them, as local-path provisioners do: the provisioner creates them root-only, and a
non-root training container must be able to write its checkpoints there.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainingjob.kube.quantity import parse_quantity
from trainingjob.node.api.client import Api, ApiError
from trainingjob.node.cleanup import unmount_volumes
from trainingjob.node.env.fieldpath import pod_field, resource_field
from trainingjob.node.runtime import syscalls as sc
from trainingjob.node.volumes.payload import Payload, write_payload

DEFAULT_MODE = 0o644
TOKEN_SECONDS = 3600
TOKEN_REFRESH_FRACTION = 0.8
TOKEN_REFRESH_MAX_SECONDS = 24 * 3600


class VolumeError(Exception):
    """A volume cannot be set up yet (event FailedMount; the pod stays ContainerCreating and it is retried)."""


@dataclass
class HostVolume:
    path: Path
    read_only: bool = False


def _decode(obj: dict[str, Any], kind: str) -> dict[str, bytes]:
    if kind == "secret":
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return data


def _key_files(source: dict[str, Any], data: dict[str, bytes], mode: int, what: str) -> Payload:
    items = source.get("items")
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    payload: Payload = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise VolumeError(
                f"configmap references non-existent config key: {item['key']}"
                if what == "configmap"
                else f"references non-existent secret key: {item['key']}"
            )
        payload[item["path"]] = (data[item["key"]], item.get("mode", mode))
    return payload


def _downward_files(
    pod: dict[str, Any], items: list[dict[str, Any]], mode: int, allocatable: dict[str, str]
) -> Payload:
    payload: Payload = {}
    containers = {c["name"]: c for c in (pod["spec"].get("initContainers") or []) + pod["spec"]["containers"]}
    for item in items:
        if "fieldRef" in item:
            value = pod_field(pod, item["fieldRef"]["fieldPath"], allow_maps=True)
        else:
            ref = item["resourceFieldRef"]
            value = resource_field(
                containers.get(ref.get("containerName", ""), {}), ref["resource"], ref.get("divisor"), allocatable
            )
        payload[item["path"]] = (value.encode(), item.get("mode", mode))
    return payload


def _volume_directory(path: Path, pv: dict[str, Any]) -> Path:
    annotations = pv["metadata"].get("annotations") or {}
    if annotations.get("pv.kubernetes.io/provisioned-by") == "kubernetes.io/host-path":
        path.mkdir(parents=True, exist_ok=True)
        if not any(path.iterdir()):
            path.chmod(0o777)
    if not path.exists():
        raise VolumeError(f"path {path} of persistentvolume {pv['metadata']['name']} does not exist")
    return path


class VolumeManager:
    def __init__(self, api: Api, allocatable: dict[str, str], can_mount: bool) -> None:
        self.api = api
        self.allocatable = allocatable
        self.can_mount = can_mount
        # pod uid -> epoch seconds when its earliest projected token needs refreshing
        self.token_refresh: dict[str, float] = {}

    async def _get(self, path: str, kind: str, name: str, optional: bool) -> dict[str, Any] | None:
        found = await self.api.get_or_none(path)
        if found is None and not optional:
            raise VolumeError(f'{kind} "{name}" not found')
        return found

    async def _object_files(self, namespace: str, source: dict[str, Any], kind: str, mode: int) -> Payload:
        name = source.get("name") or source.get("secretName") or ""
        plural = "configmaps" if kind == "configmap" else "secrets"
        found = await self._get(
            f"/api/v1/namespaces/{namespace}/{plural}/{name}", kind, name, bool(source.get("optional"))
        )
        return {} if found is None else _key_files(source, _decode(found, kind), mode, kind)

    async def _token_file(self, pod: dict[str, Any], source: dict[str, Any], mode: int) -> Payload:
        metadata = pod["metadata"]
        seconds = int(source.get("expirationSeconds") or TOKEN_SECONDS)
        account = pod["spec"].get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [source["audience"]] if source.get("audience") else [],
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"], "uid": metadata["uid"]},
            },
        }
        path = f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/{account}/token"
        try:
            issued = await self.api.create(path, body)
        except ApiError as error:
            raise VolumeError(f"failed to fetch token: {error}") from error
        refresh = time.time() + min(seconds * TOKEN_REFRESH_FRACTION, TOKEN_REFRESH_MAX_SECONDS)
        uid = metadata["uid"]
        self.token_refresh[uid] = min(self.token_refresh.get(uid, refresh), refresh)
        return {source.get("path") or "token": (issued["status"]["token"].encode(), mode)}

    async def _projected(self, pod: dict[str, Any], spec: dict[str, Any]) -> Payload:
        mode = spec.get("defaultMode", DEFAULT_MODE)
        namespace = pod["metadata"]["namespace"]
        payload: Payload = {}
        for source in spec.get("sources") or []:
            if "serviceAccountToken" in source:
                payload.update(await self._token_file(pod, source["serviceAccountToken"], mode))
            elif "configMap" in source:
                payload.update(await self._object_files(namespace, source["configMap"], "configmap", mode))
            elif "secret" in source:
                payload.update(await self._object_files(namespace, source["secret"], "secret", mode))
            elif "downwardAPI" in source:
                payload.update(_downward_files(pod, source["downwardAPI"].get("items") or [], mode, self.allocatable))
            else:
                raise VolumeError(f"projected source {sorted(source)} is not supported by the process node")
        return payload

    async def _claim_path(self, namespace: str, claim: str) -> Path:
        pvc = await self._get(
            f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}", "persistentvolumeclaim", claim, False
        )
        assert pvc is not None
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if not volume_name or (pvc.get("status") or {}).get("phase") != "Bound":
            raise VolumeError(f'persistentvolumeclaim "{claim}" is not bound yet')
        pv = await self._get(f"/api/v1/persistentvolumes/{volume_name}", "persistentvolume", volume_name, False)
        assert pv is not None
        spec = pv.get("spec") or {}
        source = (spec.get("hostPath") or spec.get("local") or {}).get("path")
        if not source:
            raise VolumeError(
                f"persistentvolume {volume_name} has no hostPath or local path the process node can mount"
            )
        return _volume_directory(Path(source), pv)

    def _host_path(self, spec: dict[str, Any]) -> Path:
        path = Path(spec["path"])
        kind = spec.get("type") or ""
        if kind == "DirectoryOrCreate":
            path.mkdir(parents=True, exist_ok=True, mode=0o755)
        elif kind == "FileOrCreate" and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o644)
        elif kind in ("Directory", "File", "Socket", "CharDevice", "BlockDevice") and not path.exists():
            raise VolumeError(f"hostPath type check failed: {path} does not exist")
        return path

    def _empty_dir(self, path: Path, spec: dict[str, Any], group: int | None) -> None:
        """A directory anyone may write, or a tmpfs (`medium: Memory`, sized by sizeLimit); fsGroup owns it, with
        the setgid bit so that files created in it belong to the group too."""
        path.mkdir(parents=True, exist_ok=True)
        if spec.get("medium") == "Memory" and self.can_mount and not os.path.ismount(path):
            size = f",size={int(parse_quantity(spec['sizeLimit']))}" if spec.get("sizeLimit") else ""
            try:
                sc.mount("tmpfs", str(path), "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, f"mode=0777{size}")
            except OSError as error:
                raise VolumeError(f"mounting a tmpfs for emptyDir {path.name}: {error}") from error
        path.chmod(0o777)
        if group is not None:
            os.chown(path, -1, group)
            path.chmod(0o2777)

    async def prepare(self, pod: dict[str, Any], directory: Path) -> dict[str, HostVolume]:
        """Every volume of the pod, set up (idempotent); VolumeError for the first that cannot be yet."""
        namespace = pod["metadata"]["namespace"]
        group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        prepared: dict[str, HostVolume] = {}
        for volume in pod["spec"].get("volumes") or []:
            name = volume["name"]
            path = directory / "volumes" / name
            if "emptyDir" in volume:
                self._empty_dir(path, volume["emptyDir"] or {}, group)
            elif "configMap" in volume:
                spec = volume["configMap"]
                files = await self._object_files(namespace, spec, "configmap", spec.get("defaultMode", DEFAULT_MODE))
                write_payload(path, files, group)
            elif "secret" in volume:
                spec = volume["secret"]
                files = await self._object_files(namespace, spec, "secret", spec.get("defaultMode", DEFAULT_MODE))
                write_payload(path, files, group)
            elif "downwardAPI" in volume:
                spec = volume["downwardAPI"]
                mode = spec.get("defaultMode", DEFAULT_MODE)
                write_payload(path, _downward_files(pod, spec.get("items") or [], mode, self.allocatable), group)
            elif "projected" in volume:
                write_payload(path, await self._projected(pod, volume["projected"]), group)
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]
                path = await self._claim_path(namespace, claim["claimName"])
                prepared[name] = HostVolume(path, bool(claim.get("readOnly")))
                continue
            elif "ephemeral" in volume:
                path = await self._claim_path(namespace, f"{pod['metadata']['name']}-{name}")
            elif "hostPath" in volume:
                path = self._host_path(volume["hostPath"])
            else:
                kinds = sorted(k for k in volume if k != "name")
                raise VolumeError(f"volume {name!r}: type {kinds} is not supported by the process node")
            prepared[name] = HostVolume(path)
        return prepared

    async def refresh_tokens(self, pod: dict[str, Any], directory: Path) -> None:
        """Rewrite projected volumes with fresh tokens (the kubelet refreshes at 80% of a token's lifetime)."""
        uid = pod["metadata"]["uid"]
        self.token_refresh.pop(uid, None)
        for volume in pod["spec"].get("volumes") or []:
            projected = volume.get("projected")
            if projected and any("serviceAccountToken" in s for s in projected.get("sources") or []):
                write_payload(
                    directory / "volumes" / volume["name"],
                    await self._projected(pod, projected),
                    (pod["spec"].get("securityContext") or {}).get("fsGroup"),
                )

    def teardown(self, uid: str, directory: Path) -> None:
        """Unmount memory-backed emptyDirs (the rest is removed with the pod's directory)."""
        self.token_refresh.pop(uid, None)
        unmount_volumes(directory)
