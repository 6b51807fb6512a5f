"""The kubelet's AtomicWriter: a volume's files replaced all at once, so a reader never sees half an update.

Layout, as on a real node: the files live in a hidden timestamped directory `..2024_01_01_00_00_00.123456789`,
`..data` is a symlink to it, and each visible top-level entry is a symlink through `..data`. An update writes a
new directory and swaps `..data` with one rename. Used for configMap, secret, downwardAPI and projected volumes
(the projected service-account token is rewritten this way when it is refreshed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

DATA_LINK = "..data"

Payload = dict[str, tuple[bytes, int]]  # relative path -> (content, file mode)


class PayloadError(ValueError):
    """A path in the payload that would escape the volume."""


def _validate(relative: str) -> None:
    parts = relative.split("/")
    if relative.startswith("/") or ".." in parts or not relative or any(p.startswith("..") for p in parts):
        raise PayloadError(f"invalid path in volume: {relative!r}")


def _current(directory: Path) -> Payload | None:
    link = directory / DATA_LINK
    if not link.is_symlink():
        return None
    base = directory / os.readlink(link)
    found: Payload = {}
    for root, _, files in os.walk(base):
        for name in files:
            path = Path(root) / name
            found[str(path.relative_to(base))] = (path.read_bytes(), path.stat().st_mode & 0o7777)
    return found


def write_payload(directory: Path, payload: Payload, group: int | None = None) -> bool:
    """Make the volume hold exactly `payload`; False when it already did. `group` (fsGroup) owns the files and may
    read them, as the kubelet's SetVolumeOwnership makes it for these read-only volumes (mode | 0440)."""
    for relative in payload:
        _validate(relative)
    if group is not None:
        payload = {path: (content, mode | 0o440) for path, (content, mode) in payload.items()}
    directory.mkdir(parents=True, exist_ok=True)
    if _current(directory) == payload:
        return False
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime()) + f".{time.time_ns() % 10**9:09d}"
    fresh = directory / f"..{stamp}"
    fresh.mkdir(mode=0o755)
    for relative, (content, mode) in payload.items():
        target = fresh / relative
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        target.write_bytes(content)
        target.chmod(mode)
        if group is not None:
            os.chown(target, -1, group)
    if group is not None:
        os.chown(fresh, -1, group)
    previous = os.readlink(directory / DATA_LINK) if (directory / DATA_LINK).is_symlink() else None
    temporary = directory / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    os.symlink(fresh.name, temporary)
    os.replace(temporary, directory / DATA_LINK)
    visible = {relative.split("/")[0] for relative in payload}
    for name in visible:
        link = directory / name
        if not link.is_symlink():
            os.symlink(f"{DATA_LINK}/{name}", link)
    for entry in directory.iterdir():
        if not entry.name.startswith("..") and entry.name not in visible and entry.is_symlink():
            entry.unlink()
    if previous and previous != fresh.name:
        shutil.rmtree(directory / previous, ignore_errors=True)
    return True
