"""Code shipped to the workers without building an image: a function's source or a script, its arguments, the
launcher (client/launch.py) and the SDK as a zip, in one ConfigMap that every worker mounts (pure).

Why a ConfigMap: both a real kubelet and the local process node mount one as files, any image with a Python can
run them, and it goes away with the job (the client makes the job its owner). It is created immutable, so kubelets
do not watch it, and refused beyond MAX_CODE_BYTES (the API server stores at most 1 MiB per object). The local
backend writes the same files into a directory and runs the same launcher, so both paths start code alike.
"""

from __future__ import annotations

import base64
import functools
import inspect
import io
import json
import re
import textwrap
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainingjob import sdk
from trainingjob.client import launch
from trainingjob.client.errors import CodeTooLarge, UnsupportedCode

CODE_MOUNT_PATH = "/opt/trainingjob/code"
CODE_VOLUME = "code"
FUNCTION_FILE = "training_function.py"
LAUNCH_FILE = "launch.py"
DEFAULT_LAUNCHER = ("python3",)
# What the files may take in their ConfigMap: under the API server's 1 MiB per object, leaving room for metadata.
MAX_CODE_BYTES = 1_000_000
CONFIG_MAP_KEY = re.compile(r"[^-._a-zA-Z0-9]")
LABEL_CODE_FOR = "ml.example.com/code-for"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same SDK gives the same bytes


@dataclass(frozen=True)
class CodePackage:
    """The files of one job's code and how to start it: `launcher` words, then the launcher script's path."""

    files: Mapping[str, str]
    binary: Mapping[str, bytes] = field(default_factory=dict)
    launcher: tuple[str, ...] = DEFAULT_LAUNCHER
    description: str = ""

    @property
    def size(self) -> int:
        """Bytes the ConfigMap's data takes (binaryData as the base64 the API server stores)."""
        text = sum(len(value.encode()) for value in self.files.values())
        return text + sum(4 * ((len(value) + 2) // 3) for value in self.binary.values())

    def command(self, directory: str = CODE_MOUNT_PATH) -> list[str]:
        return [*self.launcher, f"{directory}/{LAUNCH_FILE}"]

    def config_map(self, name: str, job_name: str) -> dict[str, Any]:
        """The ConfigMap `name` holding the files, labelled with the job it belongs to; immutable."""
        if self.size > MAX_CODE_BYTES:
            raise CodeTooLarge(
                f"{self.description or 'the code'} with the SDK is {self.size} bytes, more than the {MAX_CODE_BYTES} "
                "a ConfigMap can carry: ship a smaller file, or build an image with the code and submit a manifest"
            )
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {LABEL_CODE_FOR: job_name}},
            "immutable": True,
            "data": dict(self.files),
            "binaryData": {key: base64.b64encode(value).decode() for key, value in self.binary.items()},
        }

    def write_to(self, directory: Path) -> None:
        """The same files in a local directory (the local backend)."""
        directory.mkdir(parents=True, exist_ok=True)
        for key, text in self.files.items():
            (directory / key).write_text(text)
        for key, data in self.binary.items():
            (directory / key).write_bytes(data)


def code_volume(config_map: str) -> dict[str, Any]:
    return {"name": CODE_VOLUME, "configMap": {"name": config_map}}


def code_mount() -> dict[str, Any]:
    return {"name": CODE_VOLUME, "mountPath": CODE_MOUNT_PATH, "readOnly": True}


def function_source(function: Callable[..., Any]) -> str:
    """The source of a plain, self-contained function, dedented; UnsupportedCode says why one cannot be shipped."""
    if not inspect.isfunction(function):
        raise UnsupportedCode(f"{function!r} is not a plain Python function: pass a function defined with def")
    if function.__name__ == "<lambda>":
        raise UnsupportedCode("a lambda cannot be shipped: define the training function with def")
    if function.__code__.co_freevars:
        names = ", ".join(function.__code__.co_freevars)
        raise UnsupportedCode(
            f"{function.__name__} uses variables of an enclosing function ({names}): define it at the top level "
            "and pass them as func_args"
        )
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as error:
        raise UnsupportedCode(f"the source of {function.__name__} is not available: {error}") from None


def json_arguments(value: Any, what: str) -> Any:
    """`value` as it will arrive: JSON, so the workers get exactly what the caller can read back."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise UnsupportedCode(f"{what} must be JSON (strings, numbers, booleans, lists, dicts): {error}") from None


def from_function(
    function: Callable[..., Any],
    kwargs: Mapping[str, Any] | None = None,
    launcher: Sequence[str] = DEFAULT_LAUNCHER,
) -> CodePackage:
    """Ship `function` (its source, which must import what it uses) to be called as function(**kwargs)."""
    source = function_source(function)
    entry = {
        "kind": "function",
        "file": FUNCTION_FILE,
        "function": function.__name__,
        "kwargs": json_arguments(dict(kwargs or {}), "func_args"),
    }
    return _package({FUNCTION_FILE: source}, entry, launcher, f"function {function.__name__}")


def from_script(path: str | Path, argv: Sequence[Any] = (), launcher: Sequence[str] = DEFAULT_LAUNCHER) -> CodePackage:
    """Ship the script at `path` to be run as `python script.py ARGV…` (sys.argv as if started so)."""
    script = Path(path)
    try:
        source = script.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise UnsupportedCode(f"cannot read script {script}: {error}") from None
    name = CONFIG_MAP_KEY.sub("_", script.name)
    if name in (LAUNCH_FILE, launch.ENTRY_FILE):
        name = f"user_{name}"
    entry = {"kind": "script", "file": name, "argv": [str(arg) for arg in json_arguments(list(argv), "args")]}
    return _package({name: source}, entry, launcher, f"script {script.name}")


def _package(files: dict[str, str], entry: dict[str, Any], launcher: Sequence[str], description: str) -> CodePackage:
    if not launcher:
        raise UnsupportedCode("launcher must name a program, e.g. ['python3'] or ['torchrun']")
    return CodePackage(
        files={
            **files,
            LAUNCH_FILE: launcher_source(),
            launch.ENTRY_FILE: json.dumps(entry, indent=2, sort_keys=True),
        },
        binary={launch.SDK_ZIP: sdk_zip()},
        launcher=tuple(launcher),
        description=description,
    )


@functools.cache
def launcher_source() -> str:
    return Path(launch.__file__).read_text()


@functools.cache
def sdk_zip() -> bytes:
    """trainingjob.sdk (standard library only) as a zip importable as `trainingjob.sdk`, with a bare package above
    it: the workers need not have trainingjob installed."""
    package = Path(sdk.__file__).parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            zipfile.ZipInfo("trainingjob/__init__.py", ZIP_TIME), '"""trainingjob, shipped: sdk only."""\n'
        )
        for source in sorted(package.glob("*.py")):
            info = zipfile.ZipInfo(f"trainingjob/sdk/{source.name}", ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, source.read_bytes())
    return buffer.getvalue()
