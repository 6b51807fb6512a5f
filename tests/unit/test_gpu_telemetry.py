"""The operator's GPU telemetry (no server): dcgm-exporter's text read defensively, exporters found from their
EndpointSlices, samples kept only for known workers, jobs queued only when their average moves by a step, and the
seed's gauge made at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from trainingjob.operator.gpu_telemetry import ExporterSlices, GpuTelemetry, exporter_urls, parse_utilization
from trainingjob.reconcile.observed import PodView

DCGM = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",container="trainer",namespace="team",pod="mnist-worker-0"} 90
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",container="trainer",namespace="team",pod="mnist-worker-0"} 70
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c",device="nvidia2",modelName="NVIDIA H200",Hostname="n1"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="GPU-d",namespace="team",pod="mnist-worker-1"} not-a-number
DCGM_FI_DEV_GPU_UTIL{gpu="4",UUID="GPU-e",namespace="team",pod="mnist-worker-1"} 1e9
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",namespace="team",pod="mnist-worker-0"} 1024
DCGM_FI_DEV_GPU_UTIL{gpu="5",UUID="GPU-f",exported_namespace="team",exported_pod="mnist-worker-1"} 40
"""


def test_utilization_is_read_per_pod_and_nonsense_is_skipped() -> None:
    assert parse_utilization(DCGM) == {("team", "mnist-worker-0"): [90.0, 70.0], ("team", "mnist-worker-1"): [40.0]}
    assert parse_utilization("garbage {{{\n\x00") == {}


def test_exporters_are_the_ready_addresses_on_the_metrics_port() -> None:
    body = {
        "ports": [{"name": "other", "port": 1}, {"name": "gpu-metrics", "port": 9400}],
        "endpoints": [
            {"addresses": ["10.0.0.2"], "conditions": {"ready": True}},
            {"addresses": ["10.0.0.3"], "conditions": {"ready": False}},
            {"addresses": ["fd00::4"]},
        ],
    }
    assert exporter_urls(body) == ["http://10.0.0.2:9400/metrics", "http://[fd00::4]:9400/metrics"]
    assert exporter_urls({"endpoints": [{"addresses": ["10.0.0.2"]}]}) == []


def test_the_slice_sink_follows_listings_and_events() -> None:
    sink = ExporterSlices()
    body = {"metadata": {"namespace": "gpu-operator", "name": "a"}, "ports": [{"port": 9400}]}
    body["endpoints"] = [{"addresses": ["10.0.0.2"]}]
    sink.replace({("gpu-operator", "a"): sink.file(body)})
    assert sink.all() == ["http://10.0.0.2:9400/metrics"]
    sink.apply("DELETED", body)
    assert sink.all() == []


def worker(name: str, index: int, role: str = "worker") -> PodView:
    return PodView(name=name, index=index, attempt=0, spec_hash="", phase="Running", role=role)


def telemetry(queued: list) -> GpuTelemetry:
    pods = [(("team", "mnist"), worker("mnist-worker-0", 0)), (("team", "mnist"), worker("mnist-ps-0", 0, "ps"))]
    return GpuTelemetry(ExporterSlices(), lambda: pods, queued.append, interval=30)


def test_only_known_workers_are_kept_and_jobs_are_queued_when_their_average_moves_a_step() -> None:
    queued: list = []
    gpus = telemetry(queued)
    gpus.update([DCGM])  # mnist-worker-1 is no worker the operator knows: ignored
    assert gpus.by_pod == {("team", "mnist-worker-0"): 80.0}
    assert queued == [("team", "mnist")]  # appeared
    gpus.update([DCGM.replace("} 90", "} 94")])  # average 82: within the step
    assert queued == [("team", "mnist")]
    gpus.update([DCGM.replace("} 90", "} 40")])  # average 55: moved
    assert queued == [("team", "mnist")] * 2
    gpus.update([""])  # the exporter went quiet: the value goes, the job is told
    assert queued == [("team", "mnist")] * 3 and gpus.by_pod == {}
    assert gpus.of_pods("team", ["mnist-worker-0"]) == {}


def test_the_gauge_has_the_seeds_labels_and_goes_with_the_samples() -> None:
    gpus = telemetry([])
    gpus.update([DCGM + 'DCGM_FI_DEV_GPU_UTIL{gpu="6",namespace="team",pod="mnist-ps-0"} 10\n'])
    registry = CollectorRegistry()
    registry.register(gpus.collector())
    text = generate_latest(registry).decode()
    assert 'trainingjob_gpu_utilization_percent{namespace="team",trainingjob="mnist",worker="0"} 80.0' in text
    assert 'trainingjob_gpu_utilization_percent{namespace="team",trainingjob="mnist",worker="ps-0"} 10.0' in text
    gpus.update([])
    assert "trainingjob_gpu_utilization_percent{" not in generate_latest(registry).decode()
