"""GPUs on the local node without a GPU: NVML's call shapes (a stand-in with the real binding's signatures, and the
real binding checked to have every function used), fake devices, exclusive assignment with its checkpoint, what a
container and the Node get, and the DCGM-style exposition."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from trainingjob.node.api.registration import NodeDevices, label_patch, resources_of
from trainingjob.node.devices import nvml
from trainingjob.node.devices.advertise import device_env, device_mounts, gpu_capacity, gpu_labels
from trainingjob.node.devices.allocator import AdmissionError, DeviceAllocator, gpus_requested
from trainingjob.node.devices.gpus import GpuModeError, discover, fake_inventory, fake_uuid, parse_mode
from trainingjob.node.devices.telemetry import DeviceSample, Owner, exposition

CALLED = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetUtilizationRates",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
)


def test_the_real_binding_has_every_nvml_call_the_node_makes_with_these_arities() -> None:
    for name in CALLED:
        function = getattr(pynvml, name)
        parameters = [p for p in inspect.signature(function).parameters.values() if p.default is p.empty]
        expected = 1 if name.startswith("nvmlDevice") and name != "nvmlDeviceGetCount" else 0
        assert len(parameters) == expected, (name, parameters)
    assert issubclass(pynvml.NVMLError, Exception)


def test_auto_mode_offers_exactly_the_devices_the_real_nvml_sees(tmp_path: Path) -> None:
    """Here (no driver) NVML fails to initialise and the node offers no GPUs; on a GPU machine, all of them."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        expected = 0
    else:
        expected = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
    assert discover("auto", tmp_path, "n").count == expected


@dataclass
class FakeNvml:
    """NVML's functions as nvidia-ml-py exposes them (bytes from older bindings, str from newer ones)."""

    NVMLError = pynvml.NVMLError
    calls: list[str]

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return 100 + index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-{handle}"

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return handle - 100

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=f"00000000:{handle - 40:02X}:00.0")

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(total=143771 * 2**20, used=(handle - 99) * 1024 * 2**20, free=1000 * 2**20)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=87 if handle == 100 else 0, memory=30)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "560.35.03"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12060


def test_read_system_turns_nvml_answers_into_devices_and_shuts_nvml_down() -> None:
    calls: list[str] = []
    system = nvml.read_system(FakeNvml(calls))
    assert calls == ["init", "shutdown"]
    assert system.driver_version == "560.35.03" and system.cuda_version == (12, 6)
    assert system.devices[1] == nvml.NvmlDevice(1, "GPU-101", "NVIDIA H200", 1, "0000:3d:00.0", 143771)


def test_the_sampler_reads_utilisation_and_memory_by_uuid() -> None:
    sampler = nvml.NvmlSampler(FakeNvml([]))
    assert sampler.sample("GPU-100") == (87.0, 1024, 1000)
    assert sampler.sample("GPU-101") == (0.0, 2048, 1000)
    assert sampler.sample("GPU-999") is None


@pytest.mark.parametrize(("mode", "parsed"), [("auto", ("auto", 0)), ("none", ("none", 0)), ("fake:2", ("fake", 2))])
def test_gpu_modes(mode: str, parsed: tuple[str, int]) -> None:
    assert parse_mode(mode) == parsed


@pytest.mark.parametrize("mode", ["fake", "fake:0", "fake:x", "real", "fake:65"])
def test_bad_gpu_modes_are_refused(mode: str) -> None:
    with pytest.raises(GpuModeError):
        parse_mode(mode)


def test_fake_devices_are_labelled_fake_and_stable_per_node(tmp_path: Path) -> None:
    inventory = fake_inventory(2, tmp_path, "tj-local-0")
    assert inventory.fake and inventory.product == "TrainingJob-Fake-GPU"
    assert [d.uuid for d in inventory.devices] == [fake_uuid("tj-local-0", 0), fake_uuid("tj-local-0", 1)]
    assert fake_uuid("tj-local-0", 0) != fake_uuid("tj-local-1", 0)
    assert "not a device" in Path(inventory.devices[0].device_node).read_text()
    assert gpu_capacity(inventory) == {"nvidia.com/gpu": "2"}
    labels = gpu_labels(inventory)
    assert labels["nvidia.com/gpu.product"] == "TrainingJob-Fake-GPU" and labels["ml.example.com/fake-gpus"] == "true"


def pod(uid: str, *gpus: int, init: int = 0) -> dict:
    containers = [{"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": str(n)}}} for i, n in enumerate(gpus)]
    spec: dict = {"containers": containers}
    if init:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": {"nvidia.com/gpu": init}}}]
    return {"metadata": {"uid": uid}, "spec": spec}


