"""The job Service's EndpointSlices, written by the operator (builders/endpoints.py, reconcile/endpoints.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.unit.test_apply import CONFIG
from tests.unit.test_planner import NOW, children, make_job, pod
from trainingjob.api import constants as k
from trainingjob.api.times import parse_time
from trainingjob.builders.endpoints import (
    ENDPOINTS_PER_SLICE,
    Endpoint,
    SliceView,
    chunked,
    desired_endpoint_slice,
    slice_view,
)
from trainingjob.planning.actions import CreateChild, ReplaceChild
from trainingjob.reconcile.endpoints import PARTIAL_PUBLISH_DELAY, plan_endpoints
from trainingjob.reconcile.planner import plan

STARTED = "2026-11-22T11:59:58Z"  # 2 s before NOW: younger than PARTIAL_PUBLISH_DELAY
LONG_AGO = "2026-11-22T11:50:00Z"


def up(job: Any, index: int, ip: str, started: str = STARTED, **fields: Any) -> Any:
    return pod(
        job, index, ip=ip, hostname=f"job-worker-{index}", started_at=parse_time(started), node_name="n1", **fields
    )


def published(job: Any, *pods: Any) -> dict[str, SliceView]:
    view = slice_view(desired_endpoint_slice(job, 0, [Endpoint(p.hostname, p.ip, p.name, p.uid, "n1") for p in pods]))
    return {view.name: view}


# --- builders ----------------------------------------------------------------------------------------------------


def test_a_slice_names_its_service_its_manager_and_each_pod_as_a_ready_endpoint_with_its_hostname() -> None:
    job = make_job(networking={"masterPort": 23456})
    manifest = desired_endpoint_slice(job, 0, [Endpoint("job-worker-1", "10.0.0.2", "job-worker-1", "u1", "n1")])
    labels = manifest["metadata"]["labels"]
    assert manifest["metadata"]["name"] == "job-workers-0"
    assert labels["kubernetes.io/service-name"] == "job-workers"
    assert labels["endpointslice.kubernetes.io/managed-by"] != "endpointslice-controller.k8s.io"
    assert labels[k.LABEL_JOB_NAME] == "job" and manifest["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert manifest["addressType"] == "IPv4"
    assert manifest["ports"] == [{"name": "dist", "port": 23456, "protocol": "TCP"}]
    assert manifest["endpoints"] == [
        {
            "addresses": ["10.0.0.2"],
            "hostname": "job-worker-1",
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "targetRef": {"kind": "Pod", "namespace": "ns", "name": "job-worker-1", "uid": "u1"},
            "nodeName": "n1",
        }
    ]
    assert desired_endpoint_slice(job, 0, [Endpoint("h", "fd00::7", "p")])["addressType"] == "IPv6"


def test_what_the_cache_shows_of_a_written_slice_equals_what_was_written() -> None:
    endpoints = [Endpoint(f"h{i}", f"10.0.0.{i}", f"p{i}", f"u{i}", "n" if i % 2 else None) for i in range(5)]
    view = slice_view(desired_endpoint_slice(make_job(), 0, reversed(endpoints)))
    assert view.endpoints == tuple(sorted(endpoints)) and view.name == "job-workers-0"


def test_more_endpoints_than_one_slice_holds_go_into_numbered_slices() -> None:
    endpoints = [Endpoint(f"h{i:04d}", f"10.0.{i // 250}.{i % 250}", f"p{i}") for i in range(1030)]
    chunks = chunked(endpoints)
    assert [len(c) for c in chunks] == [ENDPOINTS_PER_SLICE, 30]
    assert chunked([]) == [()]


# --- when to write -----------------------------------------------------------------------------------------------


def test_nothing_is_published_for_a_service_that_selects_pods_or_before_any_pod_has_an_address() -> None:
    job = make_job()
    ready = (up(job, 0, "10.0.0.1", LONG_AGO), up(job, 1, "10.0.0.2", LONG_AGO))
    assert plan_endpoints(job, children(job, *ready, service_selects_pods=True), NOW) == ([], None)
    assert plan_endpoints(job, children(job, *ready, service_exists=False), NOW) == ([], None)
    assert plan_endpoints(job, children(job, pod(job, 0), pod(job, 1)), NOW) == ([], None)


def test_a_gang_is_published_once_every_member_has_an_address() -> None:
    job = make_job()
    actions, wait = plan_endpoints(job, children(job, up(job, 0, "10.0.0.1"), up(job, 1, "10.0.0.2")), NOW)
    assert wait is None and [type(a) for a in actions] == [CreateChild]
    assert [e["hostname"] for e in actions[0].manifest["endpoints"]] == ["job-worker-0", "job-worker-1"]


def test_a_partial_gang_waits_a_moment_for_the_rest_then_is_published_without_them() -> None:
    job = make_job()
    young = children(job, up(job, 0, "10.0.0.1"), pod(job, 1))
    actions, wait = plan_endpoints(job, young, NOW)
    assert actions == [] and wait == PARTIAL_PUBLISH_DELAY - 2
    old = children(job, up(job, 0, "10.0.0.1", LONG_AGO), pod(job, 1))
    actions, wait = plan_endpoints(job, old, NOW)
    assert [e["hostname"] for e in actions[0].manifest["endpoints"]] == ["job-worker-0"] and wait is None
    missing = children(job, up(job, 0, "10.0.0.1"))  # worker 1 not even created yet: not complete either
    assert plan_endpoints(job, missing, NOW)[0] == []


def test_a_published_slice_is_left_alone_and_departures_alone_wait_for_the_next_write() -> None:
    job = make_job()
    pods = (up(job, 0, "10.0.0.1"), up(job, 1, "10.0.0.2"))
    assert plan_endpoints(job, children(job, *pods, endpoint_slices=published(job, *pods)), NOW) == ([], None)
    finished = dataclasses.replace(pods[1], phase="Succeeded")
    observed = children(job, pods[0], finished, endpoint_slices=published(job, *pods))
    assert plan_endpoints(job, observed, NOW) == ([], None)


def test_a_replaced_worker_is_published_with_its_new_address_and_the_old_one_goes() -> None:
    job = make_job()
    before = (up(job, 0, "10.0.0.1"), up(job, 1, "10.0.0.2"))
    after = (before[0], up(job, 1, "10.0.0.9", attempt=1))
    actions, _ = plan_endpoints(job, children(job, *after, endpoint_slices=published(job, *before)), NOW)
    assert [type(a) for a in actions] == [ReplaceChild]
    assert [e["addresses"] for e in actions[0].manifest["endpoints"]] == [["10.0.0.1"], ["10.0.0.9"]]


def test_a_new_master_port_is_published_at_once_even_while_workers_are_missing() -> None:
    job = make_job(networking={"masterPort": 30000})
    pods = (up(job, 0, "10.0.0.1"),)
    actions, _ = plan_endpoints(
        job, children(job, *pods, pod(job, 1), endpoint_slices=published(make_job(), *pods)), NOW
    )
    assert [a.manifest["ports"][0]["port"] for a in actions] == [30000]


def test_only_workers_are_published_unless_the_job_has_roles() -> None:
    job = make_job()
    other = dataclasses.replace(up(job, 0, "10.0.0.5", LONG_AGO), name="job-launcher-0", role="launcher")
    pods = (up(job, 0, "10.0.0.1"), up(job, 1, "10.0.0.2"), other)
    actions, _ = plan_endpoints(job, children(job, *pods), NOW)
    assert [e["targetRef"]["name"] for e in actions[0].manifest["endpoints"]] == ["job-worker-0", "job-worker-1"]
    roles = make_job(roles={"evaluator": {}})
    evaluator = dataclasses.replace(up(roles, 0, "10.0.0.5"), name="job-evaluator-0", role="evaluator")
    actions, _ = plan_endpoints(
        roles, children(roles, up(roles, 0, "10.0.0.1"), up(roles, 1, "10.0.0.2"), evaluator), NOW
    )
    assert len(actions[0].manifest["endpoints"]) == 3


def test_the_planner_publishes_a_running_gang_and_not_a_finished_job() -> None:
    job = make_job()
    pods = (up(job, 0, "10.0.0.1"), up(job, 1, "10.0.0.2"))
    assert any(a.kind == "EndpointSlice" for a in plan(job, children(job, *pods), NOW, CONFIG).actions)
    done = make_job(status={"phase": "Succeeded", "completionTime": "2026-11-22T11:00:00Z"})
    assert not any(
        getattr(a, "kind", "") == "EndpointSlice" for a in plan(done, children(done, *pods), NOW, CONFIG).actions
    )


def test_a_slice_a_user_edited_is_put_back() -> None:
    job = make_job()
    pods = (up(job, 0, "10.0.0.1"), up(job, 1, "10.0.0.2"))
    edited = {
        "job-workers-0": SliceView(
            "job-workers-0", (Endpoint("x", "10.9.9.9", "x"),), published(job)["job-workers-0"].ports
        )
    }
    actions, _ = plan_endpoints(job, children(job, *pods, endpoint_slices=edited), NOW)
    assert [type(a) for a in actions] == [ReplaceChild]
