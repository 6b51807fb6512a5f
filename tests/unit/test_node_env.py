"""The local node's env resolution (pure): $(VAR) expansion as Kubernetes defines it, every env source in the
kubelet's order, thread limits, service variables, quantities and the downward API."""

from __future__ import annotations

import base64
from decimal import Decimal

import pytest

from trainingjob.kube.quantity import QuantityError, cpu_threads, parse_quantity
from trainingjob.node.env.envvars import (
    EnvError,
    EnvSources,
    container_env,
    expand_command,
    final_environment,
    referenced_objects,
    thread_env,
)
from trainingjob.node.env.expansion import expand, mapping_for
from trainingjob.node.env.fieldpath import FieldPathError, format_map, pod_field, resource_field
from trainingjob.node.env.serviceenv import kubernetes_variables, pod_service_env

CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)-1", "A-1"),
        ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
        ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
        ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
        ("f000-$$VAR_A", "f000-$VAR_A"),
        ("foo\\$(VAR_C)bar", "foo\\Cbar"),
        ("$(VAR_DNE)", "$(VAR_DNE)"),
        ("$(VAR_EMPTY)", ""),
        ("$(VAR_A)$$", "A$"),
        ("$(VAR_A", "$(VAR_A"),
        ("$VAR_A", "$VAR_A"),
        ("$", "$"),
        ("$(", "$("),
        ("$()", "$()"),
        ("$(VAR_A)$(", "A$("),
        ("$$$(VAR_A)", "$A"),
        ("no references", "no references"),
        ("", ""),
    ],
)
def test_expansion_follows_kubernetes(text: str, expected: str) -> None:
    assert expand(text, mapping_for(CONTEXT)) == expected


def test_the_first_context_defining_a_name_wins() -> None:
    assert expand("$(X)", mapping_for({"X": "env"}, {"X": "service"})) == "env"
    assert expand("$(Y)", mapping_for({"X": "env"}, {"Y": "service"})) == "service"


def pod(**spec: object) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"a": "1"}, "annotations": {"b": "x y"}},
        "spec": {"nodeName": "tj-local-0", "serviceAccountName": "sa", "containers": [], **spec},
        "status": {"podIP": "10.1.1.2", "podIPs": [{"ip": "10.1.1.2"}], "hostIP": "10.1.0.2"},
    }


def test_env_from_then_env_in_order_with_expansion_and_services_last() -> None:
    container = {
        "name": "c",
        "envFrom": [
            {"configMapRef": {"name": "cm"}, "prefix": "CM_"},
            {"secretRef": {"name": "sec"}},
            {"configMapRef": {"name": "absent", "optional": True}},
        ],
        "env": [
            {"name": "FIRST", "value": "1"},
            {"name": "SECOND", "value": "$(FIRST)-$(CM_K)-$(SVC_HOST)-$(LATER)"},
            {"name": "LATER", "value": "late"},
            {"name": "TOKEN", "value": "overridden"},
            {"name": "SVC_HOST", "value": "mine"},
        ],
    }
    sources = EnvSources(
        config_maps={"cm": {"data": {"K": "v"}}, "absent": None},
        secrets={"sec": {"data": {"TOKEN": base64.b64encode(b"t").decode()}}},
    )
    env = container_env(pod(), container, sources, {"SVC_HOST": "10.0.0.9", "SVC_PORT": "80"}, {})
    assert env["SECOND"] == "1-v-10.0.0.9-$(LATER)"  # only what is defined earlier (and services) expands
    assert env["TOKEN"] == "overridden" and env["CM_K"] == "v"
    assert env["SVC_HOST"] == "mine" and env["SVC_PORT"] == "80"


@pytest.mark.parametrize(
    ("variable", "sources", "message"),
    [
        (
            {"configMapKeyRef": {"name": "cm", "key": "k"}},
            EnvSources(config_maps={"cm": None}),
            'configmap "cm" not found',
        ),
        (
            {"configMapKeyRef": {"name": "cm", "key": "k"}},
            EnvSources(config_maps={"cm": {"data": {}}}),
            "couldn't find key k in ConfigMap ns/cm",
        ),
        ({"secretKeyRef": {"name": "s", "key": "k"}}, EnvSources(secrets={"s": None}), 'secret "s" not found'),
        (
            {"secretKeyRef": {"name": "s", "key": "k"}},
            EnvSources(secrets={"s": {"data": {}}}),
            "couldn't find key k in Secret ns/s",
        ),
    ],
)
def test_missing_references_are_the_kubelet_s_errors(variable: dict, sources: EnvSources, message: str) -> None:
    container = {"name": "c", "env": [{"name": "X", "valueFrom": variable}]}
    with pytest.raises(EnvError, match=message):
        container_env(pod(), container, sources, {}, {})
    optional = {kind: {**ref, "optional": True} for kind, ref in variable.items()}
    container["env"][0]["valueFrom"] = optional
    assert "X" not in container_env(pod(), container, sources, {}, {})


