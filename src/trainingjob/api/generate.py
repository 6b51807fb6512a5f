"""Write deploy/crd/ from the Python sources, and the Helm chart's copies; or check that they are up to date.

deploy/crd/ holds the TrainingJob CRD (from schema.py), the LLMModel CRD (from schema_llmmodel.py), the
TrainingSweep CRD (from schema_sweep.py), the runtime CRDs (ClusterTrainingRuntime and TrainingRuntime, from
schema_runtime.py) and the admission webhook configurations (from webhook_config.py): everything
`kubectl apply -f deploy/crd/` registers with the API server.
`python -m trainingjob.api.generate` (or `make generate`) rewrites the files; `--check` exits 1 when one differs,
so CI catches a change that was not regenerated.

The chart (charts/trainingjob-operator) carries copies of the CRDs and of deploy/monitoring's alerts and
dashboard, written here too. They were symbolic links once, and Helm warns about every link on every command it
runs (`found symbolic link in path`, 12 lines per `helm install`); copies that this module writes and checks keep one
source without the noise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trainingjob.api import webhook_config
from trainingjob.api.constants import CRD_NAME, MODEL_CRD_NAME, RUNTIME_KINDS, SWEEP_CRD_NAME
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_llmmodel import llmmodel_crd_manifest
from trainingjob.api.schema_runtime import runtime_crd_manifest
from trainingjob.api.schema_sweep import sweep_crd_manifest

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_DIRECTORY = REPO_ROOT / "deploy" / "crd"
CHART_DIRECTORY = REPO_ROOT / "charts" / "trainingjob-operator"
MONITORING_DIRECTORY = REPO_ROOT / "deploy" / "monitoring"
MONITORING_FILES = ("prometheus-rule.yaml", "grafana-dashboard.json")
CRD_FILE = f"{CRD_NAME}.yaml"
MODEL_CRD_FILE = f"{MODEL_CRD_NAME}.yaml"
SWEEP_CRD_FILE = f"{SWEEP_CRD_NAME}.yaml"
WEBHOOKS_FILE = "webhook-configurations.yaml"
CRD_PATH = CRD_DIRECTORY / CRD_FILE
WEBHOOKS_PATH = CRD_DIRECTORY / WEBHOOKS_FILE
HEADER = "# generated from src/trainingjob/api/schema.py by `make generate`; do not edit\n"
MODEL_HEADER = "# generated from src/trainingjob/api/schema_llmmodel.py by `make generate`; do not edit\n"
SWEEP_HEADER = "# generated from src/trainingjob/api/schema_sweep.py by `make generate`; do not edit\n"
RUNTIME_HEADER = "# generated from src/trainingjob/api/schema_runtime.py by `make generate`; do not edit\n"
WEBHOOKS_HEADER = (
    "# generated from src/trainingjob/api/webhook_config.py by `make generate`; do not edit\n"
    "# The operator injects its CA (caBundle) and, outside the cluster, points these at itself.\n"
)


def _dump(document: dict[str, Any]) -> str:
    """Keys in the order the builders make them, so diffs stay readable."""
    return yaml.safe_dump(document, sort_keys=False, width=120, allow_unicode=True)


def render() -> str:
    """The CRD as YAML text."""
    return HEADER + _dump(crd_manifest())


def render_llmmodel() -> str:
    """The LLMModel CRD as YAML text."""
    return MODEL_HEADER + _dump(llmmodel_crd_manifest())


def render_sweep() -> str:
    """The TrainingSweep CRD as YAML text."""
    return SWEEP_HEADER + _dump(sweep_crd_manifest())


def runtime_crd_file(kind: str) -> str:
    return f"{runtime_crd_manifest(kind)['metadata']['name']}.yaml"


def render_runtime(kind: str) -> Callable[[], str]:
    """The CRD of one runtime kind as YAML text."""
    return lambda: RUNTIME_HEADER + _dump(runtime_crd_manifest(kind))


def render_webhooks() -> str:
    """The Mutating- and ValidatingWebhookConfiguration, as one YAML stream."""
    documents = [webhook_config.mutating_configuration(), webhook_config.validating_configuration()]
    return WEBHOOKS_HEADER + "---\n".join(_dump(document) for document in documents)


OUTPUTS: dict[str, Callable[[], str]] = {
    CRD_FILE: render,
    MODEL_CRD_FILE: render_llmmodel,
    SWEEP_CRD_FILE: render_sweep,
    **{runtime_crd_file(kind): render_runtime(kind) for kind in RUNTIME_KINDS},
    WEBHOOKS_FILE: render_webhooks,
}


def chart_outputs(chart: Path) -> dict[Path, Callable[[], str]]:
    """The chart's copies: crds/ as generated, files/ as deploy/monitoring has them."""
    outputs: dict[Path, Callable[[], str]] = {
        chart / "crds" / CRD_FILE: render,
        chart / "crds" / MODEL_CRD_FILE: render_llmmodel,
        chart / "crds" / SWEEP_CRD_FILE: render_sweep,
        **{chart / "crds" / runtime_crd_file(kind): render_runtime(kind) for kind in RUNTIME_KINDS},
    }
    for name in MONITORING_FILES:
        outputs[chart / "files" / name] = (MONITORING_DIRECTORY / name).read_text
    return outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainingjob.api.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs instead of writing it")
    parser.add_argument(
        "--output", type=Path, default=CRD_DIRECTORY, help=f"directory to write (default: {CRD_DIRECTORY})"
    )
    parser.add_argument(
        "--chart",
        type=Path,
        default=None,
        help=f"chart whose copies to write (default: {CHART_DIRECTORY}, unless --output names another directory)",
    )
    args = parser.parse_args(argv)
    chart = args.chart or (CHART_DIRECTORY if args.output == CRD_DIRECTORY else None)
    outputs = {args.output / name: render_file for name, render_file in OUTPUTS.items()}
    if chart is not None:
        outputs |= chart_outputs(chart)
    stale = []
    for path, render_file in outputs.items():
        text = render_file()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()  # a link of the chart's former layout: write the copy, not through the link
        path.write_text(text)
        print(f"wrote {path}")
    for path in stale:
        print(f"{path} is out of date: run `make generate`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
