"""What the Python client raises: one base class, and for API answers the API server's own status, reason and
message, so a notebook can branch on `NotFound` or `Invalid` and still show the server's words.

The client talks to the API through the CLI's client layer (cli/kube.py), whose failures are CliErrors carrying
the API server's answer; `from_cli_error` turns them into these classes without losing a word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainingjob.cli.common import CliError


class TrainingClientError(Exception):
    """Every failure of trainingjob.client; `str()` is one line meant for a person."""


class ApiError(TrainingClientError):
    """The API server refused or failed a request: `status` (HTTP), `reason` (its Status reason, e.g. Invalid) and
    `api_message` (its message, verbatim, e.g. the CRD rule that rejected a field)."""

    def __init__(self, message: str, *, status: int | None, reason: str = "", api_message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.api_message = api_message


class NotFound(ApiError):
    """404: no such job (or namespace, pod, CRD)."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: a job of that name exists; pick another name or delete it first."""


class Conflict(ApiError):
    """409 Conflict: the object changed since it was read."""


class Invalid(ApiError):
    """422: the API server's schema, CEL rules or admission webhook rejected the job; api_message says which."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: RBAC (or an admission policy) does not allow this request for this user."""


class Unreachable(TrainingClientError):
    """No answer from the API server (connection refused, TLS failure, timeout) or no usable kubeconfig."""


class CodeTooLarge(TrainingClientError, ValueError):
    """The code to ship (function or script with the SDK) does not fit into one ConfigMap."""


class UnsupportedCode(TrainingClientError, ValueError):
    """A callable whose source cannot be shipped on its own (a lambda, a closure, a builtin, no source)."""


class JobFailed(TrainingClientError):
    """The job ended Failed while the caller waited for another phase; `job` is its last state."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job


class WaitTimeout(TrainingClientError, TimeoutError):
    """The job did not reach the phase waited for in time; `job` is its last state seen."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job


_BY_STATUS: dict[int, type[ApiError]] = {401: Unauthorized, 403: Forbidden, 404: NotFound, 422: Invalid}


def from_cli_error(error: CliError) -> TrainingClientError:
    """The client's exception for a failure of the CLI's client layer (same message, same API answer)."""
    message = str(error)
    if error.status is None:  # the CLI's client layer raises those only when no API server answered
        return Unreachable(message)
    kind: type[ApiError] = _BY_STATUS.get(error.status, ApiError)
    if error.status == 409:
        kind = AlreadyExists if error.reason == "AlreadyExists" else Conflict
    return kind(message, status=error.status, reason=error.reason, api_message=error.api_message)
