"""The API server's own words in a failed request: its Status body, shared by the operator and the CLI."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException


def status_body(error: ApiException) -> dict[str, Any]:
    """The metav1.Status the API server answered with, or {} (no body, not JSON, not an object)."""
    body = error.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return {}
    try:
        document = json.loads(body)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def api_message(error: ApiException) -> str:
    """The API server's own explanation of `error` (its Status message), or the HTTP reason."""
    return status_body(error).get("message") or str(error.reason or "").strip() or f"HTTP {error.status}"
