"""What the job commands share without loading the Kubernetes client (so `tj cluster …` starts fast)."""

from __future__ import annotations

from dataclasses import dataclass


class CliError(Exception):
    """A failure to report as `error: <message>` with exit code `exit_code` (1 unless said otherwise).

    When the API server answered, `status` is its HTTP status, `reason` its Status reason (NotFound, Invalid, …)
    and `api_message` its own message, untouched: the Python client (trainingjob.client) hands them to its callers,
    who branch on them where a person would read the one-line message."""

    def __init__(
        self, message: str, exit_code: int = 1, *, status: int | None = None, reason: str = "", api_message: str = ""
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status
        self.reason = reason
        self.api_message = api_message


@dataclass(frozen=True)
class Target:
    """Where the commands talk to: kubeconfig file(s), context, and the namespace asked for (None: the default)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


def job_ref(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def one_line(text: str) -> str:
    """`text` on one line: every `tj` error is one `error: ...` line, even when a library's message spans several."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())
