"""Load kubernetes_asyncio's generated API and model classes when first used, not all ~850 modules at import.

`kubernetes_asyncio.client` (and its `models` and `api` packages) import every generated class in their
`__init__.py`: about 40 MiB of resident memory in a process whose whole budget is 150 MiB at 1000 jobs x 8 workers,
for the handful of APIs and models the operator touches (it reads most responses as raw JSON). `install()`, called
by the `tj` command's package (cli/__init__.py) before any command imports the client, registers those three
packages as modules whose attributes resolve on first access (PEP 562 `__getattr__`), from the same
`from X import Y` lines their `__init__.py` files hold, so every name stays reachable: `client.CoreV1Api`,
`client.models.V1Lease` (which the client's deserializer looks up by name), `client.ApiException`. Nothing of
the library is copied or changed.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path

PACKAGES = ("kubernetes_asyncio.client", "kubernetes_asyncio.client.api", "kubernetes_asyncio.client.models")
IMPORT_LINE = re.compile(r"^from (?P<module>[\w.]+) import (?P<name>\w+)\s*$", re.MULTILINE)


def install() -> bool:
    """Make the three packages lazy; False (and nothing changed) if the client is imported already or not found."""
    if any(name in sys.modules for name in PACKAGES):
        return False
    root = importlib.util.find_spec("kubernetes_asyncio")
    if root is None or not root.submodule_search_locations:
        return False
    base = Path(next(iter(root.submodule_search_locations)))
    for package in PACKAGES:
        directory = base.joinpath(*package.split(".")[1:])
        sys.modules[package] = lazy_package(package, directory)
    return True


def lazy_package(name: str, directory: Path) -> types.ModuleType:
    init = directory / "__init__.py"
    names = {m["name"]: m["module"] for m in IMPORT_LINE.finditer(init.read_text())}
    module = types.ModuleType(name, f"{name}, its names loaded on first use (trainingjob.kube.lazy_client)")
    module.__path__ = [str(directory)]  # a package: its submodules import as usual
    module.__file__ = str(init)
    module.__spec__ = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(directory)])
    module.__all__ = sorted(names)

    def __getattr__(attribute: str) -> object:
        source = names.get(attribute)
        if source is not None:
            value = getattr(importlib.import_module(source), attribute)
        elif (directory / attribute).is_dir() or (directory / f"{attribute}.py").is_file():
            value = importlib.import_module(f"{name}.{attribute}")  # a submodule: `client.models`, `client.rest`
        else:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        setattr(module, attribute, value)  # later lookups are plain attribute reads
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module
