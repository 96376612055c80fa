"""The package's import graph: no circle anywhere, and the layers point one way (DESIGN.md, "Layout").

Every import counts — module level, inside functions, and under TYPE_CHECKING — because a circle
through any of them is still a circle a reader has to untangle."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import proctor

ROOT = Path(proctor.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> nx.DiGraph:
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and t.startswith("proctor") and t != "proctor":
                    g.add_edge(name, t)
    return g


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_circle() -> None:
    cycles = list(nx.simple_cycles(_graph()))
    shortest = sorted(cycles, key=len)[:5]
    assert not cycles, f"{len(cycles)} import circle(s), e.g.: " + "; ".join(" -> ".join(c) for c in shortest)


def test_nothing_below_the_kit_imports_it_or_a_protocol() -> None:
    above = {"", "kit", "protocols", "runner", "dry_run", "cli", "viewer", "report", "api", "testing"}
    above |= {"gates"}  # gates and regressions read runs through the kit and the suite's evidence
    wrong = [
        (a, b) for a, b in _graph().edges if _layer(a) not in above and _layer(b) in {"kit", "protocols"}
    ]
    assert not wrong, f"modules below the kit import it or a protocol: {wrong[:10]}"


def test_the_kit_imports_no_protocol() -> None:
    wrong = [(a, b) for a, b in _graph().edges if _layer(a) == "kit" and _layer(b) == "protocols"]
    assert not wrong, f"the kit imports protocol code: {wrong[:10]}"


def test_the_graph_sees_imports() -> None:
    """The walk sees ordinary, relative, function-level and TYPE_CHECKING imports (or it proves nothing)."""
    g = _graph()
    assert g.has_edge("proctor.runner", "proctor.kit.registry")
    assert g.has_edge("proctor.kit.context", "proctor.candidates.kinds")  # imported inside a method
    assert g.number_of_edges() > 500
