"""scheduling/quota.py: quantities shown back, what one worker pod counts against quotas, and which quotas apply to it
(parsing quantities is kube/quantity.py's, tested there)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from trainingjob.api.replicas import role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.config import OperatorConfig
from trainingjob.scheduling.quota import format_quantity, pod_demand, quota_applies, role_demand


@pytest.mark.parametrize(
    ("amount", "resource", "text"),
    [
        ("0.5", "requests.cpu", "500m"),
        ("16", "requests.cpu", "16"),
        (str(16 * 2**30), "limits.memory", "16Gi"),
        ("8", "requests.nvidia.com/gpu", "8"),
    ],
)
def test_quantities_read_back_the_way_people_write_them(amount: str, resource: str, text: str) -> None:
    assert format_quantity(Decimal(amount), resource) == text


def test_a_pod_counts_its_containers_summed_and_init_containers_as_a_floor() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}},
                {"resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
            "priorityClassName": "high",
        }
    }
    demand = pod_demand(pod)
    assert demand.requests == {"cpu": Decimal(4), "memory": Decimal(2**30), "nvidia.com/gpu": Decimal(1)}
    assert demand.limits == {"memory": Decimal(2**30), "cpu": Decimal(2), "nvidia.com/gpu": Decimal(1)}
    assert (demand.priority_class, demand.best_effort, demand.terminating) == ("high", False, False)


def test_limit_range_defaults_fill_what_a_container_leaves_out() -> None:
    pod = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
    defaults = [{"type": "Container", "default": {"memory": "2Gi"}, "defaultRequest": {"cpu": "100m", "memory": "1Gi"}}]
    demand = pod_demand(pod, defaults)
    assert demand.requests == {"cpu": Decimal(1), "memory": Decimal(2**30)}
    assert demand.limits == {"memory": Decimal(2 * 2**30)}


@pytest.mark.parametrize(
    ("scope", "applies"),
    [
        ({"scopes": ["NotBestEffort"]}, True),
        ({"scopes": ["BestEffort"]}, False),
        ({"scopes": ["NotTerminating"]}, True),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}}, False),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}}, True),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["a"]}]
                }
            },
            True,
        ),
    ],
)
def test_scoped_quotas_apply_as_the_quota_controller_applies_them(scope: dict, applies: bool) -> None:
    demand = pod_demand({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}})
    assert quota_applies({"spec": {"hard": {}, **scope}}, demand) is applies


@pytest.mark.parametrize(
    "spec",
    [
        {"resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}, "gpuPerWorker": 2},
        {"resources": {"limits": {"cpu": "500m"}}, "scheduling": {"priorityClassName": "high"}},
        {"roles": {"ps": {"replicas": 1, "resources": {"requests": {"memory": "2Gi"}}}}, "framework": "tensorflow"},
        {},
    ],
)
def test_a_roles_demand_read_from_the_job_is_what_its_pod_counts(spec: dict) -> None:
    """One reading of what a pod asks for (role_demand), the same as counting the pod the builder makes."""
    body = {
        "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
        "spec": {"framework": "pytorch", "image": "i", "command": ["t"], "workers": 2, **spec},
    }
    job = TrainingJob.from_body(body)
    defaults = [{"type": "Container", "default": {"memory": "512Mi"}, "defaultRequest": {"cpu": "100m"}}]
    for role in role_counts(job.spec):
        pod = desired_worker_pod(job, 0, 0, OperatorConfig(), role=role)
        assert role_demand(job, role).pod(defaults) == pod_demand(pod, defaults)
        assert role_demand(job, role).pod() == pod_demand(pod)


def test_a_quantity_that_does_not_parse_is_noted_not_raised() -> None:
    body = {"metadata": {"name": "j"}, "spec": {"framework": "pytorch", "resources": {"requests": {"cpu": "lots"}}}}
    demand = role_demand(TrainingJob.from_body(body), "worker")
    assert demand.unparsed and demand.requests == {}
