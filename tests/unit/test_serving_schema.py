"""The LLMModel CRD from its single source: the seed's fields, the scale subresource an autoscaler needs, printer
columns, every field described, and the operator flags that map gpuType to nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trainingjob.api import constants as k
from trainingjob.api.generate import CRD_DIRECTORY, MODEL_CRD_FILE, render_llmmodel
from trainingjob.api.schema_llmmodel import llmmodel_crd_manifest
from trainingjob.options import gpu_types as parse_gpu_types

REPO = Path(__file__).resolve().parents[2]


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)]
    for name, child in (schema.get("properties") or {}).items():
        found += walk(child, f"{path}.{name}")
    if "items" in schema:
        found += walk(schema["items"], f"{path}[]")
    return found


def version() -> dict[str, Any]:
    (only,) = llmmodel_crd_manifest()["spec"]["versions"]
    return only


def test_the_generated_file_is_the_schema_module() -> None:
    assert (CRD_DIRECTORY / MODEL_CRD_FILE).read_text() == render_llmmodel()
    assert (REPO / "charts" / "trainingjob-operator" / "crds" / MODEL_CRD_FILE).read_text() == render_llmmodel()


def test_the_seeds_fields_keep_their_names_and_types() -> None:
    crd = llmmodel_crd_manifest()
    assert crd["spec"]["group"] == "ai.example.com" and crd["spec"]["names"]["kind"] == "LLMModel"
    assert version()["name"] == "v1"
    spec = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["modelName"]["type"] == "string"
    assert spec["properties"]["replicas"]["type"] == "integer"
    assert spec["properties"]["gpuType"]["type"] == "string"
    assert "required" not in spec, "the seed's schema requires nothing of spec, and its example has no modelName"
    seed = yaml.safe_load((REPO / "examples" / "llmmodel" / "seed.yaml").read_text())
    assert seed == {
        "apiVersion": "ai.example.com/v1",
        "kind": "LLMModel",
        "metadata": {"name": "llama-3-70b"},
        "spec": {"replicas": 3, "gpuType": "H100"},
    }


def test_every_field_is_described_for_kubectl_explain() -> None:
    root = version()["schema"]["openAPIV3Schema"]
    undocumented = [path for path, node in walk(root) if path not in ("", ".metadata") and not node.get("description")]
    assert undocumented == []


def test_the_scale_subresource_lets_an_autoscaler_target_the_model() -> None:
    assert version()["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    columns = [c["name"] for c in version()["additionalPrinterColumns"]]
    assert columns[:5] == ["Model", "GPU", "Replicas", "Ready", "Available"]
    assert "llmmodels.ai.example.com.yaml" in (CRD_DIRECTORY / "Kustomization").read_text()
    assert k.MODEL_CRD_NAME == "llmmodels.ai.example.com"


def test_gpu_types_map_to_node_labels() -> None:
    assert parse_gpu_types(("H100=nvidia.com/gpu.product=NVIDIA-H100", "H100=pool=gpu", "A10=accelerator=a10")) == {
        "H100": {"nvidia.com/gpu.product": "NVIDIA-H100", "pool": "gpu"},
        "A10": {"accelerator": "a10"},
    }
    with pytest.raises(ValueError, match="is not TYPE=KEY=VALUE"):
        parse_gpu_types(("H100=nolabel",))
