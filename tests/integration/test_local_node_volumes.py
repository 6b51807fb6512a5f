"""Volumes and security contexts on a local node: every supported volume source as the container sees it, the
projected token as the API server judges it, users, groups, fsGroup and a read-only root filesystem."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from kubernetes import client

from tests.kube import Kube, wait_until
from tests.local_node import local_pod, pod_log, python_container, wait_for_phase
from trainingjob.paths import cache_root

pytestmark = pytest.mark.integration

INSPECT = """
import json, os, stat
def describe(path):
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith(".."))
        return {name: describe(os.path.join(path, name)) for name in names}
    info = os.stat(path)
    return {"text": open(path).read(), "mode": oct(stat.S_IMODE(info.st_mode)), "gid": info.st_gid}
mounts = {line.split()[1]: line.split()[2] for line in open("/proc/mounts")}
ids = [os.getuid(), os.getgid(), sorted(os.getgroups())]
print(json.dumps({"volumes": {p: describe(p) for p in PATHS}, "mounts": mounts, "ids": ids}))
"""


def inspect_script(*paths: str) -> str:
    return f"PATHS = {list(paths)!r}\n" + INSPECT


def run_to_json(kube: Kube, namespace: str, pod: dict) -> dict:
    kube.core.create_namespaced_pod(namespace, pod)
    name = pod["metadata"]["name"]
    status = wait_for_phase(kube, namespace, name, ("Succeeded", "Failed"))
    log = pod_log(kube, namespace, name)
    assert status["phase"] == "Succeeded", log
    return json.loads(log.splitlines()[-1])


def test_config_map_secret_downward_api_and_projected_volumes(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"lr": "0.1", "epochs": "3"}}
    )
    secret = {"password": base64.b64encode(b"hunter2").decode()}
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": "creds"}, "data": secret})
    volumes = [
        {"name": "all-keys", "configMap": {"name": "settings"}},
        {
            "name": "some-keys",
            "configMap": {"name": "settings", "items": [{"key": "lr", "path": "deep/lr.txt", "mode": 0o600}]},
        },
        {"name": "secret", "secret": {"secretName": "creds", "defaultMode": 0o440}},
        {
            "name": "downward",
            "downwardAPI": {
                "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    {
                        "path": "cpu",
                        "resourceFieldRef": {"containerName": "main", "resource": "limits.cpu", "divisor": "1m"},
                    },
                ]
            },
        },
        {
            "name": "projected",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"audience": "tj-volume-test", "expirationSeconds": 3600, "path": "token"}},
                    {"configMap": {"name": "settings", "items": [{"key": "epochs", "path": "epochs"}]}},
                    {
                        "downwardAPI": {
                            "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                        }
                    },
                ]
            },
        },
    ]
    paths = {
        "all-keys": "/cfg/all",
        "some-keys": "/cfg/some",
        "secret": "/var/run/secrets/app",
        "downward": "/etc/podinfo",
        "projected": "/var/run/secrets/projected",
    }
    mounts = [{"name": name, "mountPath": path, "readOnly": True} for name, path in paths.items()]
    container = python_container(
        inspect_script(*paths.values()), volumeMounts=mounts, resources={"limits": {"cpu": "500m"}}
    )
    pod = local_pod("volumes", container, volumes=volumes, securityContext={"fsGroup": 2000})
    pod["metadata"]["labels"] = {"team": "vision", "tier": "gold"}
    seen = run_to_json(kube, namespace, pod)["volumes"]
    assert seen["/cfg/all"]["lr"]["text"] == "0.1" and seen["/cfg/all"]["epochs"]["text"] == "3"
    assert seen["/cfg/all"]["lr"]["mode"] == "0o644" and seen["/cfg/all"]["lr"]["gid"] == 2000
    # mode 0600 for the item, readable by fsGroup (as the kubelet's volume ownership makes it)
    assert seen["/cfg/some"] == {"deep": {"lr.txt": {"text": "0.1", "mode": "0o640", "gid": 2000}}}
    assert seen["/var/run/secrets/app"]["password"]["text"] == "hunter2"
    assert seen["/var/run/secrets/app"]["password"]["mode"] == "0o440"
    assert seen["/var/run/secrets/app"]["password"]["gid"] == 2000
    assert seen["/etc/podinfo"]["labels"]["text"] == 'team="vision"\ntier="gold"'
    assert seen["/etc/podinfo"]["name"]["text"] == "volumes" and seen["/etc/podinfo"]["cpu"]["text"] == "500"
    projected = seen["/var/run/secrets/projected"]
    assert projected["epochs"]["text"] == "3" and projected["namespace"]["text"] == namespace
    review = client.AuthenticationV1Api(kube.api).create_token_review(
        {"spec": {"token": projected["token"]["text"], "audiences": ["tj-volume-test"]}}
    )
    assert review.status.authenticated, review.status.error
    assert review.status.user.username == f"system:serviceaccount:{namespace}:default"
    pod_uid = kube.core.read_namespaced_pod("volumes", namespace).metadata.uid
    assert review.status.user.extra["authentication.kubernetes.io/pod-uid"] == [pod_uid]


def test_empty_dirs_are_shared_between_containers_and_memory_ones_are_tmpfs(kube: Kube, namespace: str) -> None:
    writer = python_container(
        "open('/scratch/handoff', 'w').write('from init')",
        name="writer",
        volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}],
    )
    reader = python_container(
        inspect_script("/scratch", "/dev/shm"),
        volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}, {"name": "shm", "mountPath": "/dev/shm"}],
    )
    volumes = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
    ]
    pod = local_pod("emptydirs", reader, initContainers=[writer], volumes=volumes, securityContext={"fsGroup": 2000})
    seen = run_to_json(kube, namespace, pod)
    assert seen["volumes"]["/scratch"]["handoff"]["text"] == "from init"
    assert seen["volumes"]["/scratch"]["handoff"]["gid"] == 2000  # the setgid directory hands fsGroup down
    assert seen["mounts"]["/dev/shm"] == "tmpfs"
    assert 2000 in seen["ids"][2]


def test_a_persistent_volume_claim_is_the_bound_volume_s_directory(kube: Kube, namespace: str) -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    kube.core.create_namespaced_persistent_volume_claim(namespace, claim)
    volume = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    mount = [{"name": "data", "mountPath": "/data"}]
    write = python_container("open('/data/checkpoint', 'w').write('epoch 3')", volumeMounts=mount)
    kube.core.create_namespaced_pod(namespace, local_pod("writer", write, volumes=volume))
    assert wait_for_phase(kube, namespace, "writer", ("Succeeded", "Failed"))["phase"] == "Succeeded"
    bound = kube.core.read_namespaced_persistent_volume_claim("data", namespace).spec.volume_name
    host_path = Path(kube.core.read_persistent_volume(bound).spec.host_path.path)
    assert (host_path / "checkpoint").read_text() == "epoch 3"
    assert (host_path / "checkpoint").stat().st_uid == 1000
    read = python_container("print(open('/data/checkpoint').read())", volumeMounts=mount)
    kube.core.create_namespaced_pod(namespace, local_pod("reader", read, volumes=volume))
    assert wait_for_phase(kube, namespace, "reader", ("Succeeded", "Failed"))["phase"] == "Succeeded"
    assert pod_log(kube, namespace, "reader") == "epoch 3\n"


def test_users_groups_and_a_read_only_root_filesystem_are_enforced(kube: Kube, namespace: str) -> None:
    script = """
