"""The benchmark's pure parts: audit accounting, the timeline, the contenders' workloads, the report's verdicts."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.cluster import NAMESPACE
from bench.contender_base import Contender
from bench.contenders import Ours, Raw, RawWithChildren, contender
from bench.kubeflow import extras_like, pytorch_job
from bench.measure import (
    audit_policy,
    cpu_seconds,
    labelled_values,
    parse_audit_line,
    refused_by,
    requests_by,
    writes,
)
from bench.observe import Timeline
from bench.report import summarize_throughput, targets, throughput_section, write_report
from bench.scale import growth_section
from trainingjob.api import constants as k

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
OPERATOR = "system:serviceaccount:trainingjob-system:trainingjob-operator"


def audit_line(user: str, verb: str, resource: str, seconds: float, subresource: str = "", code: int = 201) -> str:
    ref = {"resource": resource, **({"subresource": subresource} if subresource else {})}
    when = (T0 + datetime.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    return json.dumps(
        {
            "user": {"username": user},
            "verb": verb,
            "objectRef": ref,
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": when,
        }
    )


def test_audit_policy_logs_only_the_named_users_once_per_request() -> None:
    policy = yaml.safe_load(audit_policy(["b", "a"]))
    assert policy["omitStages"] == ["RequestReceived", "ResponseStarted"]
    assert policy["rules"][0] == {"level": "Metadata", "users": ["a", "b"]}
    assert policy["rules"][-1] == {"level": "None"}


def test_requests_are_counted_per_identity_and_window_with_subresources() -> None:
    records = [
        parse_audit_line(line)
        for line in (
            audit_line(OPERATOR, "create", "pods", 1),
            audit_line(OPERATOR, "patch", "trainingjobs", 2, subresource="status"),
            audit_line(OPERATOR, "update", "leases", 3),
            audit_line(OPERATOR, "create", "pods", 10),
            audit_line("someone-else", "create", "pods", 2),
        )
    ]
    window = requests_by(records, OPERATOR, T0, T0 + datetime.timedelta(seconds=5))
    assert window == {"create pods": 1, "patch trainingjobs/status": 1, "update leases": 1}
    assert writes(window) == 2
    assert writes(window, include_per_operator=True) == 3
    assert parse_audit_line("not json") is None


def test_refused_requests_are_counted_by_code() -> None:
    """A create that met AlreadyExists is a request that did nothing: the run says how many there were."""
    records = [
        parse_audit_line(line)
        for line in (
            audit_line(OPERATOR, "create", "pods", 1),
            audit_line(OPERATOR, "create", "pods", 2, code=409),
            audit_line(OPERATOR, "patch", "trainingjobs", 2, subresource="status", code=409),
            audit_line("someone-else", "create", "pods", 2, code=409),
        )
    ]
    assert refused_by(records, OPERATOR) == {"create pods 409": 1, "patch trainingjobs/status 409": 1}


def test_cpu_seconds_of_this_process_and_of_a_missing_one() -> None:
    assert cpu_seconds(os.getpid()) >= 0
    assert cpu_seconds(2**22 + 12345) is None


def pod(job: str, name: str, phase: str) -> dict:
    return {"metadata": {"name": name, "labels": {k.LABEL_JOB_NAME: job}}, "status": {"phase": phase}}


def test_timeline_derives_raw_jobs_from_their_pods() -> None:
    timeline = Timeline(jobs=1, workers=2, job_of_pod=Ours().job_of_pod)
    timeline.on_pod("ADDED", pod("a", "a-0", "Pending"), jobs_from_pods=True)
    assert timeline.summary()["all_pods_created_s"] is None
    timeline.on_pod("ADDED", pod("a", "a-1", "Running"), jobs_from_pods=True)
    assert timeline.all("Created") and not timeline.all("Running")
    timeline.on_pod("MODIFIED", pod("a", "a-0", "Running"), jobs_from_pods=True)
    assert timeline.all("Running") and timeline.running_now() == 1
    timeline.on_pod("MODIFIED", pod("a", "a-0", "Succeeded"), jobs_from_pods=True)
    timeline.on_pod("MODIFIED", pod("a", "a-1", "Succeeded"), jobs_from_pods=True)
    assert timeline.all("Succeeded") and timeline.running_now() == 0


def test_timeline_counts_a_running_pod_given_a_new_address() -> None:
    """kwok's running stage played twice gives a pod a second address; the first one a pod gets is no change."""
    timeline = Timeline(jobs=1, workers=1, job_of_pod=Ours().job_of_pod)
    running = pod("a", "a-0", "Running")
    timeline.on_pod("ADDED", pod("a", "a-0", "Pending"), jobs_from_pods=False)
    for address in ("10.244.0.5", "10.244.0.5", "10.244.0.9"):
        timeline.on_pod("MODIFIED", {**running, "status": {"phase": "Running", "podIP": address}}, jobs_from_pods=False)
    timeline.on_pod("MODIFIED", pod("a", "a-0", "Succeeded"), jobs_from_pods=False)
    assert timeline.summary()["pod_ip_changes"] == 1


