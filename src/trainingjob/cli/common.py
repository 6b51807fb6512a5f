"""What the job commands share without loading the Kubernetes client (so `tj cluster …` starts fast)."""

from __future__ import annotations

from dataclasses import dataclass

import yaml


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


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML parser's failure in one line with its position ("line 7, column 8: expected ',' or ']', but got
    ':' (while parsing a flow sequence from line 6, column 12)"), instead of PyYAML's multi-line excerpt."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem is None:
        return one_line(str(error))
    text = error.problem
    if error.problem_mark is not None:
        text = f"line {error.problem_mark.line + 1}, column {error.problem_mark.column + 1}: {text}"
    if error.context:
        text += f" ({error.context}"
        if error.context_mark is not None:
            text += f" from line {error.context_mark.line + 1}, column {error.context_mark.column + 1}"
        text += ")"
    return one_line(text)
