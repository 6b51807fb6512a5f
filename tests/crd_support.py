"""The cluster-wide objects the tests install as the chart would: the CRDs from their schema modules (created or
replaced, waited for until served), the webhook configurations, deploy/ manifests, and a kubeconfig of the
operator's ServiceAccount for an operator run as that account (operator_harness.py starts it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.admission_support import withheld_if_unanswered
from tests.kube import Kube, token_kubeconfig, wait_until
from tests.operator_harness import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def install_crd(kube: Kube, manifest: dict[str, Any] | None = None) -> None:
    """Create or replace the TrainingJob CRD (from the schema module unless given) and the webhook configurations,
    then wait until it is served. A replace keeps the webhook targets a running operator set (clientConfig and its
    CA): the shipped ones point at https://127.0.0.1:9443, where no test operator listens."""
    from trainingjob.api.schema import crd_manifest

    manifest = create_or_replace_crd(kube, manifest or crd_manifest(), keep_conversion=True)
    name = manifest["metadata"]["name"]
    install_webhook_configurations(kube)
    install_llmmodel_crd(kube)
    install_sweep_crd(kube)
    install_runtime_crds(kube)
    wait_until(lambda: _established(kube, name), 60, f"CRD {name} to be Established")
    # Established can precede the first successful create, and after a replace the API server may still serve
    # the previous schema for a moment: wait until a probe comes back defaulted exactly as this schema says. The
    # mutating webhook fails closed: with no operator to answer it yet, the probe is made without it.
    with withheld_if_unanswered(kube):
        wait_until(lambda: _serves_schema(kube, manifest), 60, f"the API server to serve the new schema of {name}")


def install_llmmodel_crd(kube: Kube) -> None:
    """The LLMModel CRD from its schema module, created or replaced (the operator watches it beside TrainingJob)."""
    from trainingjob.api.schema_llmmodel import llmmodel_crd_manifest

    install_other_crd(kube, llmmodel_crd_manifest())


def install_sweep_crd(kube: Kube) -> None:
    """The TrainingSweep CRD from its schema module (docs/sweeps.md), created or replaced."""
    from trainingjob.api.schema_sweep import sweep_crd_manifest

    install_other_crd(kube, sweep_crd_manifest())


def install_runtime_crds(kube: Kube) -> None:
    """The ClusterTrainingRuntime and TrainingRuntime CRDs (docs/runtimes.md), created or replaced."""
    from trainingjob.api.constants import RUNTIME_KINDS
    from trainingjob.api.schema_runtime import runtime_crd_manifest

    for kind in RUNTIME_KINDS:
        install_other_crd(kube, runtime_crd_manifest(kind))


def install_other_crd(kube: Kube, crd: dict[str, Any]) -> None:
    """A CRD without conversion webhook, created or replaced, and waited for until Established."""
    name = create_or_replace_crd(kube, crd)["metadata"]["name"]
    wait_until(lambda: _established(kube, name), 60, f"CRD {name} to be Established")


def create_or_replace_crd(kube: Kube, crd: dict[str, Any], keep_conversion: bool = False) -> dict[str, Any]:
    """Create `crd` (recording itself as last applied) or replace the one installed, and return what was sent.
    `keep_conversion`: a replace keeps the installed `spec.conversion`, whose webhook clientConfig and CA a running
    operator set to itself (the TrainingJob CRD's; the shipped one points where no test operator listens)."""
    manifest = saved_config(crd)
    name = manifest["metadata"]["name"]
    try:
        kube.extensions.create_custom_resource_definition(manifest)
    except ApiException as error:
        if error.status != 409:
            raise
        current = kube.api.sanitize_for_serialization(kube.extensions.read_custom_resource_definition(name))
        manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if keep_conversion:
            manifest["spec"]["conversion"] = current["spec"]["conversion"]
        kube.extensions.replace_custom_resource_definition(name, manifest)
    return manifest


def saved_config(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` recording itself as last applied, as `kubectl apply` (or `create --save-config`) makes it: a later
    `kubectl apply` of another clientConfig (deploy/base's Service) then removes the url the file had."""
    saved = json.dumps(manifest, separators=(",", ":"))
    annotations = {**manifest["metadata"].get("annotations", {}), LAST_APPLIED: saved}
    return {**manifest, "metadata": {**manifest["metadata"], "annotations": annotations}}


def install_webhook_configurations(kube: Kube) -> None:
    """deploy/crd/'s Mutating- and ValidatingWebhookConfiguration, created or replaced keeping their clientConfig."""
    from kubernetes import client

    from trainingjob.api import webhook_config

    admission = client.AdmissionregistrationV1Api(kube.api)
    for manifest, read, create, replace in (
        (
            saved_config(webhook_config.mutating_configuration()),
            admission.read_mutating_webhook_configuration,
            admission.create_mutating_webhook_configuration,
            admission.replace_mutating_webhook_configuration,
        ),
        (
            saved_config(webhook_config.validating_configuration()),
            admission.read_validating_webhook_configuration,
            admission.create_validating_webhook_configuration,
            admission.replace_validating_webhook_configuration,
        ),
    ):
        try:
            create(manifest)
        except ApiException as error:
            if error.status != 409:
                raise
            current = kube.api.sanitize_for_serialization(read(webhook_config.CONFIGURATION_NAME))
            manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            manifest["webhooks"][0]["clientConfig"] = current["webhooks"][0]["clientConfig"]
            replace(webhook_config.CONFIGURATION_NAME, manifest)


def _established(kube: Kube, name: str) -> bool:
    conditions = kube.extensions.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def _with_defaults(schema: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """`value` with the schema's defaults filled in for absent properties, recursively (objects only: enough
    for the probe, which has no lists or maps)."""
    result = dict(value)
    for key, child in schema.get("properties", {}).items():
        if key not in result and "default" in child:
            result[key] = child["default"]
        if isinstance(result.get(key), dict) and child.get("type") == "object":
            result[key] = _with_defaults(child, result[key])
    return result


def _serves_schema(kube: Kube, manifest: dict[str, Any]) -> bool:
    """A dry-run create of a minimal job returns the spec the schema of `manifest` defaults it to. In the storage
    version, which needs no conversion webhook (none may be running yet)."""
    from trainingjob.api import constants as k

    version = next(v for v in manifest["spec"]["versions"] if v["storage"])
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec = {"framework": "pytorch", "image": "registry.example/probe:1", "command": ["true"]}
    api_version = f"{k.GROUP}/{version['name']}"
    probe = {"apiVersion": api_version, "kind": k.KIND, "metadata": {"name": "schema-probe"}, "spec": spec}
    try:
        created = kube.custom.create_namespaced_custom_object(
            k.GROUP, version["name"], "default", k.PLURAL, probe, dry_run="All"
        )
    except ApiException as error:
        if error.status in (404, 422):  # not served yet, or still the previous schema (and its rules)
            return False
        raise
    return created["spec"] == _with_defaults(spec_schema, spec)


def apply_manifests(kubectl: str, kubeconfig: Path, directory: Path) -> None:
    subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", "apply", "-f", str(directory)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )


def service_account_kubeconfig(kube: Kube, path: Path) -> Path:
    """A kubeconfig of the operator's ServiceAccount (no admin certificate), its token valid for a whole session."""
    wait_until(lambda: kube.has_service_account(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT), 30, "operator account")
    return token_kubeconfig(kube, OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, path, seconds=6 * 3600)
