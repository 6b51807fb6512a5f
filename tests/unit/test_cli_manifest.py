"""`tj submit` manifests: built from flags (hyperparameters, env, the command after --) or read from YAML."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from trainingjob.api import constants as k
from trainingjob.cli import main
from trainingjob.cli.manifest import (
    ManifestError,
    manifest_from_flags,
    manifests_from_yaml,
    parse_env,
    parse_hp_value,
    parse_hyperparameters,
    place,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.1", 0.1),
        ("3", 3),
        ("-2", -2),
        ("1e-4", 1e-4),
        ("true", True),
        ("false", False),
        ("resnet50", "resnet50"),
        ("True", "True"),  # not JSON: stays text
        ('"3"', "3"),  # quoted: the string "3"
        ("", ""),
        ("null", "null"),
        ("[1, 2]", "[1, 2]"),
        ('{"a": 1}', '{"a": 1}'),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("0.1.2", "0.1.2"),
        ("a=b", "a=b"),
    ],
)
def test_hyperparameter_values_keep_json_numbers_and_booleans(text: str, value: object) -> None:
    parsed = parse_hp_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_hyperparameters_split_at_the_first_equals_and_the_last_wins() -> None:
    assert parse_hyperparameters(["lr=0.1", "expr=a=b", "lr=0.2"]) == {"lr": 0.2, "expr": "a=b"}
    with pytest.raises(ManifestError, match="not KEY=VALUE"):
        parse_hyperparameters(["lr"])
    with pytest.raises(ManifestError, match="not KEY=VALUE"):
        parse_hyperparameters(["=1"])


def test_env_refuses_the_names_the_operator_sets() -> None:
    assert parse_env(["FOO=bar", "EMPTY=", "FOO=baz"]) == [
        {"name": "FOO", "value": "baz"},
        {"name": "EMPTY", "value": ""},
    ]
    for reserved in ("WORLD_SIZE", "HYPERPARAM_LR", "TRAININGJOB_NAME", "MASTER_ADDR"):
        with pytest.raises(ManifestError, match="set by the operator"):
            parse_env([f"{reserved}=1"])


def test_manifest_from_flags_puts_the_first_word_after_dashes_in_command_and_the_rest_in_args() -> None:
    manifest = manifest_from_flags(
        "mnist",
        framework="pytorch",
        image="registry.example/train:1",
        command=["python", "train.py", "--lr", "0.1"],
        workers=4,
        gpus=1,
        hyperparameters=["lr=0.1", "epochs=3", "amp=true", "arch=resnet"],
        env=["FOO=bar"],
        annotations=["sim.ml.example.com/complete-after=2s"],
        namespace="team-a",
    )
    assert manifest == {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": "mnist", "namespace": "team-a"},
        "spec": {
            "framework": "pytorch",
            "image": "registry.example/train:1",
            "command": ["python"],
            "args": ["train.py", "--lr", "0.1"],
            "workers": 4,
            "gpuPerWorker": 1,
            "hyperparameters": {"lr": 0.1, "epochs": 3, "amp": True, "arch": "resnet"},
            "env": [{"name": "FOO", "value": "bar"}],
            "podAnnotations": {"sim.ml.example.com/complete-after": "2s"},
        },
    }


def test_manifest_from_flags_leaves_out_what_was_not_given() -> None:
    manifest = manifest_from_flags("one", framework="jax", image="img", command=["train"])
    assert manifest["metadata"] == {"name": "one"}
    assert manifest["spec"] == {
        "framework": "jax",
        "image": "img",
        "command": ["train"],
        "workers": 1,
        "gpuPerWorker": 0,
    }
    suspended = manifest_from_flags(
        "s", framework="mpi", image="i", command=["x"], suspend=True, restart_policy="Never"
    )
    assert suspended["spec"]["suspend"] is True and suspended["spec"]["restartPolicy"] == "Never"
    with pytest.raises(ManifestError, match="after --"):
        manifest_from_flags("none", framework="jax", image="img", command=[])


def test_yaml_files_must_hold_named_trainingjobs() -> None:
    job = {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": {"name": "a"}, "spec": {}}
    text = yaml.safe_dump(job) + "---\n---\n" + yaml.safe_dump(job | {"metadata": {"name": "b"}})
    assert [m["metadata"]["name"] for m in manifests_from_yaml(text, "jobs.yaml")] == ["a", "b"]
    with pytest.raises(
        ManifestError, match=r"jobs.yaml: is v1/Pod, not a TrainingJob \(ml.example.com/v1alpha1 or ml.example.com/v1\)"
    ):
        manifests_from_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "jobs.yaml")
    with pytest.raises(ManifestError, match=r"metadata\.name is missing"):
        manifests_from_yaml(yaml.safe_dump(job | {"metadata": {}}), "x.yaml")
    with pytest.raises(ManifestError, match="not valid YAML"):
        manifests_from_yaml("a: [", "x.yaml")
    with pytest.raises(ManifestError, match="no TrainingJob"):
        manifests_from_yaml("", "x.yaml")
    with pytest.raises(ManifestError, match=r"document 2"):
        manifests_from_yaml(yaml.safe_dump(job) + "---\n- 1\n", "x.yaml")


def test_namespace_comes_from_the_flag_then_the_manifest_then_the_default() -> None:
    def manifest(namespace: str | None = None) -> dict:
        return {"metadata": {"name": "a", **({"namespace": namespace} if namespace else {})}}

    assert place(manifest(), None, "default") == "default"
    assert place(manifest("own"), None, "default") == "own"
    assert place(manifest(), "flag", "default") == "flag"
    assert place(manifest("same"), "same", "default") == "same"
    with pytest.raises(ManifestError, match="in namespace own, but -n says flag"):
        place(manifest("own"), "flag", "default")


def test_submit_dry_run_prints_the_manifest_without_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    args = ["submit", "mnist", "--framework", "pytorch", "--image", "img", "--workers", "2", "--hp", "lr=0.1"]
    result = CliRunner().invoke(main, [*args, "--dry-run", "--", "python", "train.py", "--lr", "0.1"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert printed["spec"]["command"] == ["python"] and printed["spec"]["args"] == ["train.py", "--lr", "0.1"]
    assert printed["spec"]["hyperparameters"] == {"lr": 0.1} and "namespace" not in printed["metadata"]

    as_json = CliRunner().invoke(main, [*args, "-n", "team", "--dry-run", "-o", "json", "--", "python"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["metadata"] == {"name": "mnist", "namespace": "team"}


def test_submit_usage_errors() -> None:
    runner = CliRunner()
    no_command = runner.invoke(main, ["submit", "x", "--framework", "jax", "--image", "i", "--dry-run"])
    assert no_command.exit_code == 1 and "give the training command after --" in no_command.output
    missing = runner.invoke(main, ["submit", "--framework", "jax", "--", "python"])
    assert missing.exit_code == 2 and "missing NAME, --image" in missing.output
    both = runner.invoke(main, ["submit", "x", "-f", "job.yaml"])
    assert both.exit_code == 2 and "either -f FILE or NAME" in both.output
    unreadable = runner.invoke(main, ["submit", "-f", "/nonexistent/job.yaml", "--dry-run"])
    assert unreadable.exit_code == 1 and "cannot read /nonexistent/job.yaml" in unreadable.output
    reserved = runner.invoke(main, ["submit", "x", "--framework", "jax", "--image", "i", "--env", "RANK=1", "--", "p"])
    assert reserved.exit_code == 1 and "RANK is set by the operator" in reserved.output


def test_a_yaml_syntax_error_is_one_line_with_its_position() -> None:
    text = "apiVersion: ml.example.com/v1\nkind: TrainingJob\nspec:\n  numWorkers: [1\n  image: a\n"
    with pytest.raises(ManifestError) as error:
        manifests_from_yaml(text, "job.yaml")
    assert str(error.value) == (
        "job.yaml: not valid YAML: line 5, column 8: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence from line 4, column 15)"
    )
