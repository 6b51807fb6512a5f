"""Whether the files a kubeconfig path list names are kubeconfigs at all, said in one line.

The client library's loader assumes its input is a kubeconfig: handed any other YAML (a README, /etc/passwd, a
list) it fails deep inside with `'str' object does not support item assignment`, and a YAML syntax error comes out
as PyYAML's multi-line excerpt. Checking the shape first lets `tj` name the file and what is wrong with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from trainingjob.cli.common import CliError
from trainingjob.kube.yaml_text import yaml_problem

NAMED_LISTS = ("clusters", "contexts", "users")
TOP_LEVEL_KEYS = (*NAMED_LISTS, "current-context", "kind", "apiVersion", "preferences")


def kubeconfig_problem(document: Any) -> str | None:
    """What keeps a parsed YAML document from being a kubeconfig, or None when its shape is one."""
    if document is None:
        return "the file is empty"
    if not isinstance(document, Mapping):
        return f"not a kubeconfig (its YAML is a {type(document).__name__}, not a mapping of clusters, contexts, users)"
    if not any(key in document for key in TOP_LEVEL_KEYS):
        return "not a kubeconfig (no clusters, contexts, users or current-context in it)"
    for key in NAMED_LISTS:
        entries = document.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            return f"{key} is a {type(entries).__name__}, not a list"
        for number, entry in enumerate(entries, 1):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                return f"entry {number} of {key} has no name"
    return None


def check_kubeconfig_files(paths: str) -> None:
    """Raise a one-line CliError for the first existing file of `paths` (os.pathsep-separated, like KUBECONFIG)
    that is not a kubeconfig; missing files are skipped, as the loader skips them."""
    for path in (p for p in paths.split(os.pathsep) if p):
        file = Path(path).expanduser()
        if not file.is_file():
            continue
        try:
            problem = kubeconfig_problem(yaml.safe_load(file.read_text()))
        except yaml.YAMLError as error:
            problem = f"not valid YAML: {yaml_problem(error)}"
        except (OSError, UnicodeDecodeError) as error:
            problem = f"cannot read it: {getattr(error, 'strerror', None) or error}"
        if problem:
            raise CliError(f"cannot use kubeconfig {path}: {problem}")
