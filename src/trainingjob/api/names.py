"""Deterministic names of a job's children: creating them twice meets AlreadyExists, never a duplicate."""

from __future__ import annotations

from trainingjob.api.constants import LABEL_JOB_NAME


def worker_pod_name(job_name: str, index: int) -> str:
    return f"{job_name}-worker-{index}"


def service_name(job_name: str) -> str:
    return f"{job_name}-workers"


def config_map_name(job_name: str) -> str:
    return f"{job_name}-config"


def worker_host(job_name: str, namespace: str, index: int) -> str:
    """DNS name of a worker through the headless Service (pod hostname + subdomain)."""
    return f"{worker_pod_name(job_name, index)}.{service_name(job_name)}.{namespace}.svc"


def job_selector(job_name: str) -> str:
    return f"{LABEL_JOB_NAME}={job_name}"
