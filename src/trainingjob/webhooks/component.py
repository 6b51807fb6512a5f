"""The webhooks as one operator component: start() before the caches fill, stop() on the way out.

start() loads (or creates) the TLS Secret, serves /convert, /mutate and /validate, and points the CRD's conversion
and the webhook configurations at a live operator; a background loop then keeps all three current: certificate
rotation (tls.py) and re-pointing when someone re-applies deploy/crd/ or the operator they point at goes away
(registration.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.api.times import parse_time
from trainingjob.config import OperatorConfig
from trainingjob.kube.backoff import watch_backoff
from trainingjob.kube.ttl_cache import TtlCache
from trainingjob.scheduling.quota import QUOTA_TTL
from trainingjob.webhooks.admission import AdmissionRequest, UserInfo, Verdict
from trainingjob.webhooks.authorization import Access
from trainingjob.webhooks.client_auth import ApiServerCallers
from trainingjob.webhooks.defaulting import mutate
from trainingjob.webhooks.registration import Registration, answer
from trainingjob.webhooks.server import WebhookObserver, WebhookServer
from trainingjob.webhooks.stamping import admit, admit_sweep
from trainingjob.webhooks.tls import Rotation, SecretStore, ServingNames, WebhookTls, advance, next_change
from trainingjob.webhooks.upkeep import ObjectWatches, kept_objects
from trainingjob.webhooks.validation import validate

logger = logging.getLogger(__name__)
LOOKUP_TIMEOUT = 3.0  # one lookup; the API server gives the webhook webhook_config.TIMEOUT_SECONDS in all
# How long a SubjectAccessReview may be tried again after a timeout or a 5xx/429 before the create is refused: within
# the API server's wait for the webhook, with a margin for the rest of the answer.
REVIEW_BUDGET = w.TIMEOUT_SECONDS - 2.0
REVIEW_RETRY_DELAY = 0.25
REVIEW_TTL = 10.0  # seconds a SubjectAccessReview's answer is kept
OPTIONS = {"_preload_content": False, "_request_timeout": LOOKUP_TIMEOUT}
MIN_DELAY = 0.5  # seconds: the shortest sleep of the upkeep when something is (over)due
RECOMPUTE_AFTER = 600.0  # seconds: the longest sleep (what is due is recomputed from the wall clock, nothing read)
FALLBACK_INTERVAL = 30.0  # seconds between checks while a watch is refused


@dataclass(frozen=True)
class WebhookSettings:
    """What `tj operator` is told about its webhooks."""

    port: int = w.WEBHOOK_PORT
    bind: str | None = None  # default: 0.0.0.0 in the cluster (behind the Service), 127.0.0.1 outside
    url: str | None = None  # the base URL the API server uses, outside the cluster (default https://127.0.0.1:port)
    namespace: str = w.SERVICE_NAMESPACE  # of the TLS Secret and, in the cluster, of the operator's Service
    in_cluster: bool = False
    default_image: str | None = c.DEFAULT_IMAGE_PATTERN
    rotation: Rotation = field(default_factory=Rotation)
    # Outside the cluster, how often another live operator the webhooks point at is probed (take-over once gone).
    interval: float = 5.0
    callers: ApiServerCallers | None = None  # who may call /mutate and /validate (None: whoever reaches the port)

    @property
    def bind_address(self) -> str:
        return self.bind or ("0.0.0.0" if self.in_cluster else "127.0.0.1")

    @property
    def endpoint(self) -> w.Endpoint:
        if self.in_cluster:
            return w.service_endpoint(self.namespace)
        return w.Endpoint(url=self.url or f"https://127.0.0.1:{self.port}")

    @property
    def settle(self) -> float:
        """Seconds between the API server's objects first carrying a new CA and that CA signing the serving
        certificate: the API server reloads its webhook clients asynchronously (as the old 5 s look-again did)."""
        return min(5.0, max(self.rotation.cert_validity.total_seconds() / 20, 0.5))

    def serving_names(self) -> ServingNames:
        service = f"{w.SERVICE_NAME}.{self.namespace}"
        dns = [f"{service}.svc", f"{service}.svc.cluster.local", service, w.SERVICE_NAME, "localhost"]
        ips = ["127.0.0.1"]
        host = urlsplit(self.url).hostname if self.url else None
        if host:
            try:
                ips.append(str(ipaddress.ip_address(host)))
            except ValueError:
                dns.append(host)
        return ServingNames(tuple(dict.fromkeys(dns)), tuple(dict.fromkeys(ips)))


class ApiClusterView:
    """validation.ClusterView over the API, as plain JSON.

    A namespace found without ResourceQuotas (the common case) is taken at its word for QUOTA_TTL: a burst of 1000
    jobs into one namespace cost 1000 LISTs of nothing. One with quotas is read for every job, since `used` words
    the warning of a job that must wait. A quota created within that window is missed by this early check only;
    the API server enforces it on every pod anyway."""

    def __init__(self, api: client.ApiClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.core = client.CoreV1Api(api)
        self.scheduling = client.SchedulingV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        # Concurrent admissions into one namespace share one read; only an empty answer outlives its call.
        self.quota_reads: TtlCache[list[dict[str, Any]]] = TtlCache(self._list_quotas, QUOTA_TTL, clock=clock)

    async def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await answer(self.core.read_namespaced_persistent_volume_claim(name, namespace, **OPTIONS))

    async def priority_class(self, name: str) -> dict[str, Any] | None:
        return await answer(self.scheduling.read_priority_class(name, **OPTIONS))

    async def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await answer(self.core.read_namespaced_service_account(name, namespace, **OPTIONS))

    async def runtime(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind == c.CLUSTER_RUNTIME_KIND:
            call = self.custom.get_cluster_custom_object(
                c.GROUP, c.RUNTIME_VERSION, c.CLUSTER_RUNTIME_PLURAL, name, **OPTIONS
            )
        else:
            call = self.custom.get_namespaced_custom_object(
                c.GROUP, c.RUNTIME_VERSION, namespace, c.NAMESPACED_RUNTIME_PLURAL, name, **OPTIONS
            )
        found = await answer(call)
        return None if found is None else {**found, "kind": kind}

    async def quotas(self, namespace: str) -> list[dict[str, Any]]:
        items = await self.quota_reads.get(namespace)
        if items:
            self.quota_reads.forget(namespace)  # a namespace with quotas is read afresh for the next job
        return items

    async def _list_quotas(self, namespace: str) -> list[dict[str, Any]]:
        return ((await answer(self.core.list_namespaced_resource_quota(namespace, **OPTIONS))) or {}).get("items") or []

    async def limit_ranges(self, namespace: str) -> list[dict[str, Any]]:
        return ((await answer(self.core.list_namespaced_limit_range(namespace, **OPTIONS))) or {}).get("items") or []


def transient(error: BaseException) -> bool:
    """A failure that asking again may mend: no answer in time, a broken connection, a 5xx or 429."""
    return not isinstance(error, ApiException) or error.status in (429,) or (error.status or 0) >= 500


class ApiAccessReviewer:
    """authorization.AccessReviewer over the API: SubjectAccessReviews, each answer kept for REVIEW_TTL seconds
    (a burst of jobs by one author into one namespace asks once; the API server's own webhook authorizer caches
    the same way)."""

    def __init__(
        self, api: client.ApiClient, clock: Callable[[], float] = time.monotonic, budget: float = REVIEW_BUDGET
    ) -> None:
        self.authorization = client.AuthorizationV1Api(api)
        self.answers: TtlCache[bool] = TtlCache(self._review, REVIEW_TTL, clock=clock)
        self.clock = clock
        self.budget = budget

    async def allows(self, user: UserInfo, access: Access) -> bool:
        """One review shared by every request asking the same at once; one that failed for a busy API server (a
        timeout, 5xx, 429) is asked again while the budget lasts, so a burst of creates is not refused together
        for one slow answer. The last failure is raised (the create is refused: admission never guesses)."""
        key = json.dumps(
            [user.username, user.uid, sorted(user.groups), user.extra, access.attributes()], sort_keys=True
        )
        deadline = self.clock() + self.budget
        while True:
            try:
                return await self.answers.get(key)
            except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as error:
                if not transient(error) or self.clock() + LOOKUP_TIMEOUT + REVIEW_RETRY_DELAY > deadline:
                    raise
            await asyncio.sleep(REVIEW_RETRY_DELAY)

    async def _review(self, key: str) -> bool:
        username, uid, groups, extra, attributes = json.loads(key)
        spec = {"user": username, "uid": uid, "groups": groups, "extra": extra, "resourceAttributes": attributes}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        reviewed = await answer(self.authorization.create_subject_access_review(review, **OPTIONS))
        return bool(((reviewed or {}).get("status") or {}).get("allowed"))


class Webhooks:
    def __init__(
        self,
        api: client.ApiClient,
        settings: WebhookSettings,
        config: OperatorConfig,
        observer: WebhookObserver | None = None,
        watch_api: client.ApiClient | None = None,
    ) -> None:
        self.settings = settings
        self.config = config
        self.store = SecretStore(api, settings.namespace)
        self.view = ApiClusterView(api)
        self.reviewer = ApiAccessReviewer(api)
        self.registration = Registration(api, settings.endpoint, settings.in_cluster)
        self.server = WebhookServer(self.mutate, self.validate, observer, callers=settings.callers)
        # Long-lived watches stay off the writers' capped pool (operator/process.py, Clients).
        self.watches = ObjectWatches(watch_api or api, kept_objects(settings.namespace))
        self.tls: WebhookTls | None = None
        self.registered = False  # the API server's objects carry our current bundle
        self.registered_at = 0.0  # monotonic: since when
        self.backoff = watch_backoff  # failures in a row -> seconds before the next check
        self.task: asyncio.Task | None = None

    @property
    def admission_key(self) -> bytes:
        """The key admission stamps are signed with (in the TLS Secret, shared by every replica)."""
        assert self.tls is not None and self.tls.admission_key
        return bytes.fromhex(self.tls.admission_key)

    @property
    def admission_since(self) -> datetime.datetime | None:
        """When this cluster's operators began stamping (reconcile/admission.py)."""
        return parse_time(self.tls.admission_since) if self.tls is not None else None

    async def mutate(self, request: AdmissionRequest) -> Verdict:
        """The defaults and the admission stamp. This webhook fails closed and runs before the schema's validation:
        a spec its checks cannot even build pods from (an unknown framework, no workers) passes here unstamped, so
        the API server refuses it with the schema's own message (or, if the schema lets it through, the operator
        holds it unstamped and judges it), instead of a 500 that names nothing."""
        now = datetime.datetime.now(datetime.UTC)
        verdict = Verdict() if request.kind == c.SWEEP_KIND else mutate(request, self.settings.default_image)
        defaults = list(verdict.patch)
        try:
            if request.kind == c.SWEEP_KIND:
                return await admit_sweep(request, self.admission_key, self.reviewer, self.config, now)
            return await admit(
                request, verdict, self.admission_key, self.reviewer, self.config, now, self.admission_since
            )
        except Exception as error:  # whatever it is, nothing is stamped
            logger.info("not stamped (%s %s/%s): %r", request.kind, request.namespace, request.name, error)
            verdict.patch = defaults
            return verdict

    async def validate(self, request: AdmissionRequest) -> Verdict:
        return await validate(request, self.view, self.config, self.settings.default_image)

    async def refresh_tls(self) -> WebhookTls:
        """The Secret's TLS, created or rotated as due; the server switches to a new certificate at once."""
        names = self.settings.serving_names()
        for _ in range(5):
            state, version = await self.store.read()
            now = datetime.datetime.now(datetime.UTC)
            wanted = advance(state, names, self.settings.rotation, now, bundle_served=self.bundle_settled())
            if wanted is not state and not await self.store.write(wanted, version):
                continue  # another replica wrote first: start from what it wrote
            if self.tls is None or wanted.serving != self.tls.serving:
                self.server.use(wanted.serving)
                if self.tls is not None:
                    logger.info(
                        "webhook server certificate renewed (valid until %s)",
                        wanted.serving.certificate.not_valid_after_utc,
                    )
            if self.tls is not None and wanted.bundle != self.tls.bundle:
                self.registered = False
            self.tls = wanted
            return wanted
        raise RuntimeError(f"could not read or write Secret {self.settings.namespace}/{self.store.name}")

    async def register(self) -> None:
        assert self.tls is not None
        was = self.registered
        self.registered = await self.registration.ensure(self.tls.bundle)
        if self.registered and not was:
            self.registered_at = time.monotonic()

    def bundle_settled(self) -> bool:
        return self.registered and time.monotonic() >= self.registered_at + self.settings.settle

    async def start(self) -> None:
        await self.refresh_tls()
        await self.server.start(self.settings.bind_address, self.settings.port)
        await self.register()
        self.watches.start()
        self.task = asyncio.create_task(self.keep_current(), name="webhooks")

    async def check(self) -> None:
        await self.refresh_tls()
        await self.register()

    def due_in(self) -> float:
        """Seconds until the TLS must change for the time alone: a certificate or CA due for renewal, a CA leaving
        the bundle, or a successor CA the API server now trusts taking over."""
        assert self.tls is not None
        now = datetime.datetime.now(datetime.UTC)
        due = (next_change(self.tls, self.settings.rotation) - now).total_seconds()
        if self.tls.next_ca is not None and self.registered:
            due = min(due, self.registered_at + self.settings.settle - time.monotonic())
        return due

    def next_wake(self) -> float:
        """How long to sleep unless a watch wakes the upkeep first. Nothing is read when the time is up unless
        something is due (timer_check); RECOMPUTE_AFTER bounds a sleep that a suspended host would stretch."""
        delays = [max(self.due_in(), MIN_DELAY), RECOMPUTE_AFTER]
        if self.registration.deferred_to:
            delays.append(self.settings.interval)
        if self.watches.refused:
            delays.append(FALLBACK_INTERVAL)
        return min(delays)

    async def timer_check(self) -> bool:
        """Whether the upkeep must read and check now that no watch woke it: something of the TLS is due, a watch is
        refused (so nothing would tell of a change), or another operator the webhooks point at stopped answering
        (probed over HTTPS, no API request)."""
        if self.watches.refused or self.due_in() <= 0:
            return True
        if self.registration.deferred_to and self.tls is not None:
            return not await self.registration.deferred_alive(self.tls.bundle)
        return False

    async def keep_current(self) -> None:
        """Check whenever a kept object changes, a certificate is due or another operator's target must be probed,
        whatever the last check met: if this loop ended, nothing would point the API server back at a live operator
        again, and every TrainingJob read or write would fail on a dead URL. A failed check is retried with the
        watches' backoff (1 s doubling to 30 s)."""
        failures = 0
        while True:
            delay = self.backoff(failures) if failures else self.next_wake()
            woken = await self.watches.wait(delay)
            try:
                if woken or failures or await self.timer_check():
                    await self.check()
                failures = 0
            except (ApiException, OSError, RuntimeError, TimeoutError) as error:
                failures += 1
                logger.warning("could not check the webhooks' certificate and registration: %s", error)
            except Exception:  # e.g. aiohttp.ServerDisconnectedError, a body that is not JSON: retried all the same
                failures += 1
                logger.exception("could not check the webhooks' certificate and registration")

    async def stop(self) -> None:
        await self.watches.stop()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.server.stop()


async def start_webhooks(
    api: client.ApiClient,
    settings: WebhookSettings,
    config: OperatorConfig,
    observer: WebhookObserver | None = None,
    watch_api: client.ApiClient | None = None,
) -> Webhooks:
    """The one entry point the operator's startup calls; stop the result on shutdown. `observer` counts and times
    every request the server answers (the operator's metrics); `watch_api` holds the upkeep's watches."""
    webhooks = Webhooks(api, settings, config, observer, watch_api)
    await webhooks.start()
    return webhooks
