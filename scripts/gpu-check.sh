#!/usr/bin/env bash
# The GPU check, for a machine with NVIDIA GPUs, the driver, PyTorch and JAX (CUDA builds) and nvidia-ml-py, and
# no control plane: only this repository is needed. It runs
#   1. the local node's GPU path on its own: NVML discovery, what the Node would advertise, exclusive assignment at
#      admission and release, the DCGM-style exposition, and (as root) a container started through the node's own
#      shim that must see only its assigned device (python -m trainingjob.node.devices.check);
#   2. the PyTorch example under torchrun with the operator's environment for one worker over NCCL, a SIGKILL while
#      it saves and the resumed attempt, and the JAX example on the GPU (scripts/gpu_check_examples.py).
# It prints what it saw and exits non-zero if a step did not hold. CI never has a GPU; docs/local-cluster.md says
# what is real on a GPU machine and what is fake without one.
#
#   scripts/gpu-check.sh                      # with python3 (or $PYTHON) having torch, jax and nvidia-ml-py
#   TORCH_PYTHON=/opt/torch/bin/python JAX_PYTHON=/opt/jax/bin/python scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi -L 2>/dev/null | sed 's/^/[gpu-check] nvidia-smi: /' || echo "[gpu-check] nvidia-smi: not found"
status=0
echo "[gpu-check] --- the node's GPU path (discovery, assignment, telemetry, container) ---"
"$PYTHON" -m trainingjob.node.devices.check || status=1
echo "[gpu-check] --- the examples with the operator's environment for one worker ---"
"$PYTHON" scripts/gpu_check_examples.py || status=1
echo "[gpu-check] $([ $status -eq 0 ] && echo 'every step held' || echo 'some step FAILED (above)')"
exit $status
