"""What a failed integration test leaves in its report: the state of its namespace when it failed.

CI shows the end of a failed run's output; a timeout such as "waiting for the preemption to be counted" says what
did not happen, not why. This adds, under the failure, each TrainingJob's phase, counters and conditions, the
namespace's pods (phase, node, resourceVersion) and latest Events, the operator's log lines about the namespace or
at warning level and above, and whether the session's operator runs and answers where the API server sends webhook
calls (a dead conversion webhook fails every later test with the same 500), so a flake met once in CI can be
understood from that run alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainingjob.api import constants as k

EVENTS_SHOWN = 12
PODS_SHOWN = 24
LOG_LINES_SHOWN = 12
LINE_WIDTH = 240
FIRST_FAILURE: list[str] = []  # the first failed test and its operator's state, repeated in the run's summary


def _clip(text: str) -> str:
    return text if len(text) <= LINE_WIDTH else text[: LINE_WIDTH - 1] + "…"


def job_lines(kube: Any, namespace: str) -> list[str]:
    jobs = kube.custom.list_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL)["items"]
    lines = []
    for job in jobs:
        status = job.get("status") or {}
        counters = {key: status.get(key) for key in ("attempt", "restartCount", "disruptionCount") if key in status}
        lines.append(_clip(f"job {job['metadata']['name']}: {status.get('phase')} {counters} {status.get('message')}"))
        for condition in status.get("conditions") or []:
            reason, message = condition.get("reason"), condition.get("message")
            lines.append(_clip(f"  {condition['type']}={condition['status']} {reason}: {message}"))
    return lines


def pod_lines(kube: Any, namespace: str) -> list[str]:
    """Each pod's phase, node and resourceVersion: a pod bound to a node but still Pending, or one the operator's
    status does not count, tells which watch (the node's or the operator's) missed its change."""
    pods = kube.core.list_namespaced_pod(namespace).items
    return [
        _clip(
            f"pod {p.metadata.name}: {p.status.phase} on {p.spec.node_name or '(no node)'} "
            f"rv {p.metadata.resource_version} created {p.metadata.creation_timestamp:%H:%M:%S}"
            + (" deleting" if p.metadata.deletion_timestamp else "")
            + _scheduled(p)
        )
        for p in sorted(pods, key=lambda p: p.metadata.name)[:PODS_SHOWN]
    ]


def _scheduled(pod: Any) -> str:
    """The scheduler's word on a pod: PodScheduled's status, time and message (none while it has not tried)."""
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled":
            when = _hms(condition.last_transition_time)
            return f"; PodScheduled={condition.status} at {when} {condition.reason or ''} {condition.message or ''}"
    return "; no PodScheduled condition"


def event_lines(kube: Any, namespace: str) -> list[str]:
    events = kube.core.list_namespaced_event(namespace).items
    events.sort(key=lambda e: str(e.last_timestamp or e.event_time or ""))
    return [
        _clip(
            f"event {_hms(e.last_timestamp or e.event_time)} {e.involved_object.kind}/{e.involved_object.name} "
            f"{e.reason} x{e.count or 1}: {e.message}"
        )
        for e in events[-EVENTS_SHOWN:]
    ]


def _hms(moment: Any) -> str:
    return f"{moment:%H:%M:%S}" if moment else "?"


def operator_lines(log_path: Path, namespace: str) -> list[str]:
    """The operator's JSON log lines about this namespace, or warnings and errors from anywhere."""
    chosen = []
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("namespace") == namespace or record.get("level") in ("warning", "error", "critical"):
            where = f"{record.get('namespace', '')}/{record.get('job', '')}".strip("/")
            chosen.append(
                _clip(f"log {record.get('timestamp', '')[11:23]} {record.get('level')} {where} {record.get('message')}")
            )
    return chosen[-LOG_LINES_SHOWN:]


def log_line(line: str) -> str:
    """One of the operator's JSON log lines as time, level, logger and message (the line itself if not JSON)."""
    try:
        record = json.loads(line)
        return f"{record.get('timestamp', '')[11:23]} {record.get('level')} {record.get('logger')}: {record['message']}"
    except (ValueError, KeyError, TypeError):
        return line


def operator_state_lines(kube: Any, operator: Any) -> list[str]:
    """The session operator's process, its webhook server, where the CRD's conversion webhook points, and the
    last lines it logged."""
    from tests.operator_harness import conversion_webhook_base, webhook_problem

    code = operator.process.poll()
    stopped = " (stopped by a test)" if operator.process is getattr(operator, "stopped_process", None) else ""
    state = "running" if code is None else f"exited with code {code}{stopped}"
    own = operator.webhook_url
    lines = [f"operator pid {operator.process.pid}: {state}; its webhook server {own}: {webhook_problem(own) or 'ok'}"]
    try:
        base = conversion_webhook_base(kube)
        target = "(the operator's)" if base == own else (base and (webhook_problem(base) or "ok"))
        lines.append(f"the CRD's conversion webhook: {base} {target}")
    except Exception as error:  # the report must never hide the failure itself
        lines.append(f"(could not read the CRD: {error})")
    tail = operator.log_path.read_text(errors="replace").splitlines()[-3:]
    return lines + [_clip(f"operator log {log_line(line)}") for line in tail]


def describe(funcargs: dict[str, Any], test: str = "") -> str | None:
    """The namespace's state for a test that had one (None for a test without a namespace)."""
    kube, namespace = funcargs.get("kube"), funcargs.get("namespace")
    if kube is None or not isinstance(namespace, str):
        return None
    sections = []
    for lines_of in (job_lines, pod_lines, event_lines):
        try:
            sections += lines_of(kube, namespace)
        except Exception as error:  # the report must never hide the failure itself
            sections.append(f"(could not read: {error})")
    operator = funcargs.get("operator")
    if getattr(operator, "log_path", None) is not None and getattr(operator, "process", None) is not None:
        sections += operator_lines(operator.log_path, namespace)
        state = operator_state_lines(kube, operator)
        sections += state
        if not FIRST_FAILURE:
            FIRST_FAILURE.extend([test, *state])
    return "\n".join(sections)
