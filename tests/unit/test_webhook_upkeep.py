"""The webhooks' upkeep: woken by its watches, it outlives any failure of one check (if it ended, nothing would point
the API server back at a live operator again); idle, it reads nothing: a timer wakes it only for what is due with
time (a certificate's renewal) or to probe another operator the webhooks point at."""

from __future__ import annotations

import asyncio
import datetime

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.config import OperatorConfig
from trainingjob.webhooks.component import Webhooks, WebhookSettings
from trainingjob.webhooks.registration import Probe
from trainingjob.webhooks.tls import Rotation, ServingNames, advance, next_change
from trainingjob.webhooks.upkeep import Nudge, ObjectWatches, kept_objects

NAMES = ServingNames(("trainingjob-operator.trainingjob-system.svc",), ("127.0.0.1",))
NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)


def webhooks(settings: WebhookSettings) -> Webhooks:
    return Webhooks(object(), settings, OperatorConfig())  # type: ignore[arg-type]


def test_every_kind_of_failed_check_is_followed_by_the_next_check() -> None:
    failures: list[BaseException] = [
        ApiException(status=500),
        aiohttp.ServerDisconnectedError(),  # no OSError: it once ended the loop silently
        ValueError("a body that is not JSON"),
    ]
    checks: list[str] = []

    async def scenario() -> None:
        upkeep = webhooks(WebhookSettings())
        upkeep.backoff = lambda failures: 0.01  # type: ignore[method-assign]
        upkeep.next_wake = lambda: 60.0  # type: ignore[method-assign]

        async def check() -> None:
            if failures:
                raise failures.pop(0)
            checks.append("checked")

        upkeep.check = check  # type: ignore[method-assign]
        upkeep.watches.changed.set()  # a watch saw a change
        upkeep.task = asyncio.create_task(upkeep.keep_current())
        for _ in range(500):
            if checks:
                break
            await asyncio.sleep(0.01)
        assert not upkeep.task.done()
        upkeep.task.cancel()

    asyncio.run(scenario())
    assert not failures and checks  # all three failed checks were survived, and the next one checked


def test_idle_the_upkeep_only_probes_the_operator_it_left_the_webhooks_with_and_checks_once_that_is_gone() -> None:
    """Outside the cluster another live operator may hold the webhooks: nothing in the API changes when it stops,
    so it is probed (HTTPS to it, no API request) every interval, and the API is read only once it is gone."""
    answers = [True, True, True, False]
    probed: list[str] = []
    checks: list[str] = []

    async def scenario() -> None:
        upkeep = webhooks(WebhookSettings(interval=0.01))
        upkeep.tls = advance(None, NAMES, Rotation(), datetime.datetime.now(datetime.UTC), bundle_served=False)
        upkeep.registration.deferred_to = {"https://127.0.0.1:1"}

        def probe_for(bundle: str) -> Probe:
            async def probe(base: str) -> bool:
                probed.append(base)
                return answers.pop(0) if answers else True

            return probe

        async def check() -> None:
            checks.append("checked")

        upkeep.registration.probe_for = probe_for
        upkeep.check = check  # type: ignore[method-assign]
        task = asyncio.create_task(upkeep.keep_current())
        for _ in range(500):
            if checks:
                break
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(scenario())
    assert probed[:4] == ["https://127.0.0.1:1"] * 4
    assert checks  # the fourth probe found it gone


def test_the_next_change_is_when_the_tls_state_first_changes_for_the_time_alone() -> None:
    rotation = Rotation(ca_validity=datetime.timedelta(days=30), cert_validity=datetime.timedelta(days=3))
    state = advance(None, NAMES, rotation, NOW, bundle_served=False)
    due = next_change(state, rotation)
    assert NOW < due < NOW + datetime.timedelta(days=3)
    second = datetime.timedelta(seconds=1)
    assert advance(state, NAMES, rotation, due - second, bundle_served=True) is state
    renewed = advance(state, NAMES, rotation, due + second, bundle_served=True)
    assert renewed.serving != state.serving
    assert next_change(renewed, rotation) > due


def test_the_next_change_counts_the_ca_and_the_bundles_expiry() -> None:
    rotation = Rotation(ca_validity=datetime.timedelta(days=3), cert_validity=datetime.timedelta(days=30))
    state = advance(None, NAMES, rotation, NOW, bundle_served=False)
    due = next_change(state, rotation)  # the CA is due long before the (capped) serving certificate
    assert advance(state, NAMES, rotation, due - datetime.timedelta(seconds=1), bundle_served=False) is state
    announced = advance(state, NAMES, rotation, due + datetime.timedelta(seconds=1), bundle_served=False)
    assert announced.next_ca is not None and announced.ca == state.ca


def test_a_nudge_says_every_event_and_only_listings_that_differ() -> None:
    changed = asyncio.Event()
    nudge = Nudge(changed)
    listing = {("", "trainingjob-operator"): nudge.file({"metadata": {"resourceVersion": "7"}})}
    nudge.replace(listing)
    assert changed.is_set()  # the first listing: a change since the first check may be in it
    changed.clear()
    nudge.replace(dict(listing))
    assert not changed.is_set()
    nudge.replace({})
    assert changed.is_set()
    changed.clear()
    nudge.apply("MODIFIED", {"metadata": {"resourceVersion": "8"}})
    assert changed.is_set()


def test_each_kept_object_is_watched_by_name() -> None:
    watches = ObjectWatches(object(), kept_objects("trainingjob-system"))
    queries = {(r.path, r.query()["fieldSelector"]) for r in watches.reflectors}
    assert queries == {
        ("/api/v1/namespaces/trainingjob-system/secrets", "metadata.name=trainingjob-webhook-tls"),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "metadata.name=trainingjobs.ml.example.com",
        ),
        ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", "metadata.name=trainingjob-operator"),
        ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", "metadata.name=trainingjob-operator"),
    }
