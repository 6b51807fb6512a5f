"""The EndpointSlices behind a job's headless Service, written by the operator instead of kube-controller-manager.

Why the operator and not the EndpointSlice controller: the Service's DNS names (`<pod>.<job>-workers.<ns>.svc`) are
all a job needs of it, and a Service that selects pods makes the control plane pay for every pod event of every
job. The EndpointSlice controller (and the legacy Endpoints controller beside it) re-lists the namespace's pods on
each change of a selected pod and writes the Service's slices again, and the scheduler's default topology spreading
counts, for every pod it places, the pods each of its Services selects. At 1000 jobs x 8 workers in one namespace
that is quadratic work (bench/findings.md). So the Service has no selector and the operator, which watches the pods
anyway, publishes their addresses itself: the same names and records CoreDNS (or the local process node's DNS)
answers from any EndpointSlice labelled `kubernetes.io/service-name`.

What it publishes: every pod the Service used to select (the workers; every pod of the job when it has roles) that
has an address and has not finished, as a ready endpoint (publishNotReadyAddresses: peers resolve each other before
any is Ready), with its hostname, node and pod. At most 1000 endpoints per slice (the API's limit), in slices named
`<service>-0`, `<service>-1`, … so a job of up to 1024 workers plus its other roles fits.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainingjob.api.names import service_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata

ENDPOINTS_PER_SLICE = 1000  # discovery.k8s.io/v1 EndpointSlice.endpoints maxItems
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_SLICE_MANAGER = "endpointslice.kubernetes.io/managed-by"
SLICE_MANAGER = "trainingjob-operator.ml.example.com"  # never the controller's value: it leaves our slices alone
SLICE_API_VERSION = "discovery.k8s.io/v1"


@dataclass(frozen=True, order=True)
class Endpoint:
    """One published pod, in the terms both the desired and the observed slice reduce to (so they compare)."""

    hostname: str
    address: str
    pod: str
    uid: str = ""
    node: str | None = None


def slice_name(job_name: str, chunk: int) -> str:
    return f"{service_name(job_name)}-{chunk}"


def address_type(address: str) -> str:
    return "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"


def chunked(endpoints: Sequence[Endpoint]) -> list[tuple[Endpoint, ...]]:
    """Endpoints split into slices of at most ENDPOINTS_PER_SLICE, in order; one slice, maybe empty, at least."""
    ordered = sorted(endpoints)
    return [tuple(ordered[i : i + ENDPOINTS_PER_SLICE]) for i in range(0, max(len(ordered), 1), ENDPOINTS_PER_SLICE)]


def slice_ports(port: int) -> tuple[tuple[str, int, str], ...]:
    return (("dist", port, "TCP"),)


def desired_endpoint_slice(job: TrainingJob, chunk: int, endpoints: Iterable[Endpoint]) -> dict[str, Any]:
    """Slice `chunk` of the job's Service, listing `endpoints` (all of one address family: the cluster's)."""
    members = sorted(endpoints)
    metadata = child_metadata(
        job,
        slice_name(job.name, chunk),
        {LABEL_SERVICE_NAME: service_name(job.name), LABEL_SLICE_MANAGER: SLICE_MANAGER},
    )
    return {
        "apiVersion": SLICE_API_VERSION,
        "kind": "EndpointSlice",
        "metadata": metadata,
        "addressType": address_type(members[0].address) if members else "IPv4",
        "endpoints": [endpoint_manifest(job.namespace, e) for e in members],
        "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in slice_ports(job.spec.master_port)],
    }


def endpoint_manifest(namespace: str, endpoint: Endpoint) -> dict[str, Any]:
    return {
        "addresses": [endpoint.address],
        "hostname": endpoint.hostname,
        "conditions": {"ready": True, "serving": True, "terminating": False},
        "targetRef": {"kind": "Pod", "namespace": namespace, "name": endpoint.pod, "uid": endpoint.uid},
        **({"nodeName": endpoint.node} if endpoint.node else {}),
    }


@dataclass(frozen=True)
class SliceView:
    """What the planner reads of one of our EndpointSlices."""

    name: str
    endpoints: tuple[Endpoint, ...]
    ports: tuple[tuple[str, int, str], ...]


def slice_view(body: Mapping[str, Any]) -> SliceView:
    endpoints = [
        Endpoint(entry.get("hostname") or "", address, target.get("name") or "", target.get("uid") or "",
                 entry.get("nodeName"))
        for entry in body.get("endpoints") or []
        for target in [entry.get("targetRef") or {}]
        for address in entry.get("addresses") or []
    ]  # fmt: skip
    ports = tuple(
        (p.get("name") or "", p.get("port") or 0, p.get("protocol") or "TCP") for p in body.get("ports") or []
    )
    return SliceView((body.get("metadata") or {}).get("name") or "", tuple(sorted(endpoints)), ports)
