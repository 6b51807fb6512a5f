"""Deterministic names of a job's children: creating them twice meets AlreadyExists, never a duplicate."""

from __future__ import annotations

from trainingjob.api.constants import LABEL_JOB_NAME, WORKER


def pod_name(job_name: str, role: str, index: int) -> str:
    """`<job>-<role>-<index>`: `<job>-worker-<i>`, `<job>-chief-0`, `<job>-ps-<i>`, `<job>-launcher-0`, ..."""
    return f"{job_name}-{role}-{index}"


def worker_pod_name(job_name: str, index: int) -> str:
    return pod_name(job_name, WORKER, index)


def service_name(job_name: str) -> str:
    return f"{job_name}-workers"


def config_map_name(job_name: str) -> str:
    return f"{job_name}-config"


def pod_host(job_name: str, namespace: str, role: str, index: int) -> str:
    """DNS name of a pod of any role through the headless Service (pod hostname + subdomain)."""
    return f"{pod_name(job_name, role, index)}.{service_name(job_name)}.{namespace}.svc"


def job_selector(job_name: str) -> str:
    return f"{LABEL_JOB_NAME}={job_name}"
