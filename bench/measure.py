"""What a run costs: CPU seconds and peak memory of each process, and API requests by identity from the audit log.

Why /proc and the audit log: they see every contender the same way, whatever language or client library it uses,
and neither needs the contender's cooperation (Kubeflow's operator and a raw client export nothing we could trust
to count the same things).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# Requests every controller makes whatever the number of jobs: keeping its Lease, recording Events.
PER_OPERATOR_RESOURCES = frozenset({"leases"})


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime and stime are fields 14 and 15 (1-based, man 5 proc).
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float | None:
    """VmHWM: the most resident memory the process ever had."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@dataclass
class CpuMeter:
    """CPU seconds each named process used between `start()` and `stop()`."""

    pids: Mapping[str, int]

    def start(self) -> None:
        self.before = {name: cpu_seconds(pid) or 0.0 for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        used = {}
        for name, pid in self.pids.items():
            now = cpu_seconds(pid)
            used[name] = round((now if now is not None else self.before[name]) - self.before[name], 2)
        return used


def audit_policy(users: Iterable[str]) -> str:
    """Metadata-level records of the contenders' requests only, once each (at ResponseComplete)."""
    listed = "".join(f"  - {user}\n" for user in sorted(users))
    return (
        "apiVersion: audit.k8s.io/v1\n"
        "kind: Policy\n"
        "omitStages: [RequestReceived, ResponseStarted]\n"
        "rules:\n"
        "- level: Metadata\n"
        "  users:\n"
        f"{listed}"
        "- level: None\n"
    )


@dataclass(frozen=True)
class AuditRecord:
    user: str
    verb: str
    resource: str
    code: int
    at: datetime.datetime


def parse_audit_line(line: str) -> AuditRecord | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    when = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
    if not when:
        return None
    return AuditRecord(
        user=(event.get("user") or {}).get("username", ""),
        verb=event.get("verb", ""),
        resource=resource or event.get("requestURI", ""),
        code=int((event.get("responseStatus") or {}).get("code", 0)),
        at=datetime.datetime.fromisoformat(when.replace("Z", "+00:00")),
    )


def read_audit(path: Path) -> list[AuditRecord]:
    if not path.exists():
        return []
    with path.open(errors="replace") as lines:
        return [record for line in lines if (record := parse_audit_line(line)) is not None]


def requests_by(
    records: Iterable[AuditRecord],
    user: str,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
) -> Counter[str]:
    """`verb resource` -> count for one identity within [since, until)."""
    tally: Counter[str] = Counter()
    for record in records:
        if record.user != user:
            continue
        if (since is not None and record.at < since) or (until is not None and record.at >= until):
            continue
        tally[f"{record.verb} {record.resource}"] += 1
    return tally


def refused_by(
    records: Iterable[AuditRecord],
    user: str,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
) -> Counter[str]:
    """`verb resource code` -> count of one identity's requests the API server answered with an error (a create
    that met AlreadyExists, a conflict, a timeout): the requests counted in `requests_by` that did not do their
    work."""
    tally: Counter[str] = Counter()
    for record in records:
        if record.user != user or record.code < 400:
            continue
        if (since is not None and record.at < since) or (until is not None and record.at >= until):
            continue
        tally[f"{record.verb} {record.resource} {record.code}"] += 1
    return tally


def writes(tally: Mapping[str, int], include_per_operator: bool = False) -> int:
    """Write requests in a tally from `requests_by`; Lease renewals are per operator, not per job."""
    total = 0
    for key, count in tally.items():
        verb, resource = key.split(" ", 1)
        if verb in WRITE_VERBS and (include_per_operator or resource not in PER_OPERATOR_RESOURCES):
            total += count
    return total


FORCED_CLOSE = "watcher close due to unresponsiveness"


def forced_watch_closes(apiserver_log: Path) -> int | None:
    """Watchers kube-apiserver closed because they fell behind its event stream (cache_watcher.go: "Forcing pods
    watcher close due to unresponsiveness"): each must resume, or list everything again after 410 Gone. On a
    saturated 2-core machine the runs with many of them are the slow ones, whoever the contender."""
    if not apiserver_log.exists():
        return None
    with apiserver_log.open(errors="replace") as lines:
        return sum(1 for line in lines if FORCED_CLOSE in line)


# cache_watcher.go's words: `Forcing pods watcher close due to unresponsiveness: key: "/pods/", labels: "",
# fields: "spec.nodeName!="`. The selector tells whose watch it was (kwok's, the scheduler's, an operator's, …).
FORCED_CLOSE_WATCH = re.compile(r'Forcing (\S+) watcher close .*?key: "([^"]*)", labels: "([^"]*)", fields: "([^"]*)"')


def forced_watch_closes_by_watch(apiserver_log: Path) -> dict[str, int]:
    """The forced closes by watch: "<resource> <key> labels=<selector> fields=<selector>" -> how many."""
    if not apiserver_log.exists():
        return {}
    counts: dict[str, int] = {}
    with apiserver_log.open(errors="replace") as lines:
        for line in lines:
            match = FORCED_CLOSE_WATCH.search(line) if FORCED_CLOSE in line else None
            if match:
                resource, key, labels, fields = match.groups()
                watch = f"{resource} {key} labels={labels or '-'} fields={fields or '-'}"
                counts[watch] = counts.get(watch, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def metric_sum(text: str, name: str, label_filter: str = "") -> float | None:
    """Sum of every sample of `name` whose labels contain `label_filter` (None if there is none)."""
    pattern = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})?\s+(\S+)$", re.MULTILINE)
    values = [float(value) for labels, value in pattern.findall(text) if label_filter in (labels or "")]
    return sum(values) if values else None


