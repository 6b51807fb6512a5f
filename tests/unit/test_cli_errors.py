"""How the job commands explain failures: API errors, unreachable clusters, kubeconfigs, watch errors.

The response bodies are the ones a real kube-apiserver v1.35 sends (captured from the local cluster).
"""

from __future__ import annotations

import asyncio
import errno
import json
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest
import yaml
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.cli import kube
from trainingjob.cli.common import CliError, Target
from trainingjob.cli.kube import NO_KUBECONFIG, kubeconfig_paths, load_configuration
from trainingjob.cli.kube_errors import CRD_MISSING, map_api_error, map_connection_error, map_log_error
from trainingjob.kube.reflector import Gone, Reflector

NO_GROUP = "404 page not found\n"  # /apis/<group>/... when no CRD serves the group
NO_RESOURCE = {"kind": "Status", "status": "Failure", "message": "the server could not find the requested resource"}


def api_error(status: int, body: dict | str, reason: str = "") -> ApiException:
    error = ApiException(status=status, reason=reason or "Error")
    error.body = body if isinstance(body, str) else json.dumps({"code": status, **body})
    return error


def status(message: str, reason: str, **details: str) -> dict:
    return {"kind": "Status", "status": "Failure", "message": message, "reason": reason, "details": details}


def test_missing_crd_is_told_apart_from_a_missing_job() -> None:
    assert str(map_api_error(api_error(404, NO_GROUP), namespace="ns", name="a")) == CRD_MISSING
    no_resource = api_error(404, NO_RESOURCE | {"reason": "NotFound", "details": {}})
    assert str(map_api_error(no_resource, namespace="ns")) == CRD_MISSING
    assert CRD_MISSING == "the TrainingJob CRD is not installed in this cluster; apply deploy/crd/"
    gone = api_error(
        404, status('trainingjobs.ml.example.com "a" not found', "NotFound", name="a", kind="trainingjobs")
    )
    assert str(map_api_error(gone, namespace="ns", name="a")) == "trainingjob ns/a not found"
    no_namespace = api_error(404, status('namespaces "nope" not found', "NotFound", name="nope", kind="namespaces"))
    assert str(map_api_error(no_namespace, namespace="nope", name="a")) == "namespace nope not found"


def test_other_api_errors_keep_the_servers_words() -> None:
    exists = api_error(409, status("already exists", "AlreadyExists", name="a", kind="trainingjobs"))
    assert str(map_api_error(exists, namespace="ns", name="a")) == "trainingjob ns/a already exists"
    invalid = api_error(422, status("spec.workers: Invalid value: 0", "Invalid", name="a"))
    assert (
        str(map_api_error(invalid, namespace="ns", name="a"))
        == "invalid trainingjob ns/a: spec.workers: Invalid value: 0"
    )
    forbidden = api_error(403, status('user "bob" cannot list trainingjobs', "Forbidden"))
    assert str(map_api_error(forbidden, namespace="ns")) == 'forbidden: user "bob" cannot list trainingjobs'
    assert str(map_api_error(api_error(401, "", "Unauthorized"))).startswith("unauthorized:")
    assert str(map_api_error(api_error(500, "", "Internal Server Error"))) == (
        "the API server answered 500: Internal Server Error"
    )
    assert map_api_error(api_error(500, "")).exit_code == 1


def test_log_errors_say_the_pod_has_no_logs() -> None:
    kwok = api_error(500, {"message": 'Get "https://:10250/containerLogs/ns/a-worker-0/trainer": connection refused'})
    message = str(map_log_error(kwok, "ns", "a-worker-0"))
    assert message.startswith("pod ns/a-worker-0 has no logs available (container trainer)")
    assert "connection refused" in message
    waiting = api_error(400, {"message": 'container "trainer" in pod "a-worker-0" is waiting to start'})
    assert "has no logs available" in str(map_log_error(waiting, "ns", "a-worker-0"))
    gone = api_error(404, status('pods "a-worker-0" not found', "NotFound", name="a-worker-0", kind="pods"))
    assert str(map_log_error(gone, "ns", "a-worker-0")).startswith("pod ns/a-worker-0 not found")


