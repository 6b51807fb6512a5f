"""GPU utilisation per worker, from the cluster's DCGM exporters, into job status and `/metrics`.

Where GPUs run, NVIDIA's dcgm-exporter serves `DCGM_FI_DEV_GPU_UTIL` per device with the pod and namespace holding
it, behind the Service `gpu-operator/nvidia-dcgm-exporter` (a local process node serves the same for its GPUs,
real or fake: node/devices/exporter.py). The operator watches that Service's EndpointSlices (a reflector, no
polling of the API) and scrapes each ready endpoint every `gpu_metrics_interval_seconds` (30 s, dcgm-exporter's
own collection interval), with a timeout and a size cap: an exporter is another program, and what it says is
untrusted — only series naming a pod the operator knows as a worker are kept, so nothing grows with what an
exporter invents. A worker's utilisation is the average over its devices.

What it feeds:
- `trainingjob_gpu_utilization_percent{namespace, trainingjob, worker}` (seed 002's gauge; `worker` is the worker's
  index, `<role>-<index>` for other roles), made at scrape time from the latest samples, so series go with pods;
- the planner (ObservedChildren.gpu_utilization -> status.resources.gpuUtilization, reconcile/resources.py): a job is
  queued when its average moved by the status' step or its workers appeared or went, never at every sample.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trainingjob.api import constants as k
from trainingjob.config import OperatorConfig
from trainingjob.kube.reflector import ApiClientTransport, ObjectKey, Reflector, Resource, object_key
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.resources import GPU_UTILIZATION_STEP

logger = logging.getLogger(__name__)
UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"
SCRAPE_TIMEOUT_SECONDS = 5.0
MAX_RESPONSE_BYTES = 4 * 2**20
PORT_NAMES = ("gpu-metrics", "metrics")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
_SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\}\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
PodKey = tuple[str, str]  # (namespace, pod name)


def parse_utilization(text: str) -> dict[PodKey, list[float]]:
    """Utilisation samples per pod from dcgm-exporter's text (pure). Lines without a pod, unparsable values and
    values outside 0-100 are skipped."""
    found: dict[PodKey, list[float]] = {}
    for line in text.splitlines():
        match = _SERIES.match(line)
        if match is None or match.group(1) != UTILIZATION:
            continue
        labels = dict(_LABEL.findall(match.group(2)))
        namespace = labels.get("namespace") or labels.get("exported_namespace")
        pod = labels.get("pod") or labels.get("exported_pod")
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if namespace and pod and 0.0 <= value <= 100.0:
            found.setdefault((namespace, pod), []).append(value)
    return found


def exporter_urls(body: Mapping[str, Any]) -> list[str]:
    """The scrape URLs of one EndpointSlice: its ready addresses on its metrics port (pure)."""
    ports = body.get("ports") or []
    port = next((p for p in ports if p.get("name") in PORT_NAMES), ports[0] if ports else None)
    if port is None or not port.get("port"):
        return []
    urls = []
    for endpoint in body.get("endpoints") or []:
        if (endpoint.get("conditions") or {}).get("ready") is False:
            continue
        for address in endpoint.get("addresses") or []:
            host = f"[{address}]" if ":" in address else address
            urls.append(f"http://{host}:{port['port']}/metrics")
    return urls


def worker_label(pod: PodView) -> str:
    return str(pod.index) if pod.role == k.WORKER else f"{pod.role}-{pod.index}"


class ExporterSlices:
    """A reflector's sink: the exporters' URLs by EndpointSlice."""

    def __init__(self) -> None:
        self.urls: dict[ObjectKey, list[str]] = {}

    def file(self, body: Mapping[str, Any]) -> list[str]:
        urls = exporter_urls(body)
        self.urls[object_key(body)] = urls
        return urls

    def replace(self, filed: dict[ObjectKey, Any]) -> None:
        self.urls = dict(filed)

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self.urls.pop(object_key(body), None)
        else:
            self.file(body)

    def all(self) -> list[str]:
        return sorted({url for urls in self.urls.values() for url in urls})


class GpuTelemetry:
    """The latest utilisation per worker pod, refreshed by `run`; jobs whose average moved are handed to `enqueue`."""

    def __init__(
        self,
        slices: ExporterSlices,
        workers: Callable[[], Iterable[tuple[ObjectKey, PodView]]],
        enqueue: Callable[[ObjectKey], None],
        interval: float,
    ) -> None:
        """`workers`: every (job key, worker pod) the operator caches."""
        self.slices = slices
        self.workers = workers
        self.enqueue = enqueue
        self.interval = interval
        self.by_pod: dict[PodKey, float] = {}
        self.owners: dict[PodKey, tuple[ObjectKey, str]] = {}
        self.announced: dict[ObjectKey, float] = {}

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_SECONDS)) as session:
            while True:
                texts = await asyncio.gather(*(self._scrape(session, url) for url in self.slices.all()))
                self.update(texts)
                await asyncio.sleep(self.interval)

    async def _scrape(self, session: aiohttp.ClientSession, url: str) -> str:
        try:
            async with session.get(url) as response:
                response.raise_for_status()
                data = await response.content.read(MAX_RESPONSE_BYTES)
        except (aiohttp.ClientError, TimeoutError) as error:
            logger.debug("scraping %s failed: %s", url, error)
            return ""
        return data.decode(errors="replace")

    def update(self, texts: Iterable[str]) -> None:
        """Keep the samples of known workers; queue the jobs whose average moved by a step, appeared or went."""
        owners = {(key[0], pod.name): (key, worker_label(pod)) for key, pod in self.workers()}
        samples: dict[PodKey, list[float]] = {}
        for text in texts:
            for pod, values in parse_utilization(text).items():
                if pod in owners:
                    samples.setdefault(pod, []).extend(values)
        self.by_pod = {pod: round(sum(values) / len(values), 1) for pod, values in samples.items()}
        self.owners = {pod: owners[pod] for pod in self.by_pod}
        self._announce()

    def _announce(self) -> None:
        sums: dict[ObjectKey, list[float]] = {}
        for pod, value in self.by_pod.items():
            sums.setdefault(self.owners[pod][0], []).append(value)
        current = {job: sum(values) / len(values) for job, values in sums.items()}
        for job in set(current) | set(self.announced):
            before, now = self.announced.get(job), current.get(job)
            if before is not None and now is not None and abs(now - before) < GPU_UTILIZATION_STEP:
                continue
            self.enqueue(job)
            if now is None:
                del self.announced[job]
            else:
                self.announced[job] = now

    def of_pods(self, namespace: str, names: Iterable[str]) -> dict[str, float]:
        """Utilisation by pod name for the given pods of one namespace (those reported)."""
        return {name: self.by_pod[(namespace, name)] for name in names if (namespace, name) in self.by_pod}

    def collector(self) -> Collector:
        return UtilizationCollector(self)


class UtilizationCollector(Collector):
    """trainingjob_gpu_utilization_percent from the latest samples, at scrape time."""

    def __init__(self, telemetry: GpuTelemetry) -> None:
        self.telemetry = telemetry

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "trainingjob_gpu_utilization_percent",
            "GPU utilization of each worker in percent (the average over its GPUs), from the DCGM exporters.",
            labels=["namespace", "trainingjob", "worker"],
        )
        telemetry = self.telemetry
        for pod, value in sorted(telemetry.by_pod.items()):
            (namespace, job), worker = telemetry.owners[pod]
            family.add_metric([namespace, job, worker], value)
        yield family


def cached_workers(indexes: Mapping[str, Mapping[Any, Any]]) -> Callable[[], Iterator[tuple[ObjectKey, PodView]]]:
    """Every (job key, worker pod) in the operator's pod index."""

    def workers() -> Iterator[tuple[ObjectKey, PodView]]:
        for key, store in list(indexes["worker_pods"].items()):
            for pod in list(store):
                yield key, pod

    return workers


