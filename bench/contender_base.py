"""What every contender shares (bench/contenders.py): the workload's image and command, the simulated completion
annotation, and the controller process a contender starts, watches for readiness and stops."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster import REPO, BenchCluster, wait_for
from trainingjob.api import constants as k
from trainingjob.config import OperatorConfig

IMAGE = "registry.example/bench/train:1"
COMMAND = ["python", "train.py"]
COMPLETE_AFTER = "sim.ml.example.com/complete-after"
# What our operator uses by default for creates; the raw client and the harness's submitter use the same bound.
CREATE_CONCURRENCY = OperatorConfig().max_concurrent_creates


def sim_annotations(complete_after: str | None) -> dict[str, str]:
    return {COMPLETE_AFTER: complete_after} if complete_after else {}


def scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""


@dataclass
class Contender:
    """Shared process handling; subclasses say how to install, submit and read state."""

    name: str
    identity: str
    job_path: str | None = None
    # Where the harness watches the job objects, when not at job_path (see Ours).
    watch_path: str | None = None
    process: subprocess.Popen | None = None
    metrics_url: str = ""
    log_path: Path | None = None
    restarts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # Arguments added to the controller's command line for an experiment (recorded with each run).
    extra_args: list[str] = field(default_factory=list)

    @property
    def experiment(self) -> dict[str, Any]:
        """An experiment's settings, recorded with each run (which keeps it out of the tables); {} as shipped."""
        return {"operator_args": self.extra_args} if self.extra_args else {}

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def job_of_pod(self, pod: dict[str, Any]) -> str | None:
        return (pod["metadata"].get("labels") or {}).get(k.LABEL_JOB_NAME)

    def job_state(self, obj: dict[str, Any]) -> str | None:
        return None

    def reobserved(self, jobs: int) -> bool:
        return True

    def final_figures(self, jobs: int) -> dict[str, Any]:
        """What the controller's own metrics say at the end of a run, before it stops ({}: nothing asked of it)."""
        return {}

    def start(self, cluster: BenchCluster) -> None:
        """Start (or restart) the controller process and wait until it is ready."""

    def replace_pod(self) -> bool:
        """Make the next start a replacement pod (a new name, so a new leader-election identity); False where that
        is no different from a restart (no leader election, or no process)."""
        return False

    def exit_report(self) -> str | None:
        """None while the contender's process runs (or it has none); else its exit code and the end of its log.

        Our operator exits on purpose when its Lease cannot be renewed in time (a Deployment restarts it); the bench
        restarts nothing, so a run must end at once with the reason instead of waiting out its timeout."""
        if self.process is None or self.process.poll() is None:
            return None
        tail = self.log_path.read_text(errors="replace")[-2000:] if self.log_path is not None else ""
        return f"{self.name} exited with {self.process.returncode}:\n{tail}"

    def stop(self, hard: bool = False) -> None:
        if self.process is not None and self.process.poll() is None:
            (self.process.kill if hard else self.process.terminate)()
            self.process.wait(timeout=30)

    def launch(
        self,
        command: list[str],
        env: dict[str, str],
        ready_url: str,
        cluster: BenchCluster,
        while_waiting: Callable[[], None] = lambda: None,
    ) -> None:
        # Outside the cluster's directory, which is removed with the cluster: a failed run's log stays readable.
        # Named by the start time too, so that the next repeat's log does not overwrite this one.
        started = time.strftime("%Y%m%dT%H%M%S")
        self.log_path = cluster.state.root.parent.parent / "bench-logs" / f"{self.name}-{started}-{self.restarts}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.restarts += 1
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)

        def ready() -> bool:
            report = self.exit_report()
            if report is not None:
                raise RuntimeError(report)
            while_waiting()
            return scrape(ready_url) != ""

        wait_for(ready, 120, f"{self.name} to be ready")