def test_unreachable_api_server() -> None:
    key = SimpleNamespace(host="127.0.0.1", port=1, ssl=True)
    refused = aiohttp.ClientConnectorError(key, ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed"))
    server = "https://127.0.0.1:1"
    assert str(map_connection_error(refused, server)) == (
        "cannot reach the Kubernetes API at https://127.0.0.1:1: connection refused"
    )
    unreachable = aiohttp.ClientConnectorError(key, OSError(errno.EHOSTUNREACH, "No route to host"))
    assert str(map_connection_error(unreachable, server)).endswith(": No route to host")
    assert str(map_connection_error(TimeoutError(), server)).endswith(": timed out waiting for an answer")
    certificate = aiohttp.ClientConnectorCertificateError(key, ValueError("self-signed certificate"))
    assert "TLS certificate verification failed (self-signed certificate)" in str(
        map_connection_error(certificate, server)
    )


def write_kubeconfig(path: Path, server: str = "https://127.0.0.1:6443", namespace: str | None = None) -> Path:
    context: dict = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "main", "context": context}, {"name": "other", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "main",
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_kubeconfig_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "DEFAULT_KUBECONFIG", str(tmp_path / "home-config"))
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_DIR", tmp_path / "sa")
    flag, env = write_kubeconfig(tmp_path / "flag"), write_kubeconfig(tmp_path / "env")
    assert kubeconfig_paths(str(flag), {"KUBECONFIG": str(env)}) == str(flag)
    assert kubeconfig_paths(None, {"KUBECONFIG": f"{tmp_path / 'missing'}:{env}"}) == f"{tmp_path / 'missing'}:{env}"
    with pytest.raises(CliError, match=r"kubeconfig .*/nope does not exist"):
        kubeconfig_paths(str(tmp_path / "nope"), {})
    with pytest.raises(CliError, match=r"KUBECONFIG=/x/y names no existing file"):
        kubeconfig_paths(None, {"KUBECONFIG": "/x/y"})
    with pytest.raises(CliError) as no_config:
        kubeconfig_paths(None, {})
    assert str(no_config.value) == NO_KUBECONFIG
    write_kubeconfig(tmp_path / "home-config")
    assert kubeconfig_paths(None, {}) == str(tmp_path / "home-config")
    (tmp_path / "home-config").unlink()
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text("t")
    assert kubeconfig_paths(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) is None  # in-cluster


def test_namespace_from_the_flag_the_context_or_default(tmp_path: Path) -> None:
    path = str(write_kubeconfig(tmp_path / "config", namespace="team-a"))

    def namespace_of(target: Target) -> tuple[str, str]:
        configuration, namespace = asyncio.run(load_configuration(target))
        return configuration.host, namespace

    assert namespace_of(Target(kubeconfig=path)) == ("https://127.0.0.1:6443", "team-a")
    assert namespace_of(Target(kubeconfig=path, namespace="mine"))[1] == "mine"
    assert namespace_of(Target(kubeconfig=path, context="other"))[1] == "default"
    with pytest.raises(CliError, match="cannot use kubeconfig"):
        asyncio.run(load_configuration(Target(kubeconfig=path, context="missing")))
    (tmp_path / "broken").write_text("current-context: nowhere\n")
    with pytest.raises(CliError, match="cannot use kubeconfig"):
        asyncio.run(load_configuration(Target(kubeconfig=str(tmp_path / "broken"))))


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("root:x:0:0:root:/root:/bin/bash\n", "not a kubeconfig (its YAML is a str, not a mapping of clusters"),
        ("- a\n- b\n", "not a kubeconfig (its YAML is a list, not a mapping"),
        ("", "the file is empty"),
        ("title: notes\n", "not a kubeconfig (no clusters, contexts, users or current-context in it)"),
        ("contexts: main\n", "contexts is a str, not a list"),
        ("users: [{user: {}}]\n", "entry 1 of users has no name"),
        ("a: [\n", "not valid YAML: line 2, column 1: expected the node content, but found '<stream end>'"),
    ],
)
def test_a_file_that_is_not_a_kubeconfig_is_named_in_one_line(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "config"
    path.write_text(content)
    with pytest.raises(CliError) as error:
        asyncio.run(load_configuration(Target(kubeconfig=str(path))))
    message = str(error.value)
    assert message.startswith(f"cannot use kubeconfig {path}: {problem}") and "\n" not in message


def test_watch_error_events() -> None:
    """`tj get --watch` follows the shared watch loop (kube/reflector.py): an event passes, 410 means list again,
    any other ERROR event is the API server's refusal, in one line."""
    reflector = Reflector(None, "/apis/ml.example.com/v1/trainingjobs", None, "trainingjobs")  # type: ignore[arg-type]
    assert reflector.event({"type": "MODIFIED", "object": {"metadata": {"name": "a"}}}) == (
        "MODIFIED",
        {"metadata": {"name": "a"}},
    )
    with pytest.raises(Gone):
        reflector.event({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})
    forbidden = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no watch for you"}
    with pytest.raises(ApiException) as refused:
        reflector.event({"type": "ERROR", "object": forbidden})
    assert str(map_api_error(refused.value)) == "forbidden: no watch for you"
