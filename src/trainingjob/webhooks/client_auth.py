"""Who may call /mutate and /validate: the API server, by the client certificate it presents.

kube-apiserver presents a client certificate to admission webhooks when its AdmissionConfiguration gives the
ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins a kubeConfigFile with a user for the webhook's
host (or `*`); the local cluster does (cluster/webhook_client.py). It presents none to conversion webhooks: the
apiextensions server builds their client with an empty kubeconfig (k8s.io/apiextensions-apiserver
pkg/apiserver/conversion/webhook_converter.go), so /convert cannot authenticate its caller and relies on its
bounds (limits.py) and, in a cluster, the shipped NetworkPolicy.

Without this, any pod could post AdmissionReviews: the admission checks of users' permissions (authorization.py)
would answer as an oracle, and the mutating webhook would sign (vetting.py) whatever a stranger sent.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class ApiServerCallers:
    """Client certificates signed by the CA in `ca_file`, with a common name in `names` (empty: any name)."""

    ca_file: str
    names: frozenset[str] = frozenset()

    def require_on(self, context: ssl.SSLContext) -> None:
        """Ask every client for a certificate and verify one that comes. Optional at the handshake: /convert and
        /healthz are called without one."""
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cafile=self.ca_file)

    def check(self, request: web.Request) -> None:
        """401 without a verified certificate, 403 with one of another name."""
        transport = request.transport
        certificate = transport.get_extra_info("peercert") if transport is not None else None
        if not certificate:
            raise web.HTTPUnauthorized(text="this webhook answers the API server only: no client certificate")
        name = common_name(certificate)
        if self.names and name not in self.names:
            raise web.HTTPForbidden(text=f"client certificate {name!r} is not the API server's")


def common_name(certificate: dict[str, Any]) -> str:
    """The subject's CN of a certificate as ssl.getpeercert() gives it."""
    for attributes in certificate.get("subject", ()):
        for key, value in attributes:
            if key == "commonName":
                return str(value)
    return ""
