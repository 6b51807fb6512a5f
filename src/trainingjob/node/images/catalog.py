"""The image -> local runtime mapping (examples/images.yaml): what "pulling" an image means on a process node.

No image can be pulled here, so each image a local pod may use is described by what its Dockerfile would have
produced: pip requirement files (installed into one cached venv), the files it COPYs (bind-mounted read-only at
their image paths), WORKDIR, USER, ENV and optionally ENTRYPOINT/CMD. An image missing from the file cannot be
"pulled": the container waits with reason ErrImagePull.

Shape (relative paths are relative to `root`, itself relative to the file; default: the repository root):

    images:
      registry.example/trainingjob-examples/pytorch:0.1:
        requirements: [examples/pytorch/requirements.txt]
        files: {/app/train_ddp.py: examples/pytorch/train_ddp.py}
        workingDir: /app
        user: 1000            # or "1000:1000"; Docker's USER: a group left out is 0
        env: {PYTHONPATH: /app}
        entrypoint: []        # optional, Docker's ENTRYPOINT
        cmd: []               # optional, Docker's CMD
        systemSitePackages: true  # optional: the venv also sees the base Python's packages (an image built FROM
                                  # Debian with `apt-get install python3-mpi4py` and the like)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainingjob.paths import REPO_ROOT

DEFAULT_IMAGES_FILE = REPO_ROOT / "examples" / "images.yaml"
_KEYS = {"requirements", "files", "workingDir", "user", "env", "entrypoint", "cmd", "systemSitePackages"}


class ImageError(Exception):
    """The image cannot be run here (waiting reason ErrImagePull); the message says why."""


@dataclass(frozen=True)
class ImageSpec:
    """One image as the node runs it."""

    name: str
    requirements: tuple[Path, ...] = ()
    files: dict[str, Path] = field(default_factory=dict)
    working_dir: str | None = None
    uid: int = 0
    gid: int = 0
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    system_site_packages: bool = False

    def runtime_key(self, python_identity: str) -> str:
        """Content hash of what goes into the venv: the base Python, every requirement file's bytes, and whether it
        sees the base Python's packages.

        Two images with the same requirements share one venv; editing a requirements file builds a new one."""
        digest = hashlib.sha256(python_identity.encode())
        for path in self.requirements:
            digest.update(b"\0" + path.read_bytes())
        if self.system_site_packages:
            digest.update(b"\0--system-site-packages")
        return digest.hexdigest()[:16]


def normalize_image(name: str) -> str:
    """Docker's reference normalization: `python:3.11` == `docker.io/library/python:3.11`, no tag == `:latest`."""
    if "@" in name:
        return name
    first, _, rest = name.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        name = f"docker.io/{name}" if rest else f"docker.io/library/{name}"
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def _parse_user(value: Any, image: str) -> tuple[int, int]:
    text = str(value if value is not None else 0)
    user, _, group = text.partition(":")
    if not user.isdigit() or (group and not group.isdigit()):
        raise ImageError(f"image {image}: user must be numeric (uid or uid:gid), not {text!r}")
    return int(user), int(group or 0)


def _resolve(base: Path, relative: str) -> Path:
    path = (base / relative).resolve()
    if not path.exists():
        raise ImageError(f"{path} (from the image mapping) does not exist")
    return path


def parse_image(name: str, entry: dict[str, Any], base: Path) -> ImageSpec:
    unknown = set(entry) - _KEYS
    if unknown:
        raise ImageError(f"image {name}: unknown keys {sorted(unknown)} (allowed: {sorted(_KEYS)})")
    files = {}
    for target, source in (entry.get("files") or {}).items():
        if not str(target).startswith("/"):
            raise ImageError(f"image {name}: file target {target!r} must be an absolute path in the image")
        files[str(target)] = _resolve(base, str(source))
    uid, gid = _parse_user(entry.get("user"), name)
    return ImageSpec(
        name=name,
        requirements=tuple(_resolve(base, str(r)) for r in entry.get("requirements") or []),
        files=files,
        working_dir=entry.get("workingDir"),
        uid=uid,
        gid=gid,
        env={str(k): str(v) for k, v in (entry.get("env") or {}).items()},
        entrypoint=tuple(str(w) for w in entry.get("entrypoint") or []),
        cmd=tuple(str(w) for w in entry.get("cmd") or []),
        system_site_packages=bool(entry.get("systemSitePackages", False)),
    )


class ImageCatalog:
    """The mapping file, re-read when it changes, so edits apply to the next pod without restarting the node."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}
        self._base = REPO_ROOT

    def _load(self) -> None:
        try:
            stat = os.stat(self.path)
        except OSError as error:
            raise ImageError(f"cannot read the image mapping {self.path}: {error.strerror}") from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp:
            return
        try:
            document = yaml.safe_load(self.path.read_text()) or {}
        except yaml.YAMLError as error:
            raise ImageError(f"the image mapping {self.path} is not valid YAML: {error}") from None
        images = document.get("images") or {}
        if not isinstance(images, dict):
            raise ImageError(f"{self.path}: `images` must be a mapping of image name to runtime")
        root = document.get("root")
        self._base = (self.path.parent / root).resolve() if root else REPO_ROOT
        self._entries = {normalize_image(str(k)): dict(v or {}) for k, v in images.items()}
        self._stamp = stamp

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def lookup(self, image: str) -> ImageSpec:
        """The image's runtime description, or ImageError (ErrImagePull) naming the mapping file."""
        self._load()
        entry = self._entries.get(normalize_image(image))
        if entry is None:
            raise ImageError(
                f'image "{image}" is not in the local image mapping {self.path}: a process node cannot pull images; '
                "add it there (requirements, files, workingDir, user, env)"
            )
        return parse_image(image, entry, self._base)
