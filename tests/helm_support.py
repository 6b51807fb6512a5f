"""The pinned helm (tools/helm, built by `make tools`) and the object-by-object comparison of the chart with
deploy/'s kustomizations."""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.prerequisites import missing_prerequisite
from trainingjob.cluster.build import HELM, binary_path, is_built, pinned_versions
from trainingjob.cluster.paths import binaries_dir

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "trainingjob-operator"
RELEASE, NAMESPACE = "trainingjob-operator", "trainingjob-system"
# Helm's standard labels (charts/trainingjob-operator/templates/_helpers.tpl) that deploy/ has no use for.
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
}
HELM_HINT = "helm is not built; build it once with: tj cluster build --with-helm (or make tools)"

Key = tuple[str, str, str, str]


def helm_binary() -> Path:
    """The pinned helm (`make tools` builds it)."""
    if not is_built(HELM):
        missing_prerequisite(HELM_HINT)
    return binaries_dir(HELM.name, HELM.version) / "helm"


def kubectl_binary() -> Path:
    path = binary_path("kubectl")
    if not path.is_file():
        missing_prerequisite("kubectl is not built: tj cluster build")
    return path


def run(command: list[str | Path], home: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm or kubectl with helm's cache and config in `home` (never the user's)."""
    env = {**os.environ, "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config")}
    env["HELM_DATA_HOME"] = str(home / "data")
    result = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=180, check=False, env=env, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stderr}")
    return result


def helm_template(home: Path, *values: str, tests: bool = False) -> str:
    """The chart rendered as for the Kubernetes version the local cluster runs; `helm test`'s pod only with
    `tests` (deploy/ has no counterpart to compare it with)."""
    kube_version = pinned_versions()["kubernetes"]
    command = [helm_binary(), "template", RELEASE, CHART, "--namespace", NAMESPACE, "--include-crds"]
    command += [] if tests else ["--skip-tests"]
    command += ["--kube-version", kube_version, *values]
    return run(command, home).stdout


def kustomize(home: Path, directory: str) -> str:
    return run([kubectl_binary(), "kustomize", REPO / directory], home).stdout


def normalised(document: dict[str, Any]) -> dict[str, Any]:
    """The object without Helm's own labels (the one difference the chart adds on purpose)."""
    metadata = dict(document.get("metadata") or {})
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in HELM_LABELS}
    metadata.pop("labels", None)
    if labels:
        metadata["labels"] = labels
    return {**document, "metadata": metadata}


def objects(text: str) -> dict[Key, dict[str, Any]]:
    result: dict[Key, dict[str, Any]] = {}
    for document in yaml.safe_load_all(text):
        if not document:
            continue
        metadata = document.get("metadata") or {}
        key = (document["apiVersion"], document["kind"], metadata.get("namespace", ""), metadata["name"])
        assert key not in result, f"{key} rendered twice"
        result[key] = normalised(document)
    return result


def differences(chart: dict[Key, dict[str, Any]], kustomized: dict[Key, dict[str, Any]]) -> list[str]:
    """Human-readable differences: objects only one side has, then a YAML diff per object that differs."""
    problems = [f"only in deploy/ (add it to the chart): {key}" for key in sorted(set(kustomized) - set(chart))]
    problems += [f"only in the chart: {key}" for key in sorted(set(chart) - set(kustomized))]
    for key in sorted(set(chart) & set(kustomized)):
        if chart[key] != kustomized[key]:
            left = yaml.safe_dump(kustomized[key], sort_keys=True).splitlines()
            right = yaml.safe_dump(chart[key], sort_keys=True).splitlines()
            diff = "\n".join(difflib.unified_diff(left, right, "deploy/", "chart", lineterm="", n=2))
            problems.append(f"{key} differs:\n{diff}")
    return problems
