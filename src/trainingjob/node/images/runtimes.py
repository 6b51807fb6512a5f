"""Venvs that stand in for images: one per set of requirements, built once, cached by content, shared.

Why a world-readable base Python: pods run as the image's user (often uid 1000), and the venv's `python` is a
symlink to its base interpreter. The pyenv Python lives under /root (mode 0700), which a uid-1000 process cannot
even traverse, and the node hides /root from containers anyway. So venvs are created from the first Python 3 that
every user can execute (Debian's /usr/bin/python3 here; `TJ_RUNTIME_PYTHON` overrides) with `--without-pip`, and
packages are installed by the node's own pip through `pip --python` (no ensurepip needed).

Builds take a file lock per venv: two node agents (or `tj cluster runtimes build` and an agent) asking for the same
venv at once build it once; the second waits and reuses it. A build that died half-way has no `ready` marker and
is redone.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trainingjob.node.images.catalog import ImageSpec
from trainingjob.paths import cache_root

CANDIDATE_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
HIDDEN_PREFIXES = ("/root", "/home")


class RuntimeBuildError(Exception):
    """The venv could not be built; the message names the log."""


@dataclass(frozen=True)
class Runtime:
    """A built venv: its bin directory goes first on the container's PATH."""

    key: str
    venv: Path

    @property
    def bin_dir(self) -> Path:
        return self.venv / "bin"

    @property
    def image_id(self) -> str:
        return f"sha256:{self.key}"


def runtimes_dir() -> Path:
    return cache_root() / "runtimes"


def _world_usable(path: Path) -> bool:
    """Executable by anyone, through directories anyone can traverse, and not under a hidden home."""
    real = path.resolve()
    if any(str(real) == p or str(real).startswith(p + "/") for p in HIDDEN_PREFIXES):
        return False
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


def base_python() -> Path:
    """The interpreter venvs are built from (see the module docstring)."""
    configured = os.environ.get("TJ_RUNTIME_PYTHON")
    candidates = [configured] if configured else [*CANDIDATE_PYTHONS, sys._base_executable]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and _world_usable(Path(candidate)):
            return Path(candidate).resolve()
    raise RuntimeBuildError(
        f"no Python 3 that every user can run was found (tried {', '.join(c for c in candidates if c)}); "
        "install one (apt-get install python3 python3-venv) or set TJ_RUNTIME_PYTHON"
    )


@functools.lru_cache(maxsize=4)
def python_identity(python: Path) -> str:
    """Path and version of the base Python, part of every venv's key (asked once per process)."""
    version = subprocess.run(
        [str(python), "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    return f"{python} {version}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: list[str], log: Path, echo: Callable[[str], None] | None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if echo is not None:
                echo(line.rstrip("\n"))
        code = process.wait()
    if code != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise RuntimeBuildError(f"{command[0]} exited {code} while building the runtime (log: {log}):\n{tail}")


def ensure_runtime(image: ImageSpec, echo: Callable[[str], None] | None = None) -> Runtime:
    """The image's venv, building it first if no complete one exists (blocking; run it in a thread)."""
    python = base_python()
    key = image.runtime_key(python_identity(python))
    directory = runtimes_dir() / key
    runtime = Runtime(key, directory / "venv")
    if (directory / "ready").exists():
        return runtime
    with _locked(runtimes_dir() / f"{key}.lock"):
        if (directory / "ready").exists():
            return runtime
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        log = directory / "build.log"
        started = time.monotonic()
        system = ["--system-site-packages"] if image.system_site_packages else []
        _run([str(python), "-m", "venv", "--without-pip", *system, str(runtime.venv)], log, echo)
        if image.requirements:
            requirements = [arg for path in image.requirements for arg in ("-r", str(path))]
            pip = [sys.executable, "-m", "pip", "--python", str(runtime.venv / "bin" / "python"), "install"]
            _run([*pip, "--no-input", "--disable-pip-version-check", *requirements], log, echo)
        sources = "\n".join(str(p) for p in image.requirements)
        (directory / "requirements").write_text(f"{python}\n{sources}\n")
        (directory / "ready").write_text(f"{time.monotonic() - started:.1f}s\n")
    return runtime


def built_runtime(image: ImageSpec) -> Runtime | None:
    """The image's venv if it is already built (no build, no lock)."""
    python = base_python()
    key = image.runtime_key(python_identity(python))
    directory = runtimes_dir() / key
    return Runtime(key, directory / "venv") if (directory / "ready").exists() else None
