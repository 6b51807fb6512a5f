"""Write the TrainingJob CRD from schema.py to deploy/crd/ as YAML, or check that the file is up to date.

`python -m trainingjob.api.generate` (or `make generate`) rewrites the file; `--check` exits 1 when it differs
from crd_manifest(), so CI catches a schema change that was not regenerated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from trainingjob.api.constants import CRD_NAME
from trainingjob.api.schema import crd_manifest

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = REPO_ROOT / "deploy" / "crd" / f"{CRD_NAME}.yaml"
HEADER = "# generated from src/trainingjob/api/schema.py by `make generate`; do not edit\n"


def render() -> str:
    """The CRD as YAML text, keys in the order schema.py builds them, so diffs stay readable."""
    return HEADER + yaml.safe_dump(crd_manifest(), sort_keys=False, width=120, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainingjob.api.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs instead of writing it")
    parser.add_argument("--output", type=Path, default=CRD_PATH, help=f"where to write (default: {CRD_PATH})")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else None
        if current != text:
            print(f"{args.output} is out of date: run `make generate`", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
