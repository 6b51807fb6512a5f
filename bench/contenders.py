"""The contenders on one workload: this operator, Kubeflow's training-operator, a raw pod creator, and a raw client
creating the pods and the same child objects our operator gives a job (the price of the objects without an operator).

Each knows how to install itself on a fresh local cluster, submit N jobs of W workers, tell which job a pod
belongs to, read a job's state from its own status, and (for the operators) say from its metrics when it has
re-observed every job after a restart. All three run under a ServiceAccount of their own, so the API server treats
them alike (same priority level) and the audit log tells their requests apart.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

from bench import kubeflow
from bench.client import Api, create_all
from bench.cluster import NAMESPACE, REPO, BenchCluster, free_port
from bench.contender_base import COMMAND, CREATE_CONCURRENCY, IMAGE, Contender, scrape, sim_annotations
from bench.measure import labelled_values, metric_sum
from bench.provenance import git_state
from trainingjob.api import constants as k
from trainingjob.api.conversion import convert, to_internal
from trainingjob.api.types import TrainingJob
from trainingjob.builders.configmap import desired_config_map
from trainingjob.builders.endpoints import desired_endpoint_slice
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.builders.service import desired_service
from trainingjob.config import OperatorConfig


class Ours(Contender):
    def __init__(self) -> None:
        # Jobs are created as the examples write them (v1alpha1); an experiment, BENCH_JOB_VERSION=v1, creates them
        # in the storage version, which spares three conversion webhook calls per write of each job.
        self.job_version = os.environ.get("BENCH_JOB_VERSION") or k.VERSION
        super().__init__(
            "trainingjob-operator",
            "system:serviceaccount:trainingjob-system:trainingjob-operator",
            job_path=f"/apis/{k.GROUP}/{self.job_version}/namespaces/{NAMESPACE}/{k.PLURAL}",
            # Jobs are created as users write them (v1alpha1) but watched in the storage version, as `kubectl get
            # -w` does (v1 is the preferred version): watched in v1alpha1, every event of every job went through
            # our conversion webhook, ~5700 calls at 1000x8 loading the API server and the operator with work
            # only the harness asked for.
            watch_path=f"/apis/{k.GROUP}/{k.WATCHED_VERSION}/namespaces/{NAMESPACE}/{k.PLURAL}",
            # An experiment's settings, e.g. BENCH_OPERATOR_ARGS="--max-concurrent-creates 16": not the defaults the
            # tables are about, so each run records them (operator_args) and the report names them.
            extra_args=shlex.split(os.environ.get("BENCH_OPERATOR_ARGS", "")),
        )
        # The before/after pair of a redesign: BENCH_OPERATOR_SRC=<another checkout>/src runs that checkout's operator
        # under this harness (same cluster, same measures); recorded with each run as an experiment, with its commit.
        self.operator_src = os.environ.get("BENCH_OPERATOR_SRC") or None

    pod_name = "trainingjob-operator-bench"

    def replace_pod(self) -> bool:
        """A Deployment's replacement for a pod that died: another name, so the new process waits until the dead
        holder's Lease expires (lease_duration, 15 s) before it leads."""
        self.pod_name = f"{Ours.pod_name}-replacement-{self.restarts}"
        return True

    @property
    def experiment(self) -> dict[str, Any]:
        settings = super().experiment
        if self.job_version != k.VERSION:
            settings = {**settings, "job_version": self.job_version}
        if self.operator_src is not None:
            commit = git_state(Path(self.operator_src))["commit"]
            settings = {**settings, "operator_src": self.operator_src, "operator_commit": commit}
        return settings

    def install(self, cluster: BenchCluster) -> None:
        cluster.kubectl("apply", "-f", str(REPO / "deploy/crd"), "-f", str(REPO / "deploy/rbac"))
        cluster.wait_established("trainingjobs.ml.example.com")
        self.kubeconfig = cluster.service_account_kubeconfig("trainingjob-system", "trainingjob-operator")
        self.start(cluster)

    def endpoint_args(self) -> list[str]:
        """Endpoints a scenario needs besides /metrics (the sweep's trials report through the progress one)."""
        return []

    def start(self, cluster: BenchCluster) -> None:
        port = free_port()
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        command = [
            *(sys.executable, "-m", "trainingjob.cli", "operator", "--all-namespaces", "--log-format", "json"),
            *("--log-level", "WARNING", "--metrics-port", str(port), "--metrics-bind", "127.0.0.1"),
            *self.endpoint_args(),
            *self.extra_args,
        ]
        # A fixed $POD_NAME, as the downward API gives a container restarted in its pod (kill -9 below): the new
        # process re-takes its own Lease at once. Kubeflow runs without leader election here (its default).
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": "/usr/bin:/bin",
            "HOME": str(Path.home()),
            "POD_NAME": self.pod_name,
        }
        if self.operator_src is not None:
            env["PYTHONPATH"] = self.operator_src
        # /readyz answers 200 once this replica leads (after a kill, once the dead holder's Lease expired).
        self.launch(command, env, f"http://127.0.0.1:{port}/readyz", cluster)

    async def submit(self, cluster: BenchCluster, jobs: int, workers: int, complete_after: str | None) -> None:
        api_version = f"{k.GROUP}/{self.job_version}"
        requests = [
            (self.job_path, convert(self.manifest(f"job-{i:05d}", workers, complete_after), api_version))
            for i in range(jobs)
        ]
        await create_all(cluster.admin, requests, CREATE_CONCURRENCY)

    @staticmethod
    def manifest(name: str, workers: int, complete_after: str | None) -> dict[str, Any]:
        spec = {
            "framework": "pytorch",
            "image": IMAGE,
            "command": COMMAND,
            "workers": workers,
            "podAnnotations": sim_annotations(complete_after),
        }
        return {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": {"name": name}, "spec": spec}

    def job_state(self, obj: dict[str, Any]) -> str | None:
        return (to_internal(obj).get("status") or {}).get("phase")  # v1 says `state`; the phase is v1alpha1's

    def reobserved(self, jobs: int) -> bool:
        text = scrape(self.metrics_url)
        reconciles = metric_sum(text, "trainingjob_reconcile_duration_seconds_count") or 0
        return reconciles >= jobs and metric_sum(text, "trainingjob_workqueue_depth") == 0

    def final_figures(self, jobs: int) -> dict[str, Any]:
        """Status patches per job by the top-level field they changed: what the writes above the floor carry."""
        fields = labelled_values(scrape(self.metrics_url), "trainingjob_status_patch_fields_total", "field")
        return {"status_patch_fields_per_job": {name: round(count / jobs, 2) for name, count in fields.items()}}


class Kubeflow(Contender):
    """training-operator v1.x running PyTorchJobs: 1 Master + W-1 Workers, the same pods as W of ours."""

    def __init__(self, tuned: bool) -> None:
        super().__init__(
            "kubeflow-tuned" if tuned else "kubeflow-default",
            f"system:serviceaccount:{kubeflow.NAMESPACE}:{kubeflow.ACCOUNT}",
            job_path=f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs",
        )
        # Tuned = our operator's settings: it has no client-side QPS limit, 16 concurrent reconciles.
        self.flags = kubeflow.TUNED_FLAGS if tuned else []
        # An experiment, kept out of the tables: BENCH_KUBEFLOW_POD=ours gives its pods our contract's extra env,
        # volumes and security context, so both contenders' pods weigh the same in every watch.
        self.pod_like_ours = os.environ.get("BENCH_KUBEFLOW_POD", "") == "ours"

    @property
    def experiment(self) -> dict[str, Any]:
        return {"kubeflow_pod": "ours"} if self.pod_like_ours else {}

    def install(self, cluster: BenchCluster) -> None:
        self.binary = kubeflow.install(cluster)
        self.kubeconfig = cluster.service_account_kubeconfig(kubeflow.NAMESPACE, kubeflow.ACCOUNT)
        self.start(cluster)

    def start(self, cluster: BenchCluster) -> None:
        metrics, probes, webhook = free_port(), free_port(), free_port()
        self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        command = [
            str(self.binary),
            "--enable-scheme=pytorchjob",
            f"--metrics-bind-address=127.0.0.1:{metrics}",
            f"--health-probe-bind-address=127.0.0.1:{probes}",
            f"--webhook-server-port={webhook}",
            "--zap-log-level=error",
            *self.flags,
        ]
        env = {"KUBECONFIG": str(self.kubeconfig), "MY_POD_NAMESPACE": kubeflow.NAMESPACE, "HOME": str(Path.home())}
        kubeflow.clear_serving_certs()
        self.launch(
            command, env, f"http://127.0.0.1:{probes}/readyz", cluster, lambda: kubeflow.mount_serving_certs(cluster)
        )

    async def submit(self, cluster: BenchCluster, jobs: int, workers: int, complete_after: str | None) -> None:
        extras = kubeflow.extras_like(Raw.pods("job-00000", workers, complete_after)[0]) if self.pod_like_ours else None
        annotations = sim_annotations(complete_after)
        requests = [
            (self.job_path, kubeflow.pytorch_job(f"job-{i:05d}", workers, IMAGE, COMMAND, annotations, extras))
            for i in range(jobs)
        ]
        await create_all(cluster.admin, requests, CREATE_CONCURRENCY)

    def job_of_pod(self, pod: dict[str, Any]) -> str | None:
        return (pod["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name")

    def job_state(self, obj: dict[str, Any]) -> str | None:
        true = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
        return next((state for state in ("Succeeded", "Failed", "Running") if state in true), None)

    def reobserved(self, jobs: int) -> bool:
        text = scrape(self.metrics_url)
        reconciles = metric_sum(text, "controller_runtime_reconcile_total", 'controller="pytorchjob-controller"')
        depth = metric_sum(text, "workqueue_depth", 'name="pytorchjob-controller"')
        return (reconciles or 0) >= jobs and depth == 0


class Raw(Contender):
    """The API server's limit for this workload: the same W pods per job, created straight from a client."""

    account = "raw-client"

    def __init__(self, name: str = "raw-pods") -> None:
        super().__init__(name, f"system:serviceaccount:{NAMESPACE}:{self.account}")

    def install(self, cluster: BenchCluster) -> None:
        cluster.kubectl("create", "serviceaccount", self.account, "-n", NAMESPACE)
        cluster.kubectl(
            "create", "rolebinding", self.account, "-n", NAMESPACE, "--clusterrole=edit",
            f"--serviceaccount={NAMESPACE}:{self.account}",
        )  # fmt: skip
        self.kubeconfig = cluster.service_account_kubeconfig(NAMESPACE, self.account)

    async def submit(self, cluster: BenchCluster, jobs: int, workers: int, complete_after: str | None) -> None:
        api = Api.from_kubeconfig(str(self.kubeconfig))
        try:
            requests = (
                request for i in range(jobs) for request in self.objects(f"job-{i:05d}", workers, complete_after)
            )
            await create_all(api, requests, CREATE_CONCURRENCY)
        finally:
            await api.close()

    def objects(self, name: str, workers: int, complete_after: str | None) -> list[tuple[str, dict[str, Any]]]:
        """(path, body) of what this client creates for one job: its pods."""
        return [(f"/api/v1/namespaces/{NAMESPACE}/pods", pod) for pod in self.pods(name, workers, complete_after)]

    @staticmethod
    def job(name: str, workers: int, complete_after: str | None) -> TrainingJob:
        body = Ours.manifest(name, workers, complete_after)
        body["metadata"].update(namespace=NAMESPACE, uid="00000000-0000-0000-0000-000000000000")
        return TrainingJob.from_body(body)

    @staticmethod
    def pods(name: str, workers: int, complete_after: str | None) -> list[dict[str, Any]]:
        """Exactly the pods our operator would create for the job, minus the owner it would not have."""
        job = Raw.job(name, workers, complete_after)
        return [without_owner(desired_worker_pod(job, index, 0, OperatorConfig())) for index in range(workers)]


def without_owner(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["metadata"].pop("ownerReferences", None)
    return manifest


class RawWithChildren(Raw):
    """Raw pod creation plus the children our operator gives each job (its ConfigMap, headless Service and first,
    empty EndpointSlice), created by a client without an operator: the floor for the objects a job is made of, so
    the operator's own overhead is what ours takes beyond it. Created in the order our operator creates them (Service
    and ConfigMap, the pods, then the slice once the Service exists). Not replayed: the slice's address patches as
    pods start, the job's status writes and the admission webhooks, which only an operator (and a job object)
    bring."""

    account = "raw-children-client"

    def __init__(self) -> None:
        super().__init__("raw-children")

    def install(self, cluster: BenchCluster) -> None:
        super().install(cluster)
        # `edit` may not write EndpointSlices (since Kubernetes 1.22, CVE-2021-25740); our operator's role may.
        cluster.kubectl(
            "create", "role", "raw-children-slices", "-n", NAMESPACE, "--verb=create",
            "--resource=endpointslices.discovery.k8s.io",
        )  # fmt: skip
        cluster.kubectl(
            "create", "rolebinding", "raw-children-slices", "-n", NAMESPACE, "--role=raw-children-slices",
            f"--serviceaccount={NAMESPACE}:{self.account}",
        )  # fmt: skip

    def objects(self, name: str, workers: int, complete_after: str | None) -> list[tuple[str, dict[str, Any]]]:
        job = Raw.job(name, workers, complete_after)
        core, slices = f"/api/v1/namespaces/{NAMESPACE}", f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}"
        return [
            (f"{core}/services", without_owner(desired_service(job))),
            (f"{core}/configmaps", without_owner(desired_config_map(job, OperatorConfig()))),
            *super().objects(name, workers, complete_after),
            (f"{slices}/endpointslices", without_owner(desired_endpoint_slice(job, 0, []))),
        ]


def contender(name: str) -> Contender:
    makers = {
        "ours": Ours,
        "kubeflow-default": lambda: Kubeflow(tuned=False),
        "kubeflow-tuned": lambda: Kubeflow(tuned=True),
        "raw": Raw,
        "raw-children": RawWithChildren,
    }
    return makers[name]()


CONTENDERS = ("ours", "kubeflow-default", "kubeflow-tuned", "raw", "raw-children")
