"""The local stand-in of the operator image (examples/images.yaml) installs what the Dockerfile would: every
dependency of pyproject.toml, pinned within its range, and nothing else; and runs `tj` as uid 65532, as the
Deployment expects (runAsNonRoot with runAsUser 65532)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from trainingjob.node.images.catalog import DEFAULT_IMAGES_FILE, ImageCatalog
from trainingjob.paths import REPO_ROOT

IMAGE = "ghcr.io/example/trainingjob-operator:0.1.0"


def pinned(path: Path) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    requirements = [Requirement(line) for line in lines if line]
    return {canonicalize_name(r.name): str(r.specifier).removeprefix("==") for r in requirements}


def test_the_image_pins_every_dependency_of_the_package_within_its_range() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = {canonicalize_name(r.name): r.specifier for r in map(Requirement, project["dependencies"])}
    image = ImageCatalog(DEFAULT_IMAGES_FILE).lookup(IMAGE)
    [requirements] = image.requirements
    pins = pinned(requirements)
    assert pins.keys() == wanted.keys()
    for name, version in pins.items():
        assert wanted[name].contains(version), f"{name}=={version} is outside pyproject.toml's {wanted[name]}"


def test_the_image_runs_tj_as_the_deployments_user() -> None:
    image = ImageCatalog(DEFAULT_IMAGES_FILE).lookup(IMAGE)
    assert (image.uid, image.gid) == (65532, 65532)
    assert image.entrypoint == ("tj",) and image.files["/usr/local/bin/tj"].stat().st_mode & 0o111
    assert image.files["/app/trainingjob"] == REPO_ROOT / "src" / "trainingjob"
