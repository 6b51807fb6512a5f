"""The launcher the Python client ships with a function or a script: it runs in the worker (or in a local-backend
process), next to the shipped files, and starts the user's code.

Standard library only, and nothing of trainingjob: it runs in whatever image the job names. The client sends this
file's own text (client/code.py), so what the unit tests run is what the workers run.

Beside it in its directory: `entry.json` (what to run and with which arguments), the user's file, and
`trainingjob-sdk.zip` (trainingjob.sdk, importable from the zip). The directory and the zip go to the *end* of
sys.path: an image that installs trainingjob keeps its own, and one that does not still gets
`from trainingjob import sdk` working.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
import types
from typing import Any

ENTRY_FILE = "entry.json"
SDK_ZIP = "trainingjob-sdk.zip"


def load_entry(directory: str) -> dict[str, Any]:
    with open(os.path.join(directory, ENTRY_FILE), encoding="utf-8") as file:
        entry = json.load(file)
    if not isinstance(entry, dict) or entry.get("kind") not in ("function", "script"):
        raise ValueError(f"{ENTRY_FILE} names neither a function nor a script")
    return entry


def extend_path(directory: str) -> None:
    """The shipped directory (the user's file may import a sibling) and the SDK zip, after everything else."""
    sys.path.append(directory)
    sdk = os.path.join(directory, SDK_ZIP)
    if os.path.isfile(sdk):
        sys.path.append(sdk)


def run_function(directory: str, entry: dict[str, Any]) -> None:
    """Import the shipped file as a module of its own name (so pickling its functions works in child processes,
    e.g. DataLoader workers) and call the function with the shipped keyword arguments."""
    path = os.path.join(directory, entry["file"])
    module_name = os.path.splitext(entry["file"])[0]
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.modules[module_name] = module
    with open(path, encoding="utf-8") as file:
        code = compile(file.read(), path, "exec")
    exec(code, module.__dict__)
    function = getattr(module, entry["function"])
    function(**(entry.get("kwargs") or {}))


def run_script(directory: str, entry: dict[str, Any]) -> None:
    path = os.path.join(directory, entry["file"])
    sys.argv = [path, *[str(arg) for arg in entry.get("argv") or []]]
    runpy.run_path(path, run_name="__main__")


def main() -> int:
    directory = os.path.dirname(os.path.abspath(__file__))
    entry = load_entry(directory)
    extend_path(directory)
    try:
        if entry["kind"] == "function":
            run_function(directory, entry)
        else:
            run_script(directory, entry)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