def labelled_values(text: str, name: str, label: str) -> dict[str, float]:
    """Each sample of `name` by the value of its `label` (samples without it are left out), largest first."""
    pattern = re.compile(rf'^{re.escape(name)}\{{[^}}]*\b{re.escape(label)}="([^"]*)"[^}}]*\}}\s+(\S+)$', re.MULTILINE)
    values = {value: float(count) for value, count in pattern.findall(text)}
    return dict(sorted(values.items(), key=lambda item: -item[1]))


# The API server's own counters for the pods resource (since it started: the cluster is new for every run).
POD_WATCH_METRICS = {
    "pod_watch_events_sent": "apiserver_watch_events_total",
    "pod_watch_bytes_sent": "apiserver_watch_events_sizes_sum",
    "pod_events_received": "apiserver_watch_cache_events_received_total",
    "pod_watchers_terminated": "apiserver_terminated_watchers_total",
}


def pod_watch_figures(metrics: str) -> dict[str, float | None]:
    """What the pod watches cost the API server in a run: events and bytes sent to every watcher, the pod events
    its cache received (one per write), and watchers it closed for falling behind. Sent per received says how many
    watchers got each event, and how many were sent again to watchers that resumed after a forced close; bytes per
    event is the size of a pod as every watcher decodes it (managedFields included)."""
    figures = {key: metric_sum(metrics, name, 'resource="pods"') for key, name in POD_WATCH_METRICS.items()}
    sent, sent_bytes = figures["pod_watch_events_sent"], figures["pod_watch_bytes_sent"]
    figures["pod_watch_bytes_per_event"] = round(sent_bytes / sent) if sent and sent_bytes else None
    return figures


def conversion_figures(metrics: str) -> dict[str, float | None]:
    """The conversion webhook calls the API server made in a run and the seconds its requests waited on them.
    Only our CRD has two versions, so only our runs have any (docs/trainingjob.md, "What serving two versions
    costs")."""
    calls = metric_sum(metrics, "apiserver_crd_conversion_webhook_duration_seconds_count")
    waited = metric_sum(metrics, "apiserver_crd_conversion_webhook_duration_seconds_sum")
    return {"conversion_calls": calls, "conversion_wait_seconds": round(waited, 1) if waited is not None else None}
