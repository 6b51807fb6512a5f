"""Build Kueue's manager from its pinned module, with its install manifests rendered from the same module.

Why right after the control plane and under the same lock: tools/kueue/go.mod pins every module Kueue shares with
tools/kubernetes to that wrapper's versions (tools/kueue/gen-go-mod.sh), so Go's build cache already holds the
compiled Kubernetes libraries and Kueue compiles only what is its own.
Why the manifests are rendered here: Kueue's install (CRDs, RBAC, webhook configurations, the visibility
APIService) is the kustomization config/default of its module; `kubectl kustomize` (the kubectl we build) assembles
it exactly as Kueue's release does, into the versioned cache beside the binary. So `tj cluster up --with-kueue`
installs the version it runs, needs no Go at run time, and nothing of Kueue is committed here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from trainingjob.cluster.build import COMPONENT_SETS, KUEUE, build_component_set, build_lock, is_built, module_dir
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.paths import binaries_dir

MANIFESTS = "kueue-manifests.yaml"
KUSTOMIZE_TIMEOUT = 300


def render_manifests(kubectl: Path, target: Path) -> None:
    """`kubectl kustomize config/default` of the pinned module into `target`/kueue-manifests.yaml."""
    source = module_dir(KUEUE) / "config" / "default"
    try:
        result = subprocess.run(
            [str(kubectl), "kustomize", str(source)],
            capture_output=True,
            text=True,
            timeout=KUSTOMIZE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ClusterError(f"rendering Kueue's manifests from {source} took over {KUSTOMIZE_TIMEOUT}s") from error
    if result.returncode != 0:
        raise ClusterError(f"rendering Kueue's manifests from {source} failed: {result.stderr.strip()}")
    (target / MANIFESTS).write_text(result.stdout)


def ensure_kueue(say: Callable[[str], None] = print) -> Path:
    """Return Kueue's directory (the binary `kueue` and kueue-manifests.yaml), building it first if missing: the
    control plane before it (for kubectl, and so its compiled libraries are cached), under the build lock. Like
    ensure_built, a built Kueue never waits for the lock."""
    if not is_built(KUEUE):
        with build_lock():
            built = {s.name: build_component_set(s, say) for s in COMPONENT_SETS}
            kubectl = built["kubernetes"] / "kubectl"
            build_component_set(KUEUE, say, also=lambda staging: render_manifests(kubectl, staging))
    return kueue_dir()


def kueue_dir() -> Path:
    return binaries_dir(KUEUE.name, KUEUE.version)
