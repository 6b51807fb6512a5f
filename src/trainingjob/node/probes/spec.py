"""Container probes as the kubelet reads them (pure): defaults, handlers, named ports, and the threshold counting.

Defaults (core/v1): initialDelaySeconds 0, periodSeconds 10, timeoutSeconds 1, successThreshold 1,
failureThreshold 3. A result flips only after `successThreshold` successes or `failureThreshold` failures in a row;
before its first run a readiness probe counts as failed and a startup probe as not yet succeeded, as in the kubelet's
prober workers. `port` may name one of the container's ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("startup", "liveness", "readiness")
DEFAULTS = {
    "initialDelaySeconds": 0,
    "periodSeconds": 10,
    "timeoutSeconds": 1,
    "successThreshold": 1,
    "failureThreshold": 3,
}


class ProbeSpecError(ValueError):
    """A probe this node cannot run (named port missing, no handler it supports)."""


@dataclass(frozen=True)
class Handler:
    """One way of probing: httpGet, tcpSocket or exec."""

    kind: str
    port: int = 0
    host: str = ""
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # startup | liveness | readiness
    handler: Handler
    initial_delay: float = 0
    period: float = 10
    timeout: float = 1
    success_threshold: int = 1
    failure_threshold: int = 3
    # probe-level terminationGracePeriodSeconds (liveness and startup): overrides the pod's when killing.
    termination_grace: float | None = None


def resolve_port(port: int | str, container: Mapping[str, Any]) -> int:
    """A number, a numeric string, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    if port.isdigit():
        return int(port)
    for entry in container.get("ports") or []:
        if entry.get("name") == port:
            return int(entry["containerPort"])
    raise ProbeSpecError(f"no port named {port!r} in container {container.get('name')!r}")


def parse_handler(probe: Mapping[str, Any], container: Mapping[str, Any]) -> Handler:
    if http := probe.get("httpGet"):
        return Handler(
            "httpGet",
            port=resolve_port(http["port"], container),
            host=http.get("host") or "",
            path=http.get("path") or "/",
            scheme=(http.get("scheme") or "HTTP").upper(),
            headers=tuple((h["name"], h.get("value", "")) for h in http.get("httpHeaders") or []),
        )
    if tcp := probe.get("tcpSocket"):
        return Handler("tcpSocket", port=resolve_port(tcp["port"], container), host=tcp.get("host") or "")
    if (command := (probe.get("exec") or {}).get("command")) is not None:
        return Handler("exec", command=tuple(command))
    if probe.get("grpc"):
        raise ProbeSpecError("grpc probes are not supported by the local process node")
    raise ProbeSpecError("the probe has no handler (httpGet, tcpSocket or exec)")


def parse_probe(kind: str, probe: Mapping[str, Any], container: Mapping[str, Any]) -> ProbeSpec:
    values = {**DEFAULTS, **{k: v for k, v in probe.items() if k in DEFAULTS and v is not None}}
    grace = probe.get("terminationGracePeriodSeconds")
    return ProbeSpec(
        kind=kind,
        handler=parse_handler(probe, container),
        initial_delay=float(values["initialDelaySeconds"]),
        period=float(max(1, values["periodSeconds"])),
        timeout=float(max(1, values["timeoutSeconds"])),
        # The API server forces 1 for liveness and startup; a stored object could still say otherwise.
        success_threshold=1 if kind != "readiness" else max(1, int(values["successThreshold"])),
        failure_threshold=max(1, int(values["failureThreshold"])),
        termination_grace=float(grace) if grace is not None and kind != "readiness" else None,
    )


def container_probes(container: Mapping[str, Any]) -> dict[str, ProbeSpec]:
    """The container's probes by kind (startup, liveness, readiness); raises ProbeSpecError for one it cannot run."""
    return {
        kind: parse_probe(kind, container[f"{kind}Probe"], container) for kind in KINDS if container.get(f"{kind}Probe")
    }


@dataclass
class ProbeCounter:
    """Consecutive results of one probe, and the result they add up to (None: not decided yet)."""

    spec: ProbeSpec
    result: bool | None = None
    successes: int = 0
    failures: int = 0

    @classmethod
    def start(cls, spec: ProbeSpec) -> ProbeCounter:
        """The kubelet's initial results: readiness failed, liveness succeeded, startup unknown."""
        return cls(spec, {"readiness": False, "liveness": True}.get(spec.kind))

    def record(self, ok: bool) -> bool:
        """Count one run; True when the result changed."""
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            flips = self.result is not True and self.successes >= self.spec.success_threshold
        else:
            self.successes, self.failures = 0, self.failures + 1
            flips = self.result is not False and self.failures >= self.spec.failure_threshold
        if flips:
            self.result = ok
        return flips
