"""Service environment variables (pure): `<NAME>_SERVICE_HOST` and the Docker-link style `<NAME>_PORT_*`.

The kubelet gives every pod the variables of the `kubernetes` Service, and with `enableServiceLinks` (the
default) those of every Service in the pod's namespace that has a cluster IP. On the local cluster no proxy
routes cluster IPs, so the `kubernetes` variables point where pods really reach the API server: the pod network's
gateway and the API server's own port.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _prefix(name: str) -> str:
    return name.upper().replace("-", "_")


def service_variables(name: str, host: str, ports: list[dict[str, Any]]) -> dict[str, str]:
    if not ports:
        return {}
    prefix = _prefix(name)
    first = ports[0]
    variables = {f"{prefix}_SERVICE_HOST": host, f"{prefix}_SERVICE_PORT": str(first["port"])}
    for port in ports:
        if port.get("name"):
            variables[f"{prefix}_SERVICE_PORT_{_prefix(port['name'])}"] = str(port["port"])
    protocol = (first.get("protocol") or "TCP").lower()
    variables[f"{prefix}_PORT"] = f"{protocol}://{host}:{first['port']}"
    for port in ports:
        proto = (port.get("protocol") or "TCP").lower()
        base = f"{prefix}_PORT_{port['port']}_{proto.upper()}"
        variables.update(
            {
                base: f"{proto}://{host}:{port['port']}",
                f"{base}_PROTO": proto,
                f"{base}_PORT": str(port["port"]),
                f"{base}_ADDR": host,
            }
        )
    return variables


def kubernetes_variables(host: str, port: int) -> dict[str, str]:
    return service_variables("kubernetes", host, [{"name": "https", "port": port, "protocol": "TCP"}])


def pod_service_env(
    pod: dict[str, Any], services: Iterable[dict[str, Any]], api_host: str, api_port: int
) -> dict[str, str]:
    """What the kubelet adds for Services: the namespace's (with service links), then `kubernetes`'s."""
    variables: dict[str, str] = {}
    if pod["spec"].get("enableServiceLinks", True):
        namespace = pod["metadata"]["namespace"]
        for service in sorted(services, key=lambda s: s["metadata"]["name"]):
            spec = service.get("spec") or {}
            ip = spec.get("clusterIP")
            if service["metadata"].get("namespace") != namespace or not ip or ip == "None":
                continue
            if (namespace, service["metadata"]["name"]) == ("default", "kubernetes"):
                continue  # replaced below by where pods really reach the API server
            variables.update(service_variables(service["metadata"]["name"], ip, spec.get("ports") or []))
    variables.update(kubernetes_variables(api_host, api_port))
    return variables