def test_timeline_tells_how_long_the_workloads_pods_have_been_quiet() -> None:
    timeline = Timeline(jobs=1, workers=1, job_of_pod=Ours().job_of_pod)
    timeline.last_pod_event -= 30
    assert timeline.quiet_for() >= 30
    timeline.on_pod("MODIFIED", {"metadata": {"name": "stray"}, "status": {}}, jobs_from_pods=False)
    assert timeline.quiet_for() >= 30 and timeline.pod_events == 0, "a pod of no job is not the workload's"
    timeline.on_pod("MODIFIED", pod("a", "a-0", "Running"), jobs_from_pods=False)
    assert timeline.quiet_for() < 30 and timeline.pod_events == 1


def test_timeline_takes_job_state_from_the_controllers_status() -> None:
    ours = Ours()
    timeline = Timeline(jobs=2, workers=1, job_of_pod=ours.job_of_pod)
    timeline.on_job(ours.job_state, "MODIFIED", {"metadata": {"name": "a"}, "status": {"phase": "Succeeded"}})
    assert "a" in timeline.running_at, "a job first seen Succeeded was Running in between"
    timeline.on_job(ours.job_state, "MODIFIED", {"metadata": {"name": "b"}, "status": {"phase": "Pending"}})
    assert not timeline.all("Running")
    assert timeline.summary()["jobs_succeeded"] == 1


def test_ours_is_watched_in_the_storage_version_so_no_event_needs_our_conversion_webhook() -> None:
    ours = Ours()
    assert ours.watch_path is not None and "/ml.example.com/v1/" in ours.watch_path
    completed = {"apiVersion": "ml.example.com/v1", "metadata": {"name": "a"}, "status": {"state": "Completed"}}
    assert ours.job_state(completed) == "Succeeded"
    assert ours.job_state({**completed, "status": {"state": "Initializing", "workers": 2}}) == "Pending"


def test_raw_pods_are_our_operators_pods_without_an_owner() -> None:
    pods = Raw.pods("job-00001", 4, "30s")
    assert [p["metadata"]["name"] for p in pods] == [f"job-00001-worker-{i}" for i in range(4)]
    assert all("ownerReferences" not in p["metadata"] for p in pods)
    assert all(p["metadata"]["annotations"]["sim.ml.example.com/complete-after"] == "30s" for p in pods)
    ranks = [{e["name"]: e.get("value") for e in p["spec"]["containers"][0]["env"]}["RANK"] for p in pods]
    assert ranks == ["0", "1", "2", "3"]


