"""The node's GPUs, as NVIDIA's device plugin, GPU feature discovery and DCGM exporter provide them on a real node:
discovery (gpus.py, through nvml.py), exclusive assignment (allocator.py), what the Node and a container get
(advertise.py), telemetry and its exporter (telemetry.py, exporter.py), and the GPU check (check.py). Real through
NVML on a GPU machine; a labelled fake mode on machines without one (docs/local-cluster.md)."""
