"""The small client layer under the job commands: configuration, TrainingJob/Pod/Event calls, watches, and every
failure turned into a CliError that says what went wrong in one line (no tracebacks for users; the wording is in
cli/kube_errors.py).

Objects travel as plain dicts in their API (camelCase) shape, whatever the API group, so rendering and JSON/YAML
output never depend on the client's model classes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException, incluster_config
from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

from trainingjob.api import constants as k
from trainingjob.api.conversion import convert, to_internal
from trainingjob.api.versions import field_names_as_written, shape_of
from trainingjob.cli.common import CliError, Target, one_line
from trainingjob.cli.kube_errors import map_api_error, map_connection_error, map_log_error
from trainingjob.cli.kubeconfig_files import check_kubeconfig_files
from trainingjob.kube.reflector import ApiClientTransport, Gone, Reflector, Resource
from trainingjob.kube.status import event_time, raise_for_status
from trainingjob.user_agent import CLI, named

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_NAMESPACE = "default"
NO_KUBECONFIG = "no kubeconfig found: set KUBECONFIG, pass --kubeconfig, or run inside a cluster"
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
# Watches end on the server after this long and are resumed from the last resourceVersion seen.
WATCH_SECONDS = 290
JOBS = Resource(k.GROUP, k.STORAGE_VERSION, k.PLURAL, k.KIND)
PODS = Resource("", "v1", "pods", "Pod")


# ---------------------------------------------------------------------------------------------------------------
# Configuration


def kubeconfig_paths(explicit: str | None, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The kubeconfig path list to load (os.pathsep-separated like KUBECONFIG), or None for in-cluster.

    Order: --kubeconfig, then $KUBECONFIG, then ~/.kube/config if it exists; raises CliError when a file named
    explicitly does not exist, or when nothing is found and we are not inside a cluster.
    """
    if explicit:
        if not Path(explicit).expanduser().is_file():
            raise CliError(f"kubeconfig {explicit} does not exist")
        return explicit
    from_env = environ.get("KUBECONFIG", "")
    if from_env:
        if not any(Path(p).expanduser().is_file() for p in from_env.split(os.pathsep) if p):
            raise CliError(f"{NO_KUBECONFIG} (KUBECONFIG={from_env} names no existing file)")
        return from_env
    if Path(DEFAULT_KUBECONFIG).expanduser().is_file():
        return DEFAULT_KUBECONFIG
    if "KUBERNETES_SERVICE_HOST" in environ and (SERVICE_ACCOUNT_DIR / "token").is_file():
        return None
    raise CliError(NO_KUBECONFIG)


async def load_configuration(target: Target) -> tuple[client.Configuration, str]:
    """The client configuration for `target` and the namespace to use when none is given."""
    configuration = client.Configuration()
    paths = kubeconfig_paths(target.kubeconfig, os.environ)
    if paths is None:
        incluster_config.load_incluster_config(client_configuration=configuration)
        namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
        namespace = namespace_file.read_text().strip() if namespace_file.is_file() else DEFAULT_NAMESPACE
        return configuration, target.namespace or namespace
    check_kubeconfig_files(paths)
    try:
        merged = KubeConfigMerger(paths)
        if merged.config is None:
            raise CliError(NO_KUBECONFIG)
        loader = KubeConfigLoader(config_dict=merged.config, config_base_path=None, active_context=target.context)
        await loader.load_and_set(configuration)
    except CliError:
        raise
    except (ConfigException, AssertionError, KeyError, TypeError, OSError, yaml.YAMLError) as error:
        detail = one_line(str(error)) or "no usable current-context, cluster or user"
        raise CliError(f"cannot use kubeconfig {paths}: {detail}") from None
    context = (loader.current_context or {}).get("context") or {}
    return configuration, target.namespace or context.get("namespace") or DEFAULT_NAMESPACE


# ---------------------------------------------------------------------------------------------------------------
# The client


def _timeout(read: float = READ_TIMEOUT) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(connect=CONNECT_TIMEOUT, sock_connect=CONNECT_TIMEOUT, sock_read=read)