def failure_logger(service: str) -> Callable[[Exception, float], None]:
    """Say once why the exporters cannot be watched (a namespaced install may not read that namespace), then
    keep retrying quietly: telemetry is an extra, not a reason to fill the log."""
    said = False

    def log(error: Exception, delay: float) -> None:
        nonlocal said
        level = logging.DEBUG if said else logging.WARNING
        said = True
        logger.log(
            level,
            "GPU telemetry cannot watch %s's EndpointSlices (%s); retrying in %.0fs; "
            "--gpu-metrics-service '' turns it off",
            service,
            error,
            delay,
        )

    return log


def start_telemetry(
    config: OperatorConfig,
    api: object,
    indexes: Mapping[str, Mapping[Any, Any]],
    enqueue: Callable[[ObjectKey], None],
) -> tuple[GpuTelemetry, list[asyncio.Task]] | None:
    """Watch the exporters' EndpointSlices and scrape them (None when config.gpu_metrics_service is "")."""
    if not config.gpu_metrics_service:
        return None
    namespace, _, service = config.gpu_metrics_service.partition("/")
    slices = ExporterSlices()
    reflector = Reflector(
        ApiClientTransport(api),
        ENDPOINT_SLICES.path(namespace),
        slices,
        f"GPU exporters ({config.gpu_metrics_service})",
        label_selector=f"kubernetes.io/service-name={service}",
        not_served_is_empty=True,
        on_failure=failure_logger(config.gpu_metrics_service),
    )
    telemetry = GpuTelemetry(slices, cached_workers(indexes), enqueue, config.gpu_metrics_interval_seconds)
    task = asyncio.create_task(watch_when_allowed(api, namespace, reflector, telemetry), name="gpu-telemetry")
    return telemetry, [task]


async def watch_when_allowed(api: Any, namespace: str, reflector: Reflector, telemetry: GpuTelemetry) -> None:
    """Run telemetry only where this operator may watch the exporters: a namespaced install is not granted the
    exporters' namespace, and retrying a refused watch forever would fill its log with 403s for an extra."""
    if not await may_watch_endpoint_slices(api, namespace):
        logger.info(
            "GPU telemetry is off: this operator may not watch EndpointSlices in namespace %s "
            "(grant list and watch there to turn it on; --gpu-metrics-service '' says so explicitly)",
            namespace,
        )
        return
    await asyncio.gather(reflector.run(), telemetry.run())


async def may_watch_endpoint_slices(api: Any, namespace: str) -> bool:
    """Ask the API server (SelfSubjectAccessReview, open to every authenticated user) whether this operator may
    list and watch EndpointSlices in the namespace; if the question itself fails, assume yes and let the
    reflector's retries say why."""
    reviews = client.AuthorizationV1Api(api)
    try:
        for verb in ("list", "watch"):
            attributes = client.V1ResourceAttributes(
                namespace=namespace, verb=verb, group="discovery.k8s.io", resource="endpointslices"
            )
            spec = client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
            body = client.V1SelfSubjectAccessReview(spec=spec)
            answer = await reviews.create_self_subject_access_review(body)
            if not answer.status.allowed:
                return False
    except Exception as error:  # an unanswered question must not turn telemetry off
        logger.debug("could not ask whether EndpointSlices in %s may be watched: %s", namespace, error)
    return True
