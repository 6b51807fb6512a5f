"""Code shipped without an image (client/code.py, client/launch.py): what can be shipped, what the ConfigMap holds,
and that the launcher really runs a function or a script with the SDK importable from the zip alone."""

from __future__ import annotations

import base64
import functools
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from trainingjob.client import code
from trainingjob.client.errors import CodeTooLarge, UnsupportedCode


def shipped(epochs: int, name: str = "x") -> None:
    import os

    from trainingjob import sdk

    print(f"epochs={epochs} name={name} rank={sdk.rank()} sdk={sdk.__file__} cwd-ok={os.path.isdir('.')}")


def failing() -> None:
    raise RuntimeError("boom in the training function")


def make_closure():
    captured = 3

    def inner() -> int:
        return captured

    return inner


def run_launcher(package: code.CodePackage, directory: Path) -> subprocess.CompletedProcess[str]:
    """The launcher in a fresh, isolated interpreter (-I -S: no site-packages, no PYTHONPATH), as an image without
    trainingjob would run it."""
    package.write_to(directory)
    command = [sys.executable, "-I", "-S", *package.command(str(directory))[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=directory)


def test_a_function_runs_with_its_arguments_and_the_sdk_from_the_zip(tmp_path: Path) -> None:
    result = run_launcher(code.from_function(shipped, {"epochs": 3, "name": "ddp"}), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "epochs=3 name=ddp rank=0" in result.stdout
    assert f"sdk={tmp_path / 'trainingjob-sdk.zip'}" in result.stdout  # imported from the shipped zip


def test_a_failing_function_prints_its_traceback_and_exits_1(tmp_path: Path) -> None:
    result = run_launcher(code.from_function(failing), tmp_path)
    assert result.returncode == 1
    assert "RuntimeError: boom in the training function" in result.stderr
    assert code.FUNCTION_FILE in result.stderr  # the traceback names the shipped file


def test_a_script_runs_as_main_with_its_argv(tmp_path: Path) -> None:
    script = tmp_path / "source" / "my train.py"
    script.parent.mkdir()
    script.write_text("import sys\nif __name__ == '__main__':\n    print('argv', sys.argv[1:])\n")
    package = code.from_script(script, ["--lr", 0.1])
    assert "my_train.py" in package.files  # a valid ConfigMap key
    result = run_launcher(package, tmp_path / "code")
    assert result.returncode == 0, result.stderr
    assert "argv ['--lr', '0.1']" in result.stdout


@pytest.mark.parametrize(
    ("function", "words"),
    [
        (lambda: None, "lambda"),
        (make_closure(), "enclosing function (captured)"),
        (print, "not a plain Python function"),
        (functools.partial(shipped, 1), "not a plain Python function"),
    ],
)
def test_what_cannot_be_shipped_is_refused_with_the_reason(function, words: str) -> None:
    with pytest.raises(UnsupportedCode, match=words.replace("(", r"\(").replace(")", r"\)")):
        code.from_function(function)


def test_arguments_must_be_json() -> None:
    with pytest.raises(UnsupportedCode, match="func_args must be JSON"):
        code.from_function(shipped, {"epochs": object()})
    with pytest.raises(UnsupportedCode, match="func_args must be JSON"):
        code.from_function(shipped, {"epochs": float("nan")})


def test_the_config_map_is_immutable_labelled_and_carries_the_zip() -> None:
    package = code.from_function(shipped, {"epochs": 1})
    config_map = package.config_map("job-1-code", "job-1")
    assert config_map["immutable"] is True
    assert config_map["metadata"]["labels"] == {code.LABEL_CODE_FOR: "job-1"}
    assert set(config_map["data"]) == {code.FUNCTION_FILE, code.LAUNCH_FILE, "entry.json"}
    entry = json.loads(config_map["data"]["entry.json"])
    assert entry == {"kind": "function", "file": code.FUNCTION_FILE, "function": "shipped", "kwargs": {"epochs": 1}}
    archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(config_map["binaryData"]["trainingjob-sdk.zip"])))
    assert {"trainingjob/__init__.py", "trainingjob/sdk/__init__.py", "trainingjob/sdk/progress.py"} <= set(
        archive.namelist()
    )
    assert package.size < code.MAX_CODE_BYTES
    assert package.command() == ["python3", f"{code.CODE_MOUNT_PATH}/launch.py"]


def test_code_beyond_what_a_config_map_holds_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "big.py"
    script.write_text("# " + "x" * code.MAX_CODE_BYTES + "\n")
    with pytest.raises(CodeTooLarge, match="more than the 1000000 a ConfigMap can carry"):
        code.from_script(script).config_map("big-code", "big")


def test_the_sdk_zip_is_the_same_bytes_every_time() -> None:
    code.sdk_zip.cache_clear()
    first = code.sdk_zip()
    code.sdk_zip.cache_clear()
    assert code.sdk_zip() == first
