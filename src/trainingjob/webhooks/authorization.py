"""A TrainingJob grants no more than its author could do directly (issue 41, finding 2).

The operator creates a job's pods with its own rights, so before the mutating webhook stamps a job as admitted
(reconcile/admission.py) it asks the API server, by SubjectAccessReview for the request's user, whether that user
may do what the pods will do, judged on the pods exactly as the operator would build them (every role):

- `create pods` in the namespace: without it a TrainingJob would be a way around RBAC;
- `get secrets <name>` for every Secret the pods read (env `secretKeyRef`, `envFrom`, secret and projected
  volumes), `get configmaps <name>` likewise: a pod hands their content to its code, which can report it back
  (the attack read a Secret through its own progress report). Kubernetes itself lets any pod author mount any
  Secret of the namespace; this is stricter on purpose. The job's own ConfigMap and MPI key are the operator's;
- `use hostaccess` (group ml.example.com, a permission with no objects, granted by the ClusterRole
  `trainingjob-host-access`) when a pod asks for the node itself: privileged, privilege escalation, added
  capabilities, hostPath volumes, host network/PID/IPC, host ports, an unconfined seccomp or AppArmor profile,
  /proc unmasked, sysctls, or a toleration of every taint or of the control plane's. Not because the author could
  not do it in a pod of their own (PodSecurity judges the operator's pods exactly as theirs), but because policies
  that look at who asks (a ValidatingAdmissionPolicy or Gatekeeper rule by user or group) see the operator, not
  the author, so the webhook cannot tell whether they would have let the author do it.

Not checked, with the reason: the ServiceAccount (any pod author may name any ServiceAccount of the namespace;
Kubernetes has no permission for using one), PersistentVolumeClaims (the same), imagePullSecrets (only the node
reads them). PodSecurity's namespace level applies to the operator's pods as to anyone's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name
from trainingjob.api.replicas import role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import desired_worker_pod, framework_children
from trainingjob.config import OperatorConfig
from trainingjob.webhooks.admission import UserInfo

Body = dict[str, Any]
CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


@dataclass(frozen=True)
class Access:
    """One SubjectAccessReview's resourceAttributes."""

    verb: str
    resource: str
    namespace: str
    name: str = ""
    group: str = ""

    def attributes(self) -> dict[str, str]:
        fields = {"verb": self.verb, "resource": self.resource, "namespace": self.namespace}
        fields.update({key: value for key, value in (("name", self.name), ("group", self.group)) if value})
        return fields

    def words(self) -> str:
        target = f"{self.resource} {self.name}" if self.name else self.resource
        group = f" (group {self.group})" if self.group else ""
        return f"{self.verb} {target}{group} in namespace {self.namespace}"


class AccessReviewer(Protocol):
    """SubjectAccessReviews; ApiException or OSError when the API server cannot answer."""

    async def allows(self, user: UserInfo, access: Access) -> bool: ...


def _env_references(container: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for variable in container.get("env") or []:
        source = (variable or {}).get("valueFrom") or {}
        for key, kind in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
            if (source.get(key) or {}).get("name"):
                yield kind, source[key]["name"]
    for source in container.get("envFrom") or []:
        for key, kind in (("secretRef", "secrets"), ("configMapRef", "configmaps")):
            if ((source or {}).get(key) or {}).get("name"):
                yield kind, source[key]["name"]


def _volume_references(volume: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if (volume.get("secret") or {}).get("secretName"):
        yield "secrets", volume["secret"]["secretName"]
    if (volume.get("configMap") or {}).get("name"):
        yield "configmaps", volume["configMap"]["name"]
    for source in (volume.get("projected") or {}).get("sources") or []:
        for key, kind in (("secret", "secrets"), ("configMap", "configmaps")):
            if ((source or {}).get(key) or {}).get("name"):
                yield kind, source[key]["name"]


def read_objects(pod: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(resource, name) of every Secret and ConfigMap the pod's code can read."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    found = {ref for container in containers for ref in _env_references(container)}
    return found | {ref for volume in spec.get("volumes") or [] for ref in _volume_references(volume)}


def _security_asks(context: Mapping[str, Any]) -> Iterator[str]:
    if context.get("privileged"):
        yield "a privileged container"
    if context.get("allowPrivilegeEscalation"):
        yield "privilege escalation"
    if (context.get("capabilities") or {}).get("add"):
        yield f"capabilities {', '.join(map(str, context['capabilities']['add']))}"
    if context.get("procMount") == "Unmasked":
        yield "an unmasked /proc"
    for profile in ("seccompProfile", "appArmorProfile"):
        if (context.get(profile) or {}).get("type") == "Unconfined":
            yield f"an unconfined {profile.removesuffix('Profile')} profile"
    if context.get("sysctls"):
        yield "sysctls"
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        yield "a Windows host process"


def host_access(pod: Mapping[str, Any]) -> list[str]:
    """What the pod asks of the node itself, in words (empty: nothing)."""
    spec = pod.get("spec") or {}
    asks = [f"the host's {name[4:]} namespace" for name in ("hostNetwork", "hostPID", "hostIPC") if spec.get(name)]
    asks += [f"hostPath volume {v.get('name')}" for v in spec.get("volumes") or [] if (v or {}).get("hostPath")]
    asks += list(_security_asks(spec.get("securityContext") or {}))
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        asks += list(_security_asks(container.get("securityContext") or {}))
        asks += [f"host port {p['hostPort']}" for p in container.get("ports") or [] if (p or {}).get("hostPort")]
    for toleration in spec.get("tolerations") or []:
        key = (toleration or {}).get("key") or ""
        if not key and toleration.get("operator") == "Exists":
            asks.append("a toleration of every taint")
        elif key in CONTROL_PLANE_TAINTS:
            asks.append(f"a toleration of {key}")
    return list(dict.fromkeys(asks))


def job_pods(job: TrainingJob, config: OperatorConfig) -> list[Body]:
    """One pod of each role, as the operator builds them."""
    return [desired_worker_pod(job, 0, 0, config, role=role) for role in role_counts(job.spec)]


def own_objects(job: TrainingJob) -> set[tuple[str, str]]:
    """(resource, name) of what the operator itself makes for the job and its pods read: its ConfigMap and its
    framework's children (MPI's key Secret). They hold nothing of the author's, so reading them needs no grant."""
    children = {(f"{child['kind'].lower()}s", child["metadata"]["name"]) for child in framework_children(job)}
    return {("configmaps", config_map_name(job.name)), *children}


def required_access(job: TrainingJob, config: OperatorConfig) -> list[tuple[Access, str]]:
    """Each permission the job's author needs, with why."""
    pods = job_pods(job, config)
    namespace = job.namespace
    needed = [(Access("create", "pods", namespace), "the job runs pods")]
    for resource, name in sorted(set().union(*(read_objects(pod) for pod in pods)) - own_objects(job)):
        needed.append((Access("get", resource, namespace, name), "its pods read it"))
    asks = list(dict.fromkeys(ask for pod in pods for ask in host_access(pod)))
    if asks:
        needed.append((Access("use", "hostaccess", namespace, group=k.GROUP), f"its pods ask for {', '.join(asks)}"))
    return needed


async def denials(job: TrainingJob, user: UserInfo, reviewer: AccessReviewer, config: OperatorConfig) -> list[str]:
    """What `user` may not do that the job would do for them, in words (empty: nothing)."""
    refused = []
    for access, why in required_access(job, config):
        if not await reviewer.allows(user, access):
            refused.append(f"{user.username or 'you'} may not {access.words()} ({why})")
    return refused