class Client:
    """The API calls the job commands make; every method raises CliError on failure."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.server = api.configuration.host
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, target: Target) -> AsyncIterator[Client]:
        configuration, namespace = await load_configuration(target)
        api = named(client.ApiClient(configuration=configuration), CLI)
        try:
            yield cls(api, namespace)
        finally:
            await api.close()

    @contextlib.contextmanager
    def errors(self, namespace: str | None = None, name: str | None = None, resource: str = k.PLURAL) -> Iterator[None]:
        """Turn API and connection failures inside the block into CliError."""
        try:
            yield
        except ApiException as error:
            raise map_api_error(error, namespace=namespace, name=name, resource=resource) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise map_connection_error(error, self.server) from None

    def _plain(self, model: Any) -> Any:
        return self.api.sanitize_for_serialization(model)

    # TrainingJobs ------------------------------------------------------------------------------------------------
    # Read and written in the storage version, which needs no conversion webhook (so `tj` works while the operator
    # is down), and handed to the commands in the internal shape (api/conversion.py) whatever version they came in.

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        with self.errors(namespace, name):
            return to_internal(
                await self.custom.get_namespaced_custom_object(
                    k.GROUP, k.STORAGE_VERSION, namespace, k.PLURAL, name, _request_timeout=_timeout()
                )
            )

    async def list_jobs(self, namespace: str | None, name: str | None = None) -> dict[str, Any]:
        """The TrainingJobList of `namespace` (None: every namespace), optionally only the job called `name`."""
        selector = {"field_selector": f"metadata.name={name}"} if name else {}
        with self.errors(namespace, name):
            if namespace is None:
                listing = await self.custom.list_cluster_custom_object(
                    k.GROUP, k.STORAGE_VERSION, k.PLURAL, _request_timeout=_timeout(), **selector
                )
            else:
                listing = await self.custom.list_namespaced_custom_object(
                    k.GROUP, k.STORAGE_VERSION, namespace, k.PLURAL, _request_timeout=_timeout(), **selector
                )
        listing["items"] = [to_internal(job) for job in listing.get("items") or []]
        return listing

    async def create_job(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        """Created in the storage version: a manifest of another version is converted here, as the webhook would."""
        stored = convert(manifest, f"{k.GROUP}/{k.STORAGE_VERSION}")
        try:
            with self.errors(namespace, manifest.get("metadata", {}).get("name")):
                created = await self.custom.create_namespaced_custom_object(
                    k.GROUP, k.STORAGE_VERSION, namespace, k.PLURAL, stored, _request_timeout=_timeout()
                )
        except CliError as error:  # the API server's words name v1's fields: say them as the manifest did
            written = shape_of(manifest.get("apiVersion") or k.STORAGE_VERSION)
            line = field_names_as_written(str(error), written)
            raise CliError(
                line, error.exit_code, status=error.status, reason=error.reason, api_message=error.api_message
            ) from None
        return to_internal(created)

    async def patch_job(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of the job (RFC 7386)."""
        with self.errors(namespace, name):
            return await self.custom.patch_namespaced_custom_object(
                k.GROUP,
                k.STORAGE_VERSION,
                namespace,
                k.PLURAL,
                name,
                patch,
                _content_type="application/merge-patch+json",
                _request_timeout=_timeout(),
            )

    async def scale_job(self, namespace: str, name: str, workers: int) -> dict[str, Any]:
        """Set the worker count through the scale subresource (what `kubectl scale` and autoscalers use)."""
        with self.errors(namespace, name):
            return await self.custom.patch_namespaced_custom_object_scale(
                k.GROUP,
                k.STORAGE_VERSION,
                namespace,
                k.PLURAL,
                name,
                {"spec": {"replicas": workers}},
                _content_type="application/merge-patch+json",
                _request_timeout=_timeout(),
            )

    async def delete_job(self, namespace: str, name: str) -> dict[str, Any]:
        with self.errors(namespace, name):
            return await self.custom.delete_namespaced_custom_object(
                k.GROUP, k.STORAGE_VERSION, namespace, k.PLURAL, name, _request_timeout=_timeout()
            )

    async def watch_jobs(
        self, namespace: str | None, resource_version: str, name: str | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Yield (ADDED|MODIFIED|DELETED, job) from the watch API, starting after `resource_version`, forever.

        Each watch request (the shared watch loop's, kube/reflector.py) ends on the server after WATCH_SECONDS and
        is resumed from the last resourceVersion seen (bookmarks included). If that version is too old (410 Gone),
        the jobs are listed again and each is yielded as MODIFIED (a watched `name` that is gone by then as
        DELETED). Failures raise CliError: a person is watching, and says whether to try again.
        """
        reflector = Reflector(
            ApiClientTransport(self.api),
            JOBS.path(namespace),
            None,
            "trainingjobs",
            field_selector=f"metadata.name={name}" if name else "",
            watch_timeout=WATCH_SECONDS,
        )
        version = resource_version
        while True:
            try:
                with self.errors(namespace, name):
                    async with contextlib.aclosing(reflector.events(version)) as events:
                        async for kind, job in events:
                            yield kind, to_internal(job)
                version = reflector.resource_version or version
            except Gone:
                listing = await self.list_jobs(namespace, name)
                version = listing["metadata"]["resourceVersion"]
                for job in listing.get("items", []):
                    yield "MODIFIED", job
                if name and not listing.get("items"):
                    yield "DELETED", {"metadata": {"name": name, "namespace": namespace}}

    # Runtimes (docs/runtimes.md) ------------------------------------------------------------------------------

    async def get_runtime(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """A ClusterTrainingRuntime, or a TrainingRuntime of `namespace`."""
        cluster = kind == k.CLUSTER_RUNTIME_KIND
        plural = k.CLUSTER_RUNTIME_PLURAL if cluster else k.NAMESPACED_RUNTIME_PLURAL
        with self.errors(None if cluster else namespace, name, resource=plural):
            if cluster:
                found = await self.custom.get_cluster_custom_object(
                    k.GROUP, k.RUNTIME_VERSION, plural, name, _request_timeout=_timeout()
                )
            else:
                found = await self.custom.get_namespaced_custom_object(
                    k.GROUP, k.RUNTIME_VERSION, namespace, plural, name, _request_timeout=_timeout()
                )
        return {**found, "kind": kind}

    async def frame_from_runtime(self, namespace: str, manifest: dict[str, Any]) -> None:
        """A job naming a runtime without a framework takes the runtime's (`tj submit --runtime`, the client)."""
        spec = manifest["spec"]
        ref = spec.get("runtimeRef")
        if spec.get("framework") or not ref:
            return
        found = await self.get_runtime(ref.get("kind") or k.CLUSTER_RUNTIME_KIND, namespace, ref["name"])
        spec["framework"] = (found.get("spec") or {}).get("framework", "")

    # Pods, logs and events ---------------------------------------------------------------------------------------

    async def wait_job_pods_gone(self, namespace: str, name: str, job_uid: str) -> None:
        """Until no pod that job `name` of uid `job_uid` controlled is left, Terminating ones included (a later job
        of the same name is not waited for): a list, then the shared watch loop (kube/reflector.py) on the job's
        pods until the last one is deleted; a 410 lists again."""
        selector = f"{k.LABEL_JOB_NAME}={name}"
        reflector = Reflector(
            ApiClientTransport(self.api),
            PODS.path(namespace),
            None,
            "pods",
            label_selector=selector,
            watch_timeout=WATCH_SECONDS,
        )
        while True:
            with self.errors(namespace, None, resource="pods"):
                listing = await self.core.list_namespaced_pod(
                    namespace, label_selector=selector, _request_timeout=_timeout()
                )
            left = {pod.metadata.uid for pod in listing.items if _controlled_by(pod, job_uid)}
            version = listing.metadata.resource_version
            try:
                while left:
                    with self.errors(namespace, None, resource="pods"):
                        async with contextlib.aclosing(reflector.events(version)) as events:
                            async for kind, pod in events:
                                if kind == "DELETED":
                                    left.discard((pod.get("metadata") or {}).get("uid"))
                                if not left:
                                    return
                    version = reflector.resource_version or version
                return
            except Gone:
                continue

    async def worker_pods(self, namespace: str, name: str, index: int) -> list[dict[str, Any]]:
        """Pods of worker `index` of job `name` (usually one; two while an old attempt's pod terminates)."""
        selector = f"{k.LABEL_JOB_NAME}={name},{k.LABEL_WORKER_INDEX}={index}"
        with self.errors(namespace, None, resource="pods"):
            pods = await self.core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=_timeout())
        return [self._plain(pod) for pod in pods.items]

    async def pod_log(self, namespace: str, pod: str, follow: bool) -> AsyncIterator[bytes]:
        """The log of the pod's trainer container in chunks as they come (until the container ends, with
        `follow`). Raises CliError "no logs available" when the API server cannot get them from the node."""
        try:
            response = await self.core.read_namespaced_pod_log(
                pod,
                namespace,
                container=k.TRAINER_CONTAINER,
                follow=follow,
                _preload_content=False,
                _request_timeout=_timeout(None if follow else READ_TIMEOUT),
            )
            await raise_for_status(response)
        except ApiException as error:
            raise map_log_error(error, namespace, pod) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise map_connection_error(error, self.server) from None
        try:
            while True:
                with self.errors(namespace, pod, resource="pods"):
                    chunk = await response.content.readany()
                if not chunk:
                    return
                yield chunk
        finally:
            response.release()

    async def job_events(
        self, namespace: str, name: str, uid: str | None = None, kind: str = k.KIND
    ) -> list[dict[str, Any]]:
        """Events about TrainingJob (or another `kind`) `name`, of this incarnation when `uid` is given, oldest
        first."""
        selector = f"involvedObject.name={name},involvedObject.kind={kind}"
        with self.errors(namespace, None, resource="events"):
            events = await self.core.list_namespaced_event(
                namespace, field_selector=selector, _request_timeout=_timeout()
            )
        plain = [self._plain(event) for event in events.items]
        if uid:
            plain = [e for e in plain if e.get("involvedObject", {}).get("uid") in (None, "", uid)]
        return sorted(plain, key=event_time)


def _controlled_by(pod: Any, uid: str) -> bool:
    return any(ref.uid == uid and ref.controller for ref in pod.metadata.owner_references or [])