def test_raw_with_children_creates_a_jobs_children_as_our_operator_would_without_one() -> None:
    """The floor for the objects a job is made of: its Service and ConfigMap, its pods, then its (empty) slice."""
    objects = RawWithChildren().objects("job-00001", 2, "30s")
    kinds = [(path.rsplit("/", 1)[1], body["kind"], body["metadata"]["name"]) for path, body in objects]
    assert kinds == [
        ("services", "Service", "job-00001-workers"),
        ("configmaps", "ConfigMap", "job-00001-config"),
        ("pods", "Pod", "job-00001-worker-0"),
        ("pods", "Pod", "job-00001-worker-1"),
        ("endpointslices", "EndpointSlice", "job-00001-workers-0"),
    ]
    assert all(path.startswith("/api") and f"/namespaces/{NAMESPACE}/" in path for path, _ in objects)
    assert all("ownerReferences" not in body["metadata"] for _, body in objects)
    assert objects[-1][1]["metadata"]["labels"]["kubernetes.io/service-name"] == "job-00001-workers"
    assert [b for _, b in objects[2:4]] == Raw.pods("job-00001", 2, "30s"), "the same pods as raw"
    assert RawWithChildren().identity != Raw().identity, "told apart in the audit log"


def test_pytorch_job_has_one_master_and_the_other_workers() -> None:
    job = pytorch_job("j", 8, "img", ["python"], {"a": "b"})
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 7
    assert replicas["Worker"]["template"]["metadata"]["annotations"] == {"a": "b"}
    assert "Worker" not in pytorch_job("j", 1, "img", ["python"], {})["spec"]["pytorchReplicaSpecs"]


