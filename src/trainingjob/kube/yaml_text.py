"""YAML that people write (manifests, kubeconfigs), its syntax errors said in one line: shared by the `tj` command and
the web UI, which both show a user's YAML back to them."""

from __future__ import annotations

import yaml


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML parser's failure in one line with its position ("line 7, column 8: expected ',' or ']', but got
    ':' (while parsing a flow sequence from line 6, column 12)"), instead of PyYAML's multi-line excerpt."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem is None:
        return " ".join(str(error).split())
    text = error.problem
    if error.problem_mark is not None:
        text = f"line {error.problem_mark.line + 1}, column {error.problem_mark.column + 1}: {text}"
    if error.context:
        text += f" ({error.context}"
        if error.context_mark is not None:
            text += f" from line {error.context_mark.line + 1}, column {error.context_mark.column + 1}"
        text += ")"
    return " ".join(text.split())
