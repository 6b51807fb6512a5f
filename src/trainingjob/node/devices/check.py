"""`python -m trainingjob.node.devices.check`: the node's GPU path on a GPU machine, without a control plane.

Runs, on their own and printing what each step saw: discovery through NVML (devices, product, memory, driver and
CUDA versions), what the Node would advertise (capacity, GPU feature discovery labels), exclusive assignment at
admission (two containers get different devices, an over-ask is refused, a release gives them back), the
DCGM-style exposition of a sample, and — as root — a container started through the node's own shim with one
assigned device, whose private /dev and `nvidia-smi -L` must show that device only. Exit code 0 when every step
held, 1 otherwise. scripts/gpu-check.sh runs it before the examples.

`--fake N` runs the same steps on N labelled fake devices (devices/gpus.py) instead of NVML's, with zero readings:
that is how the path is exercised on a machine without a GPU (tests/unit/test_node_gpu_check.py does, as root).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from trainingjob.node.devices.advertise import device_env, device_mounts, gpu_capacity, gpu_labels
from trainingjob.node.devices.allocator import AdmissionError, DeviceAllocator
from trainingjob.node.devices.gpus import GpuInventory, fake_inventory, nvml_inventory
from trainingjob.node.devices.nvml import NvmlSampler, NvmlUnavailable, load_nvml
from trainingjob.node.devices.telemetry import DeviceSample, Owner, exposition
from trainingjob.node.runtime.containers import ContainerProcess
from trainingjob.node.runtime.launch import LaunchSpec

PROBE_SCRIPT = (
    "echo devices: $(ls /dev | grep nvidia | tr '\\n' ' '); "
    "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; "
    "echo proc: $(ls /proc/driver/nvidia/gpus 2>/dev/null | tr '\\n' ' '); "
    "nvidia-smi -L 2>&1 || echo 'nvidia-smi: not found in the container'"
)


class CheckFailed(Exception):
    """A step did not hold."""


def say(step: str, detail: object = "") -> None:
    print(f"[gpu-check] {step}" + (f": {detail}" if detail != "" else ""), flush=True)


def pod(uid: str, *gpus: int) -> dict:
    containers = [{"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": str(n)}}} for i, n in enumerate(gpus)]
    return {"metadata": {"uid": uid}, "spec": {"containers": containers}}


def check_allocation(inventory: GpuInventory, scratch: Path) -> DeviceAllocator:
    allocator = DeviceAllocator(inventory, scratch / "devices")
    wanted = (1, 1) if inventory.count >= 2 else (1,)
    allocator.admit(pod("check-a", *wanted))
    given = {name: [d.uuid for d in allocator.devices_of("check-a", name)] for name in ("c0", "c1")[: len(wanted)]}
    say("assigned at admission", given)
    ids = [i for ids in given.values() for i in ids]
    if len(set(ids)) != len(ids):
        raise CheckFailed("a device was given twice")
    try:
        allocator.admit(pod("check-b", inventory.count))
    except AdmissionError as error:
        say("an over-ask is refused", f"{error.reason}: {error}")
    else:
        raise CheckFailed("a pod asking for every device was admitted while some were taken")
    allocator.release_pod("check-a")
    say("released", f"{len(allocator.free())} of {inventory.count} free")
    if len(allocator.free()) != inventory.count:
        raise CheckFailed("released devices did not come back")
    allocator.admit(pod("check-c", 1))
    return allocator


def check_exposition(inventory: GpuInventory, allocator: DeviceAllocator) -> None:
    sampler = None if inventory.fake else NvmlSampler(load_nvml())
    try:
        samples = []
        owned = {d.uuid for d in allocator.devices_of("check-c", "c0")}
        for device in inventory.devices:
            reading = sampler.sample(device.uuid) if sampler is not None else (0.0, 0, inventory.memory_mib)
            if reading is not None:
                owner = Owner("gpu-check", "check-c", "c0") if device.uuid in owned else None
                samples.append(DeviceSample(device, *reading, owner=owner))
        print(exposition(samples, inventory, os.uname().nodename), end="", flush=True)
    finally:
        if sampler is not None:
            sampler.close()


def check_container(inventory: GpuInventory, allocator: DeviceAllocator, scratch: Path) -> bool:
    """One container through the shim with the device assigned to check-c/c0: only that device is visible."""
    devices = allocator.devices_of("check-c", "c0")
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    env.update(device_env(devices, env))
    spec = LaunchSpec(
        argv=["/bin/sh", "-c", PROBE_SCRIPT],
        env=env,
        cwd="/",
        uid=0,
        gid=0,
        groups=[],
        capabilities=[],
        no_new_privs=True,
        read_only_root=False,
        hostname="gpu-check",
        isolate=True,
        mounts=device_mounts(devices, inventory, os.path.isdir("/proc/driver/nvidia/gpus")),
    )
    attempt = scratch / "container" / "0"
    spec.root, spec.upper, spec.work = (str(attempt / name) for name in ("root", "upper", "work"))
    process = ContainerProcess(attempt)
    process.start(spec)
    deadline = time.monotonic() + 60
    while process.exited() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    record = process.exited()
    lines = [line.split(" ", 3)[-1] for line in process.log_path.read_text().splitlines()]
    say("container log", "\n  " + "\n  ".join(lines))
    say("container exit", json.dumps(record))
    minors = {d.container_path.rsplit("/", 1)[-1] for d in devices}
    seen = next((line for line in lines if line.startswith("devices:")), "").split()[1:]
    visible = {name for name in seen if name[len("nvidia") :].isdigit()}
    listed = [line for line in lines if line.startswith("GPU ")]
    ok = visible == minors and (not listed or len(listed) == len(devices))
    say("only the assigned device is visible", "yes" if ok else f"no: {visible} vs {minors}, nvidia-smi {listed}")
    return ok


def find_inventory(argv: list[str], scratch: Path) -> GpuInventory:
    if argv[:1] == ["--fake"] and len(argv) == 2 and argv[1].isdigit():
        say("FAKE devices", "labelled fake, no CUDA: this exercises the path, not a GPU")
        return fake_inventory(int(argv[1]), scratch / "fake", os.uname().nodename)
    return nvml_inventory()


def main(argv: list[str] | None = None) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="tj-gpu-check-"))
    try:
        return _check(find_inventory(sys.argv[1:] if argv is None else argv, scratch), scratch)
    except NvmlUnavailable as error:
        say("no NVML", error)
        return 1
    except (CheckFailed, AdmissionError) as error:
        say("FAILED", error)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check(inventory: GpuInventory, scratch: Path) -> int:
    say("driver", f"{inventory.driver_version}, CUDA {inventory.cuda_version}")
    say("devices", [(d.index, d.uuid, d.device_node, d.proc_dir) for d in inventory.devices])
    if not inventory.count:
        say("NVML sees no device")
        return 1
    say("capacity", gpu_capacity(inventory))
    say("labels", gpu_labels(inventory))
    allocator = check_allocation(inventory, scratch)
    check_exposition(inventory, allocator)
    if os.geteuid() != 0:
        say("container", "skipped: not root (namespaces and mounts need root)")
        return 0
    return 0 if check_container(inventory, allocator, scratch) else 1


if __name__ == "__main__":
    sys.exit(main())