def test_kubeflow_job_state_prefers_the_terminal_condition() -> None:
    from bench.contenders import Kubeflow

    kubeflow = Kubeflow(tuned=False)
    conditions = [{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]
    assert kubeflow.job_state({"status": {"conditions": conditions}}) == "Succeeded"
    assert kubeflow.job_state({"status": {"conditions": [{"type": "Created", "status": "True"}]}}) is None


def throughput(contender: str, jobs: int, running: float, cpu: float, rss: float, writes_per_job: float) -> dict:
    return {
        "kind": "throughput",
        "contender": contender,
        "jobs": jobs,
        "workers": 8,
        "finished": True,
        "all_pods_created_s": running / 2,
        "all_pods_running_s": running,
        "all_running_s": running + 1,
        "all_succeeded_s": running + 30,
        "cpu_seconds": {"operator": cpu, "kube-apiserver": 50.0, "etcd": 10.0},
        "harness_cpu_seconds": 5.0,
        "operator_peak_rss_mib": rss,
        "writes_per_job": writes_per_job,
        "writes_per_job_without_events": writes_per_job - 3,
        "requests": {"create pods": jobs * 8},
    }


@pytest.mark.parametrize(
    ("ours_running", "expected"),
    [(110.0, "| met |"), (140.0, "| **missed** |")],
)
def test_targets_compare_ours_with_the_raw_limit(ours_running: float, expected: str) -> None:
    records = [
        throughput("raw-pods", 1000, 100.0, 0.0, 0.0, 8.0),
        throughput("trainingjob-operator", 1000, ours_running, 200.0, 120.0, 11.0),
    ]
    table = targets(summarize_throughput(records), records)
    raw_row = next(line for line in table.splitlines() if "raw pod creation" in line)
    assert expected in raw_row
    assert "Kubeflow (defaults) (1000x8) | — | not measured |" in table


def test_the_writes_target_counts_writes_without_events() -> None:
    """Issue 40's target is W + 5 writes per job without Events: 16 with Events (13 without) meets it at W = 8."""
    records = [throughput("trainingjob-operator", 1000, 100.0, 200.0, 120.0, 16.0)]
    row = next(line for line in targets(summarize_throughput(records), records).splitlines() if "W + 5" in line)
    assert "without Events" in row and "| 13 | met |" in row
    records = [throughput("trainingjob-operator", 1000, 100.0, 200.0, 120.0, 17.0)]
    row = next(line for line in targets(summarize_throughput(records), records).splitlines() if "W + 5" in line)
    assert "| 14 | **missed** |" in row


def test_the_1000_job_targets_stay_on_1000_jobs_when_5000_are_measured_and_5000_gets_its_own() -> None:
    """Issue 40: ratios, writes and growth at 1000 x 8; at 5,000 x 8 every job Running and peak RSS ≤ 300 MiB;
    and a table of how a job's cost grows from 100 to 1,000 to 5,000 jobs."""
    records = [
        throughput("trainingjob-operator", 100, 15.0, 10.0, 92.0, 18.0),
        throughput("raw-pods", 100, 9.0, 0.0, 0.0, 8.0),
        throughput("trainingjob-operator", 1000, 210.0, 90.0, 132.0, 20.0),
        throughput("raw-pods", 1000, 105.0, 0.0, 0.0, 8.0),
        throughput("trainingjob-operator", 5000, 1800.0, 420.0, 310.0, 21.0),
        throughput("raw-pods", 5000, 1200.0, 0.0, 0.0, 8.0),
    ]
    summary = summarize_throughput(records)
    table = targets(summary, records)
    raw_row = next(line for line in table.splitlines() if "raw pod creation" in line)
    assert "(1000x8) | 2x | **missed** |" in raw_row
    assert "from 100 to 1000 jobs | 40 % | **missed** |" in table
    assert "every job's pods Running (5000x8) | 1800 s | met |" in table
    assert "peak RSS ≤ 300 MiB (40000 pods) | 310 MiB | **missed** |" in table
    growth = growth_section(summary).splitlines()
    assert growth[0] == "## Growth with scale (medians)"
    assert "| 100 x 8 | 15 s | 0.15 s | 0.09 s | 1.67x | 92 MiB | 15 |" in growth
    assert "| 5000 x 8 | 1800 s | 0.36 s | 0.24 s | 1.5x | 310 MiB | 18 |" in growth


def test_summary_takes_medians_over_repeats() -> None:
    records = [throughput("trainingjob-operator", 100, seconds, 20.0, 90.0, 12.0) for seconds in (10.0, 30.0, 11.0)]
    figures = summarize_throughput(records)[(100, 8)]["ours"]
    assert (
        figures["pods_running"] == 11.0
        and figures["running"] == 12.0
        and figures["runs"] == 3
        and figures["cpu_per_job"] == 0.2
    )


def test_only_our_operator_has_a_replacement_pod_with_a_new_lease_identity() -> None:
    ours = Ours()
    before = ours.pod_name
    assert ours.replace_pod() and ours.pod_name != before
    assert not contender("kubeflow-tuned").replace_pod(), "no leader election: a replacement is a restart"
    assert not Raw().replace_pod()


def test_every_run_is_shown_beside_the_median_with_its_forced_watch_closes() -> None:
    slow, fast = (throughput("trainingjob-operator", 1000, seconds, 60.0, 140.0, 14.0) for seconds in (354.8, 204.9))
    fast["forced_watch_closes"] = 12
    section = throughput_section((1000, 8), summarize_throughput([slow, fast])[(1000, 8)])
    assert "trainingjob-operator 354.8 s, 204.9 s (12)" in section


def test_the_median_runs_status_patches_are_broken_down_by_the_fields_they_changed() -> None:
    """What the writes above the floor carry: read from the operator's trainingjob_status_patch_fields_total."""
    text = (
        'trainingjob_status_patch_fields_total{field="conditions"} 4330.0\n'
        'trainingjob_status_patch_fields_total{field="state"} 3000.0\n'
        'trainingjob_status_patch_fields_created{field="state"} 1.7e9\n'
        'trainingjob_webhook_requests_total{outcome="allowed",webhook="mutate"} 1000.0\n'
    )
    per_job = {
        name: count / 1000
        for name, count in labelled_values(text, "trainingjob_status_patch_fields_total", "field").items()
    }
    run = {**throughput("trainingjob-operator", 1000, 204.9, 60.0, 140.0, 14.0), "status_patch_fields_per_job": per_job}
    section = throughput_section((1000, 8), summarize_throughput([run])[(1000, 8)])
    assert (
        "by the top-level status field each changed (a patch counts once for each field): conditions 4.33, state 3."
        in section
    )


@pytest.mark.parametrize(
    ("contender", "setting"),
    [
        ("trainingjob-operator", {"operator_args": ["--max-concurrent-creates", "16"]}),
        ("kubeflow-tuned", {"kubeflow_pod": "ours"}),
        ("trainingjob-operator", {"job_version": "v1"}),
    ],
)
def test_runs_of_an_experiment_stay_out_of_the_tables(tmp_path: Path, contender: str, setting: dict) -> None:
    shipped, experiment = (throughput(contender, 1000, s, 60.0, 140.0, 14.0) for s in (300.0, 111.1))
    experiment.update(setting)
    shipped["series"] = experiment["series"] = []
    report = write_report([shipped, experiment], tmp_path, "preamble\n").read_text()
    assert "300" in report and "111.1" not in report
    assert len(json.loads((tmp_path / "benchmarks.json").read_text())["runs"]) == 2, "kept in the raw records"


@pytest.mark.parametrize("version", ["", "v1alpha1", "v1"])
def test_our_jobs_are_created_in_the_version_the_experiment_names(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setenv("BENCH_JOB_VERSION", version)
    ours = contender("ours")
    written = version or k.VERSION
    assert ours.job_path == f"/apis/{k.GROUP}/{written}/namespaces/{NAMESPACE}/{k.PLURAL}"
    assert ours.experiment == ({} if written == k.VERSION else {"job_version": "v1"})


def test_kubeflow_pods_like_ours_carry_our_contract_without_clashing_with_kubeflows_own() -> None:
    ours = Raw.pods("job-00000", 8, "30s")[0]
    extras = extras_like(ours)
    job = pytorch_job("j", 8, "img", ["python"], {}, extras)
    template = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    names = [e["name"] for e in template["containers"][0]["env"]]
    assert "TRAININGJOB_NAME" in names and "CHECKPOINT_DIR" in names
    assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE"} & set(names) and not any(n.startswith("PET_") for n in names)
    assert template["volumes"] == ours["spec"]["volumes"]
    assert template["containers"][0]["securityContext"] == ours["spec"]["containers"][0]["securityContext"]
    assert (
        "env"
        not in pytorch_job("j", 8, "img", ["python"], {})["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"][
            "containers"
        ][0]
    )


def test_a_contender_that_exited_is_reported_with_its_code_and_log(tmp_path: Path) -> None:
    """A run must end at once when the operator exits (it does on a lost Lease), not wait out its timeout."""
    contender = Contender("trainingjob-operator", "someone", log_path=tmp_path / "operator.log")
    assert contender.exit_report() is None, "no process: nothing to report"
    with contender.log_path.open("wb") as log:  # type: ignore[union-attr]
        contender.process = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(0.3); print('leadership lost'); raise SystemExit(3)"],
            stdout=log,
        )
    assert contender.exit_report() is None, "still running"
    contender.process.wait(timeout=10)
    report = contender.exit_report() or ""
    assert report.startswith("trainingjob-operator exited with 3:") and "leadership lost" in report


def test_a_rewritten_report_keeps_what_an_old_file_said_of_its_machine(tmp_path: Path) -> None:
    """`--report-only` on another machine once relabelled the tables' Intel runs with the AMD machine it ran on; runs
    older than per-run provenance keep their file's one `machine`, never this machine's."""
    measured_on = {"cpu": "a machine that is not this one", "memory": "1 GiB"}
    old_run = throughput("trainingjob-operator", 100, 10.0, 20.0, 90.0, 12.0)
    report = write_report([old_run], tmp_path, "preamble\n", measured_on).read_text()
    assert "cpu: a machine that is not this one, memory: 1 GiB" in report
    assert json.loads((tmp_path / "benchmarks.json").read_text())["machine"] == measured_on
