"""One progress report over HTTPS: token, TLS, retries, and what the answer means for the reporter.

Why separate from the reporter: the reporter decides *whether* to send (throttle, pause, held-back checkpoints),
this module only *how*, and tells the reporter what happened as an Outcome. It never raises for network or HTTP
trouble; it logs through the reporter's once-per-kind logger.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import math
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Protocol

from . import _env
from ._body import MAX_BODY_BYTES

DEFAULT_RETRY_AFTER = 5.0  # seconds to pause after a 429 without a usable Retry-After
MAX_RETRY_AFTER = 600.0  # a bogus Retry-After must not silence a job for hours

LogOnce = Callable[..., None]  # (kind, level, message, *args)


class Opener(Protocol):
    """What sends a request: ``urllib.request.OpenerDirector`` or a test double; HTTP errors raise HTTPError."""

    def open(self, fullurl: urllib.request.Request, data: bytes | None = None, timeout: float = ...) -> Any: ...


class Outcome(Enum):
    SENT = "sent"
    DROPPED = "dropped"  # rejected or misconfigured: sending it again would not help
    RATE_LIMITED = "rate-limited"  # 429: pause for the Retry-After
    UNREACHABLE = "unreachable"  # 5xx or connection errors after every retry


def progress_url(env: Mapping[str, str]) -> str | None:
    """The report URL for this job, or None outside a TrainingJob (or when the job's identity is missing)."""
    base = env.get(_env.PROGRESS_URL, "").strip().rstrip("/")
    name = env.get(_env.JOB_NAME, "").strip()
    namespace = env.get(_env.JOB_NAMESPACE, "").strip()
    if not (base and name and namespace):
        return None
    quote = urllib.parse.quote
    return f"{base}/v1/namespaces/{quote(namespace, safe='')}/trainingjobs/{quote(name, safe='')}/progress"


def retry_after_seconds(value: str | None) -> float:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), bounded to [0, MAX_RETRY_AFTER]."""
    if not value or not value.strip():
        return DEFAULT_RETRY_AFTER
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError):
            return DEFAULT_RETRY_AFTER
    if not math.isfinite(seconds):
        return DEFAULT_RETRY_AFTER
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class Transport:
    """POSTs report bodies to one URL, reading the token file anew for every request."""

    def __init__(
        self,
        url: str,
        *,
        ca_file: str | None,
        token_file: str | None,
        retries: int,
        backoff: float,
        timeout: float,
        sleep: Callable[[float], None],
        opener: Opener | None,
        once: LogOnce,
    ) -> None:
        self.url = url
        self.ca_file = ca_file
        self.token_file = token_file
        self.retries = max(0, retries)
        self.backoff = backoff
        self.timeout = timeout
        self._sleep = sleep
        self._opener = opener
        self._once = once

    def post(self, body: Mapping[str, Any]) -> tuple[Outcome, float]:
        """Send one report; the outcome, and for RATE_LIMITED how many seconds the endpoint wants us to wait."""
        data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        if len(data) > MAX_BODY_BYTES:
            self._once("too-large", logging.WARNING, "progress report of %d bytes exceeds 16 KiB; dropped", len(data))
            return Outcome.DROPPED, 0.0
        opener = self._get_opener()
        if opener is None:
            return Outcome.DROPPED, 0.0
        failure, kind = "", ""
        for attempt in range(1 + self.retries):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            token = self._read_token()
            if token is None:
                return Outcome.DROPPED, 0.0
            request = urllib.request.Request(self.url, data=data, method="POST")
            request.add_header("Authorization", f"Bearer {token}")
            request.add_header("Content-Type", "application/json")
            try:
                with opener.open(request, timeout=self.timeout) as response:
                    response.read()
                return Outcome.SENT, 0.0
            except urllib.error.HTTPError as error:
                status, reason, retry_after = error.code, _reason(error), error.headers.get("Retry-After")
                error.close()
                if status == 429:
                    pause = retry_after_seconds(retry_after)
                    self._once("http-429", logging.WARNING, "progress reports rate-limited; pausing %.1fs", pause)
                    return Outcome.RATE_LIMITED, pause
                if status < 500:
                    self._once(
                        f"http-{status}", logging.WARNING, "progress report rejected: HTTP %d %s", status, reason
                    )
                    return Outcome.DROPPED, 0.0
                failure, kind = f"HTTP {status} {reason}".strip(), f"http-{status}"
            except urllib.error.URLError as error:
                if isinstance(error.reason, ssl.SSLCertVerificationError):
                    self._once("tls", logging.WARNING, "progress endpoint certificate not trusted: %s", error.reason)
                    return Outcome.DROPPED, 0.0
                failure, kind = f"connection error: {error.reason}", "connection"
            except (OSError, http.client.HTTPException) as error:
                failure, kind = f"connection error: {error!r}", "connection"
        self._once(
            kind, logging.WARNING, "progress endpoint %s: %d attempts failed (%s)", self.url, attempt + 1, failure
        )
        return Outcome.UNREACHABLE, 0.0

    def _get_opener(self) -> Opener | None:
        if self._opener is None:
            try:
                context = ssl.create_default_context(cafile=self.ca_file)
            except (OSError, ValueError) as error:  # missing or unreadable CA bundle
                self._once("ca", logging.WARNING, "cannot load progress CA file %s: %s", self.ca_file, error)
                return None
            # No proxies: the endpoint is an in-cluster Service; HTTPS_PROXY is meant for the world outside.
            self._opener = urllib.request.build_opener(
                urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
            )
        return self._opener

    def _read_token(self) -> str | None:
        if self.token_file is None:
            self._once("token", logging.WARNING, "%s is unset; progress reports dropped", _env.PROGRESS_TOKEN_FILE)
            return None
        try:
            with open(self.token_file, encoding="utf-8") as file:
                token = file.read().strip()
        except (OSError, UnicodeDecodeError) as error:
            self._once("token", logging.WARNING, "cannot read progress token %s: %s", self.token_file, error)
            return None
        if not token:
            self._once("token", logging.WARNING, "progress token file %s is empty", self.token_file)
            return None
        return token


def _reason(error: urllib.error.HTTPError) -> str:
    """The endpoint's `{"reason": ...}`, or the status text; never more than a line."""
    try:
        payload = json.loads(error.read(4096) or b"{}")
        reason = payload.get("reason") if isinstance(payload, dict) else None
    except (OSError, ValueError, http.client.HTTPException):
        reason = None
    return " ".join(str(reason or error.reason or "").split())[:200]
