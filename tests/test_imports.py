"""No import circle in the runner: every `import` of a rerun_safety module, at module level or inside a
function (where circles hide), and the package `__init__` each import runs first, form a graph without a
cycle. The layers stay cli -> gameday -> diff/verdict -> sandbox/lint/project -> report -> results."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python_runner" / "rerun_safety"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                # importing a.b.c runs the __init__ of a.b first
                parts = target.split(".")
                for i in range(2, len(parts) + 1):
                    dep = ".".join(parts[:i])
                    if dep in mods and dep != name and not name.startswith(dep + "."):
                        deps.add(dep)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_function_level_imports_and_package_inits():
    graph = import_graph()
    assert "rerun_safety.diff" in graph["rerun_safety.gameday.core"]  # from ..diff import diff_relations
    # from ..sandbox.base import ...: the sandbox package's __init__ runs first
    assert {"rerun_safety.sandbox", "rerun_safety.sandbox.base"} <= graph["rerun_safety.gameday.core"]
    assert "rerun_safety.gameday.core" in graph["rerun_safety.gameday"]  # the package's public face
    assert "rerun_safety.clock" in graph["rerun_safety.dbt_invoke"]  # imported inside DbtSession.invoke
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_only_the_cli_reads_the_game_day():
    """The game day sits on top: no lower layer (diff, sandbox, lint, project, report, results) imports it."""
    graph = import_graph()
    readers = {m for m, deps in graph.items() if not m.startswith("rerun_safety.gameday")
               and any(d == "rerun_safety.gameday" or d.startswith("rerun_safety.gameday.") for d in deps)}
    assert readers == {"rerun_safety.cli"}
