"""Who the API server sees: every client of ours names itself in its User-Agent.

The API server names an update's field manager after the User-Agent's product (what comes before the first "/"),
so `kubectl get pod --show-managed-fields` shows `trainingjob-operator` owning the fields of the pods, Services and
status it wrote, where kubernetes_asyncio's default would show `OpenAPI-Generator` for every Python client alike;
audit logs and API server request logs tell the operator, the CLI and the UI apart the same way.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from trainingjob import __version__

OPERATOR = "trainingjob-operator"
CLI = "tj"
UI = "tj-ui"
# The Python client (trainingjob.client): notebooks and scripts that submit and follow jobs.
PYTHON_CLIENT = "trainingjob-client"
SIMULATED_WORKER = "tj-simulated-worker"
# The local process node's kubelet stand-in (node/api/client.py), which has no kubernetes_asyncio client.
NODE_AGENT = "tj-node-agent"


class HasUserAgent(Protocol):
    user_agent: str


ApiClientT = TypeVar("ApiClientT", bound=HasUserAgent)


def user_agent(product: str) -> str:
    """`<product>/<version> (python)`: the product is the field manager; the version tells releases apart."""
    return f"{product}/{__version__} (python)"


def named(api: ApiClientT, product: str) -> ApiClientT:
    """The same kubernetes_asyncio client, sending `product` as its User-Agent on every request."""
    api.user_agent = user_agent(product)
    return api
