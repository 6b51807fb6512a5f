"""What the job commands share without loading the Kubernetes client (so `tj cluster …` starts fast)."""

from __future__ import annotations

from dataclasses import dataclass


class CliError(Exception):
    """A failure to report as `error: <message>` with exit code `exit_code` (1 unless said otherwise)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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
