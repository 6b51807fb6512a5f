"""trainingjob.sdk is standard-library-only and self-contained: its directory alone works in any Python image."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import trainingjob.sdk

SDK_DIR = Path(trainingjob.sdk.__file__).parent

# Runs in `python -I -S`: no site-packages (so no cryptography, no trainingjob), no environment, no cwd on sys.path.
PROGRAM = textwrap.dedent(
    """
    import logging, os, sys, tempfile
    sys.path.insert(0, sys.argv[1])
    logging.basicConfig(level=logging.WARNING)
    import tj_sdk_copy as sdk

    assert sdk.report_progress(epoch=1, loss=0.5) is False
    assert sdk.report_checkpoint("x", epoch=1) is False
    directory = tempfile.mkdtemp()
    path = sdk.save_checkpoint(lambda p: open(p, "wb").write(b"w"), epoch=2, keep_last=1, directory=directory)
    assert sdk.latest_checkpoint(directory) == path, path

    own = {"tj_sdk_copy", "__main__"}
    allowed = set(sys.stdlib_module_names) | set(sys.builtin_module_names) | own
    foreign = sorted(name for name in sys.modules if name.split(".")[0] not in allowed)
    assert not foreign, foreign
    assert "trainingjob" not in sys.modules
    print("ok")
    """
)


def test_the_sdk_directory_alone_imports_and_works_in_an_isolated_interpreter(tmp_path: Path) -> None:
    shutil.copytree(SDK_DIR, tmp_path / "tj_sdk_copy", ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROGRAM, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert result.stderr == ""  # outside a TrainingJob the SDK stays quiet


# The one optional dependency: the S3 client of checkpoints in S3, imported inside _s3.client() only when used.
OPTIONAL_IN_FUNCTIONS = {"_s3.py": {"boto3", "botocore"}}


def imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0:
        return [(node.module or "").split(".")[0]]
    return []


def test_every_import_is_relative_or_from_the_standard_library() -> None:
    allowed = set(sys.stdlib_module_names)
    for source in sorted(SDK_DIR.glob("*.py")):
        tree = ast.parse(source.read_text(), filename=str(source))
        optional = OPTIONAL_IN_FUNCTIONS.get(source.name, set())
        in_functions = {
            id(inner) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            for name in imported_names(node):
                if name in optional and id(node) in in_functions:
                    continue
                assert name in allowed, f"{source.name} imports {name}"


def test_files_stay_small() -> None:
    for source in SDK_DIR.glob("*.py"):
        assert len(source.read_text().splitlines()) < 300, source.name