def test_devices_are_exclusive_per_container_and_come_back_when_the_pod_ends(tmp_path: Path) -> None:
    allocator = DeviceAllocator(fake_inventory(3, tmp_path / "fake", "n"), tmp_path / "devices")
    allocator.admit(pod("a", 1, 1))
    first, second = allocator.devices_of("a", "c0"), allocator.devices_of("a", "c1")
    assert len(first) == len(second) == 1 and first != second
    allocator.admit(pod("a", 1, 1))  # admitted again (a resync): the same devices
    assert allocator.devices_of("a", "c0") == first
    with pytest.raises(AdmissionError, match="Requested: 2, Available: 1"):
        allocator.admit(pod("b", 2))
    assert allocator.devices_of("b", "c0") == []  # all or nothing
    allocator.release_pod("a")
    allocator.admit(pod("b", 2))
    assert len(allocator.devices_of("b", "c0")) == 2


def test_assignments_survive_a_restart_and_pods_the_api_forgot_are_dropped(tmp_path: Path) -> None:
    inventory = fake_inventory(2, tmp_path / "fake", "n")
    allocator = DeviceAllocator(inventory, tmp_path / "devices")
    allocator.admit(pod("a", 1))
    allocator.admit(pod("b", 1))
    restarted = DeviceAllocator(inventory, tmp_path / "devices")
    assert restarted.devices_of("a", "c0") == allocator.devices_of("a", "c0")
    restarted.keep_only(["b"])
    assert restarted.devices_of("a", "c0") == [] and len(restarted.free()) == 1


def test_init_containers_ask_for_gpus_too() -> None:
    assert gpus_requested(pod("a", init=2)["spec"]["initContainers"][0]) == 2
    assert gpus_requested({"name": "x"}) == 0


def test_a_container_gets_its_devices_variables_and_nodes(tmp_path: Path) -> None:
    inventory = fake_inventory(2, tmp_path, "n")
    device = inventory.devices[1]
    assert device_env([device], {}) == {"NVIDIA_VISIBLE_DEVICES": device.uuid, "CUDA_VISIBLE_DEVICES": device.uuid}
    assert device_env([device], {"CUDA_VISIBLE_DEVICES": "0"}) == {"NVIDIA_VISIBLE_DEVICES": device.uuid}
    assert device_env([], {}) == {}
    mounts = device_mounts([device], inventory, proc_exists=False)
    assert [(m.target, m.source) for m in mounts] == [
        ("/dev/nvidia1", device.device_node),
        ("/dev/nvidiactl", str(tmp_path / "nvidiactl")),
    ]


def test_node_labels_and_resources_follow_the_devices_when_they_change(tmp_path: Path) -> None:
    node = {
        "metadata": {"labels": {"nvidia.com/gpu.count": "4", "ml.example.com/fake-gpus": "true", "team": "a"}},
        "status": {"capacity": {"cpu": "2", "nvidia.com/gpu": "4"}},
    }
    nothing = NodeDevices()
    assert label_patch(node, nothing) == {"nvidia.com/gpu.count": None, "ml.example.com/fake-gpus": None}
    assert resources_of(node, nothing) == {"nvidia.com/gpu": "0"}
    inventory = fake_inventory(2, tmp_path, "n")
    two = NodeDevices(gpu_capacity(inventory), gpu_labels(inventory))
    assert label_patch(node, two)["nvidia.com/gpu.count"] == "2"
    assert "ml.example.com/fake-gpus" not in label_patch(node, two)  # already right
    assert resources_of(node, two) == {"nvidia.com/gpu": "2"}


def test_exposition_reads_like_dcgm_exporter(tmp_path: Path) -> None:
    inventory = fake_inventory(2, tmp_path, "tj-local-0")
    samples = [
        DeviceSample(inventory.devices[0], 87.5, 1200, 15184, Owner("team-a", "mnist-worker-0", "trainer")),
        DeviceSample(inventory.devices[1], 0.0, 0, 16384),
    ]
    text = exposition(samples, inventory, "tj-local-0")
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
    uuid = inventory.devices[0].uuid
    assert (
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{uuid}",device="nvidia0",modelName="TrainingJob-Fake-GPU",'
        'Hostname="tj-local-0",container="trainer",namespace="team-a",pod="mnist-worker-0"} 87.5'
    ) in text.splitlines()
    assert f'DCGM_FI_DEV_FB_USED{{gpu="1",UUID="{inventory.devices[1].uuid}"' in text
    assert text.count("DCGM_FI_DEV_FB_FREE{") == 2
