"""Write deploy/crd/ from the Python sources, or check that it is up to date.

deploy/crd/ holds the TrainingJob CRD (from schema.py), the LLMModel CRD (from schema_llmmodel.py) and the admission
webhook configurations (from webhook_config.py): everything `kubectl apply -f deploy/crd/` registers
with the API server.
`python -m trainingjob.api.generate` (or `make generate`) rewrites the files; `--check` exits 1 when one differs,
so CI catches a change that was not regenerated.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trainingjob.api import webhook_config
from trainingjob.api.constants import CRD_NAME, MODEL_CRD_NAME
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_llmmodel import llmmodel_crd_manifest

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_DIRECTORY = REPO_ROOT / "deploy" / "crd"
CRD_FILE = f"{CRD_NAME}.yaml"
MODEL_CRD_FILE = f"{MODEL_CRD_NAME}.yaml"
WEBHOOKS_FILE = "webhook-configurations.yaml"
CRD_PATH = CRD_DIRECTORY / CRD_FILE
WEBHOOKS_PATH = CRD_DIRECTORY / WEBHOOKS_FILE
HEADER = "# generated from src/trainingjob/api/schema.py by `make generate`; do not edit\n"
MODEL_HEADER = "# generated from src/trainingjob/api/schema_llmmodel.py by `make generate`; do not edit\n"
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


def render_webhooks() -> str:
    """The Mutating- and ValidatingWebhookConfiguration, as one YAML stream."""
    documents = [webhook_config.mutating_configuration(), webhook_config.validating_configuration()]
    return WEBHOOKS_HEADER + "---\n".join(_dump(document) for document in documents)


OUTPUTS: dict[str, Callable[[], str]] = {
    CRD_FILE: render,
    MODEL_CRD_FILE: render_llmmodel,
    WEBHOOKS_FILE: render_webhooks,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainingjob.api.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs instead of writing it")
    parser.add_argument(
        "--output", type=Path, default=CRD_DIRECTORY, help=f"directory to write (default: {CRD_DIRECTORY})"
    )
    args = parser.parse_args(argv)
    stale = []
    for name, render_file in OUTPUTS.items():
        path, text = args.output / name, render_file()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    for path in stale:
        print(f"{path} is out of date: run `make generate`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