import json, os
results = {"ids": [os.getuid(), os.getgid(), sorted(os.getgroups())]}
for path in ("/written-to-root", "/tmp/ok", "/work-dir/ok", "/usr/bin/not-allowed"):
    try:
        open(path, "w").write("x")
        results[path] = "written"
    except OSError as error:
        results[path] = error.strerror
results["hostname"] = open("/etc/hostname").read().strip()
results["cache"] = sorted(os.listdir(CACHE)) if os.path.isdir(CACHE) else None
print(json.dumps(results))
"""
    cache = str(cache_root().resolve())
    container = python_container(
        f"CACHE = {cache!r}\n{script}", volumeMounts=[{"name": "work", "mountPath": "/work-dir"}]
    )
    container["securityContext"].update(runAsUser=1234, runAsGroup=5678, readOnlyRootFilesystem=True)
    pod = local_pod(
        "ids",
        container,
        volumes=[{"name": "work", "emptyDir": {}}],
        securityContext={"fsGroup": 3000, "supplementalGroups": [4000]},
        hostname="trainer-7",
    )
    seen = run_to_json(kube, namespace, pod)
    assert seen["ids"] == [1234, 5678, [3000, 4000, 5678]]
    assert seen["/written-to-root"] == "Read-only file system"
    assert seen["/usr/bin/not-allowed"] == "Read-only file system"
    assert seen["/tmp/ok"] == "written" and seen["/work-dir/ok"] == "written"
    assert seen["hostname"] == "trainer-7"
    # The node's cache (clusters' keys among it) is masked: only the venv the image maps to is mounted there.
    assert seen["cache"] == ["runtimes"]


def test_a_missing_config_map_volume_holds_the_pod_until_it_exists(kube: Kube, namespace: str) -> None:
    container = python_container("print(open('/cfg/key').read())", volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}])
    pod = local_pod("later", container, volumes=[{"name": "cfg", "configMap": {"name": "late"}}])
    kube.core.create_namespaced_pod(namespace, pod)

    def failed_mount() -> bool:
        events = kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=later").items
        return any(e.reason == "FailedMount" and 'configmap "late" not found' in e.message for e in events)

    wait_until(failed_mount, 60, "a FailedMount event")
    assert kube.pod_phase(namespace, "later") == "Pending"
    kube.core.create_namespaced_config_map(namespace, {"metadata": {"name": "late"}, "data": {"key": "arrived"}})
    assert wait_for_phase(kube, namespace, "later", ("Succeeded", "Failed"), timeout=120)["phase"] == "Succeeded"
    assert pod_log(kube, namespace, "later") == "arrived\n"
    assert os.path.exists("/proc")  # the test ran on the host that runs the node
