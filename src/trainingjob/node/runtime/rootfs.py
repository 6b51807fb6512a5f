"""The container's root filesystem, assembled in the container's own mount namespace (runs in the shim's child).

Layout, like an image's rootfs without an image: an overlay whose lower layer is the host's `/` (so the base Python,
libraries and tools are the host's) and whose upper layer is the container's own directory, so writes never reach
the host and vanish with the container. Then, as a runtime would: /root, /home and the node's cache are masked
(the cluster's keys live there), fresh /proc (the container's PID namespace), read-only /sys, a minimal /dev with
its own /dev/shm and devpts, a fresh /run, and the pod's mounts (volumes, the image's files, the venv, /tmp,
/etc/hosts, /etc/resolv.conf, /etc/hostname, the termination log).

Mounts are made after pivot_root, with sources reached through the old root: a target path that crosses a
symlink (Debian's /var/run -> /run) then resolves inside the container, never on the host.
"""

from __future__ import annotations

import contextlib
import os

from trainingjob.node.runtime import syscalls as sc
from trainingjob.node.runtime.launch import LaunchSpec, Mount

OLD_ROOT = "/.oldroot"
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}


def _system_mounts() -> None:
    sc.mount("proc", "/proc", "proc", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)
    try:
        sc.mount("sysfs", "/sys", "sysfs", sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC)
    except OSError:
        sc.mount(OLD_ROOT + "/sys", "/sys", None, sc.MS_BIND | sc.MS_REC)
        sc.mount(None, "/sys", None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY)
    sc.mount("tmpfs", "/dev", "tmpfs", sc.MS_NOSUID, "mode=755,size=65536k")
    for device in DEVICES:
        target = f"/dev/{device}"
        open(target, "a").close()
        sc.mount(f"{OLD_ROOT}/dev/{device}", target, None, sc.MS_BIND)
    for name, link in DEV_LINKS.items():
        os.symlink(link, f"/dev/{name}")
    os.mkdir("/dev/pts")
    with contextlib.suppress(OSError):
        sc.mount("devpts", "/dev/pts", "devpts", sc.MS_NOSUID | sc.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
        os.symlink("pts/ptmx", "/dev/ptmx")
    os.mkdir("/dev/shm")
    sc.mount("tmpfs", "/dev/shm", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC, "mode=1777,size=65536k")
    sc.mount("tmpfs", "/run", "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=755,size=65536k")


def _mount_point(target: str, directory: bool) -> None:
    if directory:
        os.makedirs(target, exist_ok=True)
        return
    os.makedirs(os.path.dirname(target) or "/", exist_ok=True)
    if not os.path.exists(target):
        open(target, "a").close()


def _apply(mount: Mount) -> None:
    if mount.kind == "tmpfs":
        _mount_point(mount.target, directory=True)
        sc.mount("tmpfs", mount.target, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, mount.options or "mode=1777")
        return
    source = OLD_ROOT + (mount.source or "")
    _mount_point(mount.target, directory=os.path.isdir(source))
    sc.mount(source, mount.target, None, sc.MS_BIND | sc.MS_REC)
    if mount.read_only:
        sc.mount(None, mount.target, None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY)


def enter_rootfs(spec: LaunchSpec) -> None:
    """Build the container's filesystem and make it `/` (in a fresh mount namespace of the calling process)."""
    assert spec.root and spec.upper and spec.work
    sc.unshare(sc.CLONE_NEWNS)
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    sc.mount("overlay", spec.root, "overlay", 0, f"lowerdir=/,upperdir={spec.upper},workdir={spec.work}")
    os.makedirs(spec.root + OLD_ROOT, exist_ok=True)
    sc.pivot_root(spec.root, spec.root + OLD_ROOT)
    os.chdir("/")
    for path in spec.hide:
        if os.path.isdir(path):
            sc.mount("tmpfs", path, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=755,size=65536k")
    _system_mounts()
    # Parents before children (a volume inside another volume's path), otherwise in the pod's order.
    for mount in sorted(spec.mounts, key=lambda m: m.target.rstrip("/").count("/")):
        _apply(mount)
    sc.umount(OLD_ROOT, sc.MNT_DETACH)
    os.rmdir(OLD_ROOT)
    if spec.read_only_root:
        sc.mount(None, "/", None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY)