def test_fields_and_resources_of_the_downward_api() -> None:
    assert pod_field(pod(), "metadata.labels['a']") == "1"
    assert pod_field(pod(), "metadata.annotations['missing']") == ""
    assert pod_field(pod(), "status.podIPs") == "10.1.1.2"
    assert pod_field(pod(), "spec.serviceAccountName") == "sa"
    assert pod_field(pod(), "metadata.annotations", allow_maps=True) == 'b="x y"'
    with pytest.raises(FieldPathError):
        pod_field(pod(), "metadata.labels")
    limited = {"resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}, "requests": {"cpu": "250m"}}}
    assert resource_field(limited, "limits.cpu", "1m", {}) == "1500"
    assert resource_field(limited, "limits.cpu", "0", {}) == "2"  # rounded up; divisor 0 means 1
    assert resource_field(limited, "limits.memory", "1Mi", {}) == "1024"
    assert resource_field(limited, "requests.cpu", None, {}) == "1"
    assert resource_field({}, "limits.memory", "1Ki", {"memory": "2048Ki"}) == "2048"  # node allocatable
    assert format_map({"z": "1", "a": 'say "hi"'}) == 'a="say \\"hi\\""\nz="1"'


def test_referenced_objects_are_collected_for_fetching() -> None:
    container = {
        "envFrom": [{"configMapRef": {"name": "a"}}, {"secretRef": {"name": "s1"}}],
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "b", "key": "k"}}}],
    }
    assert referenced_objects(container) == ({"a", "b"}, {"s1"})


@pytest.mark.parametrize(
    ("resources", "machine", "threads"),
    [
        ({"limits": {"cpu": "500m"}}, 8, "1"),
        ({"limits": {"cpu": "1500m"}}, 8, "2"),
        ({"limits": {"cpu": "4"}}, 2, "2"),
        ({"requests": {"cpu": "3"}}, 8, "3"),
        ({}, 8, None),
    ],
)
def test_thread_limits_follow_the_cpu_limit(resources: dict, machine: int, threads: str | None) -> None:
    env = thread_env({"resources": resources}, machine)
    assert env.get("OMP_NUM_THREADS") == threads
    if threads:
        assert env["MKL_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["TF_NUM_INTRAOP_THREADS"] == threads


def test_final_environment_layers_image_threads_and_pod() -> None:
    env = final_environment(
        {"PATH": "/usr/bin", "LANG": "C", "OMP_NUM_THREADS": "3"},
        "/venv/bin",
        "w0",
        {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        {"LANG": "en_US.UTF-8"},
    )
    assert env["PATH"] == "/venv/bin:/usr/bin" and env["HOSTNAME"] == "w0"
    assert env["LANG"] == "en_US.UTF-8" and env["OMP_NUM_THREADS"] == "3" and env["MKL_NUM_THREADS"] == "1"


def test_command_expansion_uses_the_container_env() -> None:
    assert expand_command(["run", "--rank=$(RANK)", "$$(RANK)"], {"RANK": "2"}) == ["run", "--rank=2", "$(RANK)"]


def test_service_variables_for_the_namespace_and_kubernetes() -> None:
    services = [
        {
            "metadata": {"name": "my-db", "namespace": "ns"},
            "spec": {"clusterIP": "10.0.0.5", "ports": [{"name": "sql", "port": 5432}]},
        },
        {"metadata": {"name": "headless", "namespace": "ns"}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}},
        {
            "metadata": {"name": "other", "namespace": "elsewhere"},
            "spec": {"clusterIP": "10.0.0.6", "ports": [{"port": 2}]},
        },
    ]
    env = pod_service_env(pod(), services, "10.184.0.1", 38665)
    assert env["MY_DB_SERVICE_HOST"] == "10.0.0.5" and env["MY_DB_SERVICE_PORT_SQL"] == "5432"
    assert env["MY_DB_PORT_5432_TCP_ADDR"] == "10.0.0.5"
    assert not any(k.startswith(("HEADLESS_", "OTHER_")) for k in env)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.184.0.1" and env["KUBERNETES_SERVICE_PORT"] == "38665"
    assert env["KUBERNETES_PORT"] == "tcp://10.184.0.1:38665"
    no_links = pod_service_env(pod(enableServiceLinks=False), services, "10.184.0.1", 38665)
    assert no_links == kubernetes_variables("10.184.0.1", 38665)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", "0.5"),
        ("2", "2"),
        ("1Ki", "1024"),
        ("1.5Gi", "1610612736"),
        ("1e3", "1000"),
        ("100M", "100000000"),
        (".5", "0.5"),
    ],
)
def test_quantities(text: str, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


def test_bad_quantities_and_cpu_threads() -> None:
    with pytest.raises(QuantityError):
        parse_quantity("1.5.5")
    assert cpu_threads("100m", 4) == 1 and cpu_threads("2.1", 4) == 3 and cpu_threads(None, 4) is None
