"""The GPU check's second half (scripts/gpu-check.sh): the PyTorch and JAX examples with the operator's environment
for one worker over NCCL, on a machine with an NVIDIA GPU and no control plane.

The environment is what the operator gives worker 0 of the examples' GPU manifests reduced to one worker with one
GPU (builders/env.py worker_env with the framework modules' own contracts, DISTRIBUTED_BACKEND=nccl), with what a
pod would resolve through the cluster replaced by local values: the rendezvous address is 127.0.0.1, the
hyperparameters file and CHECKPOINT_DIR are temporary, and the GPU is the one the node's allocator assigns (its
NVIDIA_VISIBLE_DEVICES/CUDA_VISIBLE_DEVICES). Steps, each printed with what it saw:
1. PyTorch under torchrun trains 6 epochs, checkpointing every epoch; seconds per epoch are printed.
2. The same run again from scratch, SIGKILLed (the whole process tree: torchrun's workers run in sessions of their
   own) while it saves its third checkpoint; the directory must then hold complete checkpoints and at most
   dot-named temporaries.
3. A restarted attempt (RESUME_FROM_CHECKPOINT=true) resumes at the epoch after the newest complete checkpoint
   and finishes.
4. The JAX example runs one process on the GPU.
`TORCH_PYTHON` and `JAX_PYTHON` name interpreters that have torch and jax[cuda] (default: this one).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from trainingjob.api.types import TrainingJob  # noqa: E402
from trainingjob.builders.env import worker_env  # noqa: E402
from trainingjob.node.devices.advertise import device_env  # noqa: E402
from trainingjob.node.devices.allocator import DeviceAllocator  # noqa: E402
from trainingjob.node.devices.gpus import nvml_inventory  # noqa: E402
from trainingjob.node.devices.nvml import NvmlUnavailable  # noqa: E402

EPOCHS = 6


def say(step: str, detail: object = "") -> None:
    print(f"[gpu-check] {step}" + (f": {detail}" if detail != "" else ""), flush=True)


def one_worker_job(manifest: Path, hyperparameters: dict[str, Any]) -> TrainingJob:
    body = yaml.safe_load(manifest.read_text())
    body["metadata"].update(namespace="gpu-check", uid="gpu-check")
    spec = body["spec"]
    spec.update(workers=1, gpuPerWorker=1)
    spec["hyperparameters"] = {**spec.get("hyperparameters", {}), **hyperparameters}
    return TrainingJob.from_body(body)


def operator_env(job: TrainingJob, attempt: int, scratch: Path, gpu_env: dict[str, str]) -> dict[str, str]:
    """Worker 0's variables as the operator sets them, with the cluster's names replaced by local values."""
    env = {e["name"]: e["value"] for e in worker_env(job, 0, attempt) if "value" in e}
    for name, value in list(env.items()):
        if name.endswith(("MASTER_ADDR", "COORDINATOR_ADDRESS")):
            env[name] = re.sub(r"^[^:]+", "127.0.0.1", value)
    hyperparameters = scratch / "hyperparameters.json"
    hyperparameters.write_text(json.dumps(job.spec.hyperparameters))
    env.update(TRAININGJOB_HYPERPARAMETERS_FILE=str(hyperparameters), CHECKPOINT_DIR=str(scratch / "checkpoints"))
    env.update(CHECKPOINT_INTERVAL="1")
    (scratch / "checkpoints").mkdir(exist_ok=True)
    return {**os.environ, "PYTHONPATH": str(REPO / "src"), **env, **gpu_env}


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    say("running", " ".join(argv))
    with log.open("w") as output:
        return subprocess.Popen(argv, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)


def descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            queue += children
    return found


def kill_tree(process: subprocess.Popen) -> None:
    """torchrun's workers run in POSIX sessions of their own: a signal to its group misses them."""
    for pid in [process.pid, *descendants(process.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def epoch_seconds(log: str) -> list[float]:
    """Seconds between the example's epoch lines (its log format: asctime with milliseconds)."""
    stamps = re.findall(r"^(\S+ \S+) INFO train_ddp: epoch \d+/\d+", log, re.MULTILINE)
    times = [datetime.datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f").timestamp() for s in stamps]
    return [round(b - a, 3) for a, b in itertools.pairwise(times)]


NCCL_SCRIPT = """
import os, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="env://")
value = torch.ones(1, device="cuda")
dist.all_reduce(value)
print("nccl all_reduce over", dist.get_world_size(), "rank(s) on", torch.cuda.get_device_name(), "=", value.item())
dist.destroy_process_group()
"""


def nccl(torch_python: str, job: TrainingJob, gpu_env: dict[str, str], scratch: Path) -> bool:
    """The example trains one rank without a process group; this proves NCCL itself under the same env."""
    run = scratch / "nccl"
    run.mkdir()
    script = run / "nccl_check.py"
    script.write_text(NCCL_SCRIPT)
    log = run / "nccl.log"
    code = start([torch_python, "-m", "torch.distributed.run", str(script)], operator_env(job, 0, run, gpu_env), log)
    code = code.wait()
    line = next((x for x in log.read_text().splitlines() if "nccl all_reduce" in x), "no result line")
    say("nccl", f"exit code {code}; {line}")
    return code == 0 and line.endswith("= 1.0")


def pytorch(torch_python: str, gpu_env: dict[str, str], scratch: Path) -> bool:
    manifest = REPO / "examples" / "pytorch" / "trainingjob-gpu.yaml"
    job = one_worker_job(manifest, {"epochs": EPOCHS})
    argv = [torch_python, "-m", "torch.distributed.run", str(REPO / "examples" / "pytorch" / "train_ddp.py")]
    full = scratch / "full"
    full.mkdir()
    env = operator_env(job, 0, full, gpu_env)
    say("operator env", {k: v for k, v in env.items() if k.startswith(("PET_", "MASTER", "WORLD", "RANK", "DIST"))})
    log = full / "train.log"
    code = start(argv, env, log).wait()
    text = log.read_text()
    say("full run exit code", code)
    say("device line", next((line for line in text.splitlines() if "backend" in line and "device" in line), "none"))
    say("seconds between epochs", epoch_seconds(text))
    ok = code == 0 and "device cuda:0" in text
    return nccl(torch_python, job, gpu_env, scratch) and ok and kill_and_resume(job, argv, gpu_env, scratch)


def kill_and_resume(job: TrainingJob, argv: list[str], gpu_env: dict[str, str], scratch: Path) -> bool:
    run = scratch / "killed"
    run.mkdir()
    env = operator_env(job, 0, run, gpu_env)
    checkpoints = run / "checkpoints"
    process = start(argv, env, run / "attempt-0.log")
    deadline, moment = time.monotonic() + 600, "never"
    while process.poll() is None and time.monotonic() < deadline:
        names = [p.name for p in checkpoints.iterdir()]
        if any(n.startswith(".ckpt-00000003") for n in names):
            moment = "while ckpt-3 was being written"
            break
        if "ckpt-00000003.pt" in names:
            moment = "just after ckpt-3 was written (the save was too quick to catch)"
            break
        time.sleep(0.002)
    kill_tree(process)
    say("SIGKILL", moment)
    left = sorted(p.name for p in checkpoints.iterdir())
    say("checkpoint directory after the kill", left)
    complete = [n for n in left if re.fullmatch(r"ckpt-\d{8}\.pt", n)]
    if any(not n.startswith(".") and n not in complete for n in left) or not complete:
        return False
    resumed = operator_env(job, 1, run, gpu_env)
    code = start(argv, resumed, run / "attempt-1.log").wait()
    text = (run / "attempt-1.log").read_text()
    line = next((x for x in text.splitlines() if "resuming from" in x), "no resume line")
    say("resumed attempt exit code", code)
    say("resume", line)
    expected = f"at epoch {int(complete[-1][5:13]) + 1}"
    return code == 0 and expected in line


def jax(jax_python: str, gpu_env: dict[str, str], scratch: Path) -> bool:
    job = one_worker_job(REPO / "examples" / "jax" / "trainingjob-gpu.yaml", {"epochs": 5})
    run = scratch / "jax"
    run.mkdir()
    env = operator_env(job, 0, run, gpu_env)
    log = run / "train.log"
    code = start([jax_python, str(REPO / "examples" / "jax" / "train_jax.py")], env, log).wait()
    text = log.read_text()
    say("jax exit code", code)
    devices = next((line for line in text.splitlines() if "local devices" in line), "no device line")
    say("jax devices", devices)
    return code == 0 and "gpu" in devices.lower()


def main() -> int:
    try:
        inventory = nvml_inventory()
    except NvmlUnavailable as error:
        say("no NVML", error)
        return 1
    if not inventory.count:
        say("no GPU: nothing to run")
        return 1
    scratch = Path(tempfile.mkdtemp(prefix="tj-gpu-examples-"))
    allocator = DeviceAllocator(inventory, scratch / "devices")
    trainer = {"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    allocator.admit({"metadata": {"uid": "check"}, "spec": {"containers": [trainer]}})
    gpu_env = device_env(allocator.devices_of("check", "trainer"), {})
    say("assigned", gpu_env)
    results = {}
    torch_python = os.environ.get("TORCH_PYTHON", sys.executable)
    jax_python = os.environ.get("JAX_PYTHON", sys.executable)
    results["pytorch (train, SIGKILL while saving, resume)"] = pytorch(torch_python, gpu_env, scratch)
    results["jax"] = jax(jax_python, gpu_env, scratch)
    for name, ok in results.items():
        say(name, "ok" if ok else "FAILED")
    say("logs", scratch)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
