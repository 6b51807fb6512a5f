"""The Dockerfile, read as text (there is no container engine to build it here): two stages, a wheel-only runtime
without build tools, a non-root user, `tj` as the entrypoint; and the Deployment agrees with it."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|clang|make|build-essential|apt-get|apt|apk|python3?-dev|pip wheel)\b")


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def arguments(self, instruction: str) -> list[str]:
        return [args for name, args in self.instructions if name == instruction]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    result, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:
            continue
        pending += " " + stripped.removesuffix("\\").strip()
        if not stripped.endswith("\\"):
            name, _, args = pending.strip().partition(" ")
            result.append((name.upper(), args.strip()))
            pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return result


def stages() -> list[Stage]:
    result: list[Stage] = []
    for name, args in instructions((REPO / "Dockerfile").read_text()):
        if name == "FROM":
            parts = args.split()
            result.append(Stage(parts[0], parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None))
        else:
            assert result, f"{name} before the first FROM"
            result[-1].instructions.append((name, args))
    return result


def test_a_builder_stage_makes_wheels_and_the_runtime_stage_installs_only_them() -> None:
    builder, runtime = stages()
    assert (builder.image, builder.name) == ("python:3.11-slim", "builder")
    assert runtime.image == "python:3.11-slim"
    builds = " && ".join(builder.arguments("RUN"))
    assert "pip wheel --no-deps --wheel-dir /wheels ." in builds
    dependencies = 'pip wheel --wheel-dir /wheels "$(ls /wheels/trainingjob_operator-*.whl)[sweeps]"'
    assert dependencies in builds, "the dependencies' wheels, the sweeps extra's included"
    installs = runtime.arguments("RUN")
    assert len(installs) == 1
    assert "from=builder,source=/wheels" in installs[0], "wheels come from the builder, not from a layer"
    # Every extra a controller needs at run time is in the image (the sweep controller imports Optuna).
    assert "pip install --no-cache-dir --no-index --find-links=/wheels 'trainingjob-operator[sweeps]'" in installs[0]
    assert not runtime.arguments("COPY"), "the runtime stage copies nothing but through the wheel mount"


def test_the_runtime_stage_has_no_build_tools() -> None:
    runtime = stages()[-1]
    for name, args in runtime.instructions:
        found = BUILD_TOOLS.search(args)
        assert not found, f"{name} {args!r} brings {found.group()} into the final image"


def test_it_runs_as_a_non_root_user_with_tj_as_entrypoint() -> None:
    runtime = stages()[-1]
    user = runtime.arguments("USER")[-1]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric, so that runAsNonRoot can verify it"
    assert int(uid) == 65532
    assert json.loads(runtime.arguments("ENTRYPOINT")[-1]) == ["tj"]
    assert json.loads(runtime.arguments("CMD")[-1]) == ["operator", "--all-namespaces"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "tj" in scripts


def test_the_build_context_is_the_package_and_nothing_else() -> None:
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [rule for rule in rules if rule and not rule.startswith("#")]
    assert rules[0] == "*", "an allowlist: new directories (.venv, caches, clusters' state) stay out"
    assert {"!pyproject.toml", "!README.md", "!src/"} <= set(rules)  # README.md: the package's readme
    sources = {source.rstrip("/") for args in stages()[0].arguments("COPY") for source in args.split()[:-1]}
    assert sources == {"pyproject.toml", "README.md", "src"}, "what the builder copies is in the allowlist"


def test_the_deployment_matches_the_image() -> None:
    deployment = yaml.safe_load((REPO / "deploy" / "manager" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    runtime = stages()[-1]
    assert str(pod["securityContext"]["runAsUser"]) == runtime.arguments("USER")[-1].split(":")[0]
    assert container["command"] == json.loads(runtime.arguments("ENTRYPOINT")[-1])
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert container["image"] == f"ghcr.io/example/trainingjob-operator:{version}"
    exposed = {int(port) for port in runtime.arguments("EXPOSE")[-1].split()}
    assert exposed == {port["containerPort"] for port in container["ports"]}
