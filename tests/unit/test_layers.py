"""The packages of src/trainingjob import downwards only, and no module imports one that imports it back.

Read from the source (every import statement, those inside functions and under TYPE_CHECKING included: a cycle
hidden from the interpreter is still one for a reader), so the layers docs/architecture.md draws stay the ones the
code has. A new package must be given its place in LAYERS.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import trainingjob

ROOT = Path(trainingjob.__file__).parent

# Top first. A package may import from the layers below its own; packages sharing a layer are independent of each
# other. The ground floor holds what every layer may use.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer)
    for layer in (
        {"client"},  # the Python client for notebooks and scripts, on the CLI's client layer (cli/kube.py)
        {"cli"},  # the `tj` command: everything below is its to start
        {"cluster"},  # the local control plane
        {"node"},  # the local process node: an agent of its own, no library of the operator's
        {"ui"},  # the web UI
        {"operator"},  # the controllers: watches, queues, the writer, one planner call per object
        {"webhooks"},  # admission and conversion, served by the operator
        {"serving", "sweeps"},  # the LLMModel planner; the TrainingSweep planner
        {"reconcile"},  # the TrainingJob planner
        {"progress", "scheduling", "queueing"},  # progress reports; gang APIs and quotas; Kueue workloads
        {"builders"},  # the children's manifests
        {"config"},  # the operator's settings
        {"api", "sdk"},  # the CRDs' schema and typed views; the in-container helpers
        {"frameworks"},  # one module per ML framework
        # the ground floor; planning: the plan vocabulary (actions, Events, Plan) every planner and the kit share
        {"kube", "planning", "user_agent", "certs", "http_bodies", "forwarding", "paths", "options"},
        {"trainingjob"},  # the package itself: its version
    )
)
# Imports that still go up a layer, each (importer, imported). The list may only shrink: the test fails when one is
# gone and still listed. None is left (issue 34 moved what they needed to the ground floor or to api/).
KNOWN_UPWARD_IMPORTS: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in ROOT.rglob("*.py")}


def imported(module: str, tree: ast.AST) -> Iterator[str]:
    """The trainingjob modules `module` imports: `from X import a` is X.a when that is a module, else X."""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def import_graph() -> dict[str, set[str]]:
    return {
        module: {target for target in imported(module, ast.parse(path.read_text())) if target in MODULES} - {module}
        for module, path in MODULES.items()
    }


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_every_package_has_its_layer() -> None:
    placed = set().union(*LAYERS)
    assert sorted({package_of(m) for m in MODULES} - placed) == []


def test_imports_go_down_the_layers_only() -> None:
    upward = set()
    for module, targets in import_graph().items():
        for target in targets:
            mine, theirs = package_of(module), package_of(target)
            if mine != theirs and layer_of(theirs) <= layer_of(mine):
                upward.add((module, target))
    assert sorted(upward - KNOWN_UPWARD_IMPORTS) == [], "imports up (or across) the layers"
    assert sorted(KNOWN_UPWARD_IMPORTS - upward) == [], "fixed: remove them from KNOWN_UPWARD_IMPORTS"


# The controller kit knows no kind: it may not import a controller package (one with a watches.py), a planner, or
# what a kind's children are (gang providers, Kueue workloads, manifests, frameworks): a controller names the API of a
# custom-object child to the writer. It shares the plan vocabulary with them through planning/, on the ground floor.
KIT = "trainingjob.operator.runtime"
CONTROLLERS = tuple(f"trainingjob.operator.{p.parent.name}" for p in (ROOT / "operator").glob("*/watches.py"))
PLANNERS = ("trainingjob.reconcile", "trainingjob.serving", "trainingjob.sweeps")
KINDS_CHILDREN = ("trainingjob.scheduling", "trainingjob.queueing", "trainingjob.builders", "trainingjob.frameworks")
KIT_MAY_NOT_IMPORT = (*CONTROLLERS, *PLANNERS, *KINDS_CHILDREN)


def test_the_controller_kit_imports_no_controller_no_planner_and_no_childrens_code() -> None:
    graph = import_graph()
    kit = [module for module in graph if module == KIT or module.startswith(f"{KIT}.")]
    assert kit, "the kit moved: update KIT"
    assert "trainingjob.operator.trainingjob" in CONTROLLERS
    found = sorted(
        (module, target)
        for module in kit
        for target in graph[module]
        if target.startswith(KIT_MAY_NOT_IMPORT) and not target.startswith(KIT)
    )
    assert found == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that import each other, directly or not."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert strongly_connected(import_graph()) == []


def test_the_scan_sees_what_it_must() -> None:
    """The checks above cannot pass for want of seeing: a known downward import, a relative one and a cycle are
    found."""
    graph = import_graph()
    assert "trainingjob.api.constants" in graph["trainingjob.reconcile.planner"]
    assert "trainingjob.sdk.checkpoint" in graph["trainingjob.sdk"]  # `from .checkpoint import ...`
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_imports() -> None:
    """A moved name leaves no import behind (ruff does not resolve imports): each module loads on its own."""
    failed = []
    for module in sorted(MODULES):
        if module.endswith("__main__"):
            continue
        try:
            importlib.import_module(module)
        except Exception as error:
            failed.append(f"{module}: {error!r}")
    assert failed == []
