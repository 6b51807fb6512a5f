"""charts/trainingjob-operator against deploy/: `helm lint`, `helm template`, and the rendered objects compared
with `kubectl kustomize` of deploy/ and its overlays, object by object. A change to deploy/ (a new object, a new
flag) fails here until the chart follows it. These need the built helm and kubectl (`make tools`); the CRD check at
the end needs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helm_support import (
    CHART,
    NAMESPACE,
    REPO,
    differences,
    helm_binary,
    helm_template,
    kustomize,
    objects,
    run,
)
from trainingjob.api import generate
from trainingjob.api.constants import CLUSTER_RUNTIME_KIND, NAMESPACED_RUNTIME_KIND
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_llmmodel import llmmodel_crd_manifest
from trainingjob.api.schema_runtime import runtime_crd_manifest
from trainingjob.api.schema_sweep import sweep_crd_manifest

NAMESPACED = ("--set", "watchNamespaces={ml-team-a}")
MONITORING = (
    "--set",
    "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,"
    "monitoring.grafanaDashboard.enabled=true",
)


def without_namespace_object(rendered: dict) -> dict:
    """deploy/ creates trainingjob-system; the chart cannot (Helm's release record lives in it): docs/helm.md."""
    return {key: value for key, value in rendered.items() if key[1] != "Namespace"}


def in_cluster_conversion(rendered: dict) -> dict:
    """Helm installs crds/ as generated (it cannot template them), with the conversion webhook at 127.0.0.1 for the
    operator outside the cluster; the operator in the cluster points it at its Service when it starts, which is what
    deploy/base patches in (docs/helm.md)."""
    from trainingjob.api import webhook_config

    for (_, kind, _, _), document in rendered.items():
        if kind == "CustomResourceDefinition" and document["metadata"]["name"] == "trainingjobs.ml.example.com":
            assert document["spec"]["conversion"] == webhook_config.conversion()
            document["spec"]["conversion"] = webhook_config.conversion(webhook_config.service_endpoint(NAMESPACE))
    return rendered


@pytest.mark.integration
@pytest.mark.parametrize(
    ("directory", "values"),
    [("deploy", ()), ("deploy/overlays/namespaced", NAMESPACED), ("deploy/overlays/monitoring", MONITORING)],
    ids=["cluster-wide", "namespaced", "monitoring"],
)
def test_the_chart_renders_what_kustomize_renders(directory: str, values: tuple[str, ...], tmp_path: Path) -> None:
    chart = in_cluster_conversion(objects(helm_template(tmp_path, *values)))
    kustomized = without_namespace_object(objects(kustomize(tmp_path, directory)))
    assert not differences(chart, kustomized), "\n".join(differences(chart, kustomized))
    assert len(chart) >= 11  # not vacuous: CRD, RBAC, Deployment, Service, PDB at least


@pytest.mark.integration
def test_the_comparison_catches_a_chart_that_drifts(tmp_path: Path) -> None:
    chart = objects(helm_template(tmp_path, "--set", "replicas=3,podDisruptionBudget.enabled=false"))
    problems = differences(chart, without_namespace_object(objects(kustomize(tmp_path, "deploy"))))
    assert any("only in deploy/" in p and "PodDisruptionBudget" in p for p in problems)
    assert any("Deployment" in p and "replicas: 3" in p for p in problems)


@pytest.mark.integration
@pytest.mark.parametrize("values", [(), (*NAMESPACED, *MONITORING)], ids=["defaults", "namespaced-monitoring"])
def test_helm_lint_passes(values: tuple[str, ...], tmp_path: Path) -> None:
    result = run([helm_binary(), "lint", "--strict", CHART, *values], tmp_path, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.integration
def test_helm_reports_the_pinned_version(tmp_path: Path) -> None:
    from trainingjob.cluster.build import HELM

    result = run([helm_binary(), "version", "--short"], tmp_path)
    assert result.stdout.startswith(HELM.version)


@pytest.mark.integration
def test_the_rendered_crd_is_the_generated_one(tmp_path: Path) -> None:
    rendered = [d for d in yaml.safe_load_all(helm_template(tmp_path)) if d and d["kind"] == "CustomResourceDefinition"]
    by_name = sorted(rendered, key=lambda d: d["metadata"]["name"])
    # LLMModel's (docs/serving.md), TrainingSweep's (docs/sweeps.md) and the runtimes' (docs/runtimes.md) too.
    runtimes = [runtime_crd_manifest(kind) for kind in (CLUSTER_RUNTIME_KIND, NAMESPACED_RUNTIME_KIND)]
    assert by_name == [runtimes[0], llmmodel_crd_manifest(), crd_manifest(), runtimes[1], sweep_crd_manifest()]


def test_the_charts_copies_are_deploys_files_and_no_links() -> None:
    """One source: crds/ and files/ are copies `make generate` writes of deploy/crd/ and deploy/monitoring/ (and
    checks). Never links: Helm warns about each link on every command it runs."""
    for copy, source in [
        *(
            (CHART / "crds" / name, REPO / "deploy" / "crd" / name)
            for name in generate.OUTPUTS
            if "webhook" not in name
        ),
        *((CHART / "files" / name, REPO / "deploy" / "monitoring" / name) for name in generate.MONITORING_FILES),
    ]:
        assert not copy.is_symlink(), f"{copy} is a link: Helm warns about it on every command"
        assert copy.read_text() == source.read_text(), f"{copy} differs from {source}: run `make generate`"
    assert yaml.safe_load((CHART / "crds" / "trainingjobs.ml.example.com.yaml").read_text()) == crd_manifest()
    crds = [name for name in generate.OUTPUTS if "webhook" not in name]
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(crds)


def test_the_chart_targets_the_operators_namespace_by_default() -> None:
    assert yaml.safe_load((REPO / "deploy" / "rbac" / "00-namespace.yaml").read_text())["metadata"]["name"] == NAMESPACE


def test_extra_args_reach_the_operator_command_line(tmp_path: Path) -> None:
    """Options the chart has no value of its own for (MLflow, GPU types, the serving image) go through extraArgs."""
    rendered = helm_template(
        tmp_path, "--set-json", 'extraArgs=["--mlflow-tracking-uri","http://mlflow:5000","--gpu-type","H100=a=b"]'
    )
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-4:] == ["--mlflow-tracking-uri", "http://mlflow:5000", "--gpu-type", "H100=a=b"]


@pytest.mark.integration
@pytest.mark.parametrize(("values", "scope"), [((), []), (NAMESPACED, ["--namespace", "ml-team-a"])])
def test_helm_test_runs_tj_check_as_the_operator(values: tuple[str, ...], scope: list[str], tmp_path: Path) -> None:
    rendered = [d for d in yaml.safe_load_all(helm_template(tmp_path, *values, tests=True)) if d]
    [check] = [d for d in rendered if d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]
    [deployment] = [d for d in rendered if d["kind"] == "Deployment"]
    operator = deployment["spec"]["template"]["spec"]
    container = check["spec"]["containers"][0]
    assert check["spec"]["serviceAccountName"] == operator["serviceAccountName"]
    assert container["image"] == operator["containers"][0]["image"]
    assert container["command"] + container["args"] == [
        "tj", "check", "--operator-namespace", NAMESPACE, "--wait", "120", *scope
    ]  # fmt: skip


def test_the_chart_has_notes_and_a_test() -> None:
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "helm test {{ .Release.Name }}" in notes and "kubectl apply -f deploy/crd/" in notes
    assert (CHART / "templates" / "tests" / "operator-check.yaml").is_file()
