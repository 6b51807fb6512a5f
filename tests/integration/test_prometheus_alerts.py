"""A real Prometheus (built from the module promtool comes from) scrapes the running operator and evaluates
deploy/monitoring/'s alert rules on its real series: failing jobs fire TrainingJobFailed for their namespace and
reason, while a healthy operator fires nothing about itself.

promtool's unit tests (tests/unit/test_monitoring_tools.py) prove the rules' logic on series written by hand; this
proves the series the operator really exports have the names and labels the rules expect."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs import SIM, create_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator, free_port
from tests.prerequisites import missing_prerequisite
from tests.unit.test_monitoring import load_rule
from trainingjob.cluster.build import PROMETHEUS, is_built
from trainingjob.cluster.paths import binaries_dir

pytestmark = pytest.mark.integration

PROMETHEUS_HINT = "the Prometheus server is not built; build it once with: tj cluster build --with-promtool"
# The rules select the operator by this scrape job name (TrainingJobOperatorDown: up{job="trainingjob-operator"}).
SCRAPE_JOB = "trainingjob-operator"


class Prometheus:
    """One Prometheus server process and its HTTP API."""

    def __init__(self, url: str, process: subprocess.Popen, log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str, **labels: str) -> list[dict[str, Any]]:
        """Active (pending or firing) alerts called `name` whose labels include `labels`."""
        return [
            alert
            for alert in self.get("/api/v1/alerts")["alerts"]
            if alert["labels"].get("alertname") == name and labels.items() <= alert["labels"].items()
        ]

    def ready(self) -> bool:
        assert self.process.poll() is None, f"prometheus exited: {self.log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False


@pytest.fixture
def prometheus(operator: RunningOperator, tmp_path: Path) -> Iterator[Prometheus]:
    if not is_built(PROMETHEUS):
        missing_prerequisite(PROMETHEUS_HINT)
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": load_rule()["spec"]["groups"]}, sort_keys=False))
    config = tmp_path / "prometheus.yaml"
    target = urllib.parse.urlparse(operator.metrics_url).netloc
    config.write_text(
        yaml.safe_dump(
            {
                # Every second, so the test sees scrapes and rule evaluations in seconds, not minutes.
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [{"job_name": SCRAPE_JOB, "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    port, log = free_port(), tmp_path / "prometheus.log"
    binary = binaries_dir(PROMETHEUS.name, PROMETHEUS.version) / "prometheus"
    command = [
        str(binary),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with log.open("w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_until(server.ready, 60, "Prometheus to be ready")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def failing_job(name: str) -> dict[str, Any]:
    """A job whose only worker fails two seconds after it starts, with no restart left: BackoffLimitExceeded."""
    annotations = {f"{SIM}/fail": "true", f"{SIM}/fail-after": "2s", f"{SIM}/exit-code": "1"}
    return job_manifest(name, complete_after=None, backoffLimit=0, podAnnotations=annotations)


def test_failing_jobs_fire_the_failed_alert_on_real_series(
    kube: Kube, namespace: str, operator: RunningOperator, prometheus: Prometheus
) -> None:
    scraped = wait_until(
        lambda: prometheus.get("/api/v1/query", query=f'up{{job="{SCRAPE_JOB}"}} == 1')["result"],
        60,
        "Prometheus to scrape the operator",
    )
    assert len(scraped) == 1
    # A healthy operator with a leader fires nothing about itself (the rules would say so within seconds here).
    assert wait_until(lambda: prometheus.get("/api/v1/rules")["groups"], 30, "the rules to load")
    time.sleep(3)  # a few evaluations of every rule on live series
    for alert in ("TrainingJobOperatorDown", "TrainingJobOperatorNoLeader", "TrainingJobReconcileErrors"):
        assert prometheus.alerts(alert) == [], f"{alert} is active for a healthy operator"
    assert prometheus.alerts("TrainingJobFailed", namespace=namespace) == []

    # The first failure makes the counter's series appear at 1, which increase() cannot see until the rule's
    # `offset 10m` arm has history; the second moves it to 2, which the rule sees at once (for: 0m).
    create_job(kube, namespace, failing_job("first"))
    wait_phase(kube, namespace, "first", "Failed")
    wait_until(
        lambda: prometheus.get("/api/v1/query", query=f'trainingjob_jobs_failed_total{{namespace="{namespace}"}} == 1')[
            "result"
        ],
        60,
        "Prometheus to scrape the first failure",
    )
    create_job(kube, namespace, failing_job("second"))
    wait_phase(kube, namespace, "second", "Failed")
    firing = wait_until(
        lambda: [
            alert for alert in prometheus.alerts("TrainingJobFailed", namespace=namespace) if alert["state"] == "firing"
        ],
        90,
        "TrainingJobFailed to fire for the namespace",
    )
    labels = firing[0]["labels"]
    assert labels["reason"] == "BackoffLimitExceeded" and labels["framework"] == "pytorch"
    assert labels["severity"] == "warning"
    assert namespace in firing[0]["annotations"]["summary"]
