"""No import circle in the runner: every `import` of a rerun_safety module, at module level or inside a
function (where circles hide), and the package `__init__` each import runs first, form a graph without a
cycle. The layers stay cli -> fix -> gameday -> diff/verdict -> warehouse/lint/project -> report -> results."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python_runner" / "rerun_safety"


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = _modules(root)
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
    assert "rerun_safety.diff" in graph["rerun_safety.gameday.replay"]  # from ..diff import diff_relations
    # from ..warehouse.base import ...: the warehouse package's __init__ runs first
    assert {"rerun_safety.warehouse", "rerun_safety.warehouse.base"} <= graph["rerun_safety.gameday.core"]
    assert "rerun_safety.gameday.core" in graph["rerun_safety.gameday"]  # the package's public face
    assert "rerun_safety.clock" in graph["rerun_safety.dbt_invoke"]  # imported inside DbtSession.invoke
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert cycles(import_graph()) == []


def rooms(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the package's rooms: a top-level module or folder (`warehouse`, `clock`) each."""
    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(room(module), set()).update(room(d) for d in deps if room(d) != room(module))
    return out


def test_no_loop_between_folders():
    """Modules may form no circle, and neither may the folders they are in: warehouse -> project ->
    warehouse is a loop even when no two modules import each other (imports in functions included)."""
    assert cycles(rooms(import_graph())) == []


def test_the_folder_check_finds_a_planted_loop(tmp_path):
    pkg = tmp_path / "pkg"
    files = {"low/a.py": "X = 1\n", "low/c.py": "def f():\n    from ..high.b import g\n",
             "high/b.py": "from ..low.a import X\n", "__init__.py": ""}
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    graph = import_graph(pkg)
    assert cycles(graph) == []  # no two modules import each other...
    assert cycles(rooms(graph)) == [["pkg.high", "pkg.low"]]  # ...but the folders do


def test_the_engine_layer_imports_nothing_above_it():
    """warehouse/ is beneath every feature: it reads errors, secrets and the Thrift helper, nothing else."""
    assert rooms(import_graph())["rerun_safety.warehouse"] <= {
        "rerun_safety.errors", "rerun_safety.secrets", "rerun_safety.thrift"}


def test_only_the_cli_and_the_fix_search_read_the_game_day():
    """The game day sits on top, under the fix search that runs game days of changed copies: no lower layer
    (diff, warehouse, lint, project, report, results) imports it."""
    graph = import_graph()
    readers = {m for m, deps in graph.items() if not m.startswith("rerun_safety.gameday")
               and any(d == "rerun_safety.gameday" or d.startswith("rerun_safety.gameday.") for d in deps)}
    assert readers == {"rerun_safety.cli", "rerun_safety.fix.search"}


ENGINE_NAMES = {"duckdb", "postgres", "spark"}


def _names_an_engine(node: ast.AST) -> bool:
    """A string constant naming an engine, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in ENGINE_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_an_engine(e) for e in node.elts)
    return False


def engine_name_comparisons(source: str) -> list[int]:
    """Lines that choose by an engine's name: a comparison with one (==, !=, in, not in), or a dict
    keyed by engine names (looked up by name)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_names_an_engine(n) for n in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and any(k is not None and _names_an_engine(k) for k in node.keys):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_engine_name_check_sees_every_form():
    src = ('a = d == "duckdb"\nb = kind in ("postgres", "x")\nc = {"spark": 1}.get(d)\n'
           'e = "DuckDB" != k\nf = d.materialized\ng = x.sql(dialect="duckdb")\n')
    assert engine_name_comparisons(src) == [1, 2, 3, 4]


def test_only_the_warehouse_chooses_by_engine_name():
    """Engine differences live in warehouse/ (dialects, capability flags): no feature compares an
    engine's name (passing one to sqlglot to render SQL is not a choice)."""
    found = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("warehouse/"):
            continue
        lines = engine_name_comparisons(path.read_text())
        if lines:
            found[rel] = lines
    assert found == {}


SCENARIO_NAMES = {"reference", "replay", "rerun", "partial", "backfill", "late", "determinism"}


def test_scenarios_carry_their_behaviour():
    """Code asks a scenario what it does (gameday/scenarios.py's Scenario), never compares its name."""
    found = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "gameday/scenarios.py":
            continue
        lines = sorted({node.lineno for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Compare)
                        and any(isinstance(n, ast.Constant) and n.value in SCENARIO_NAMES or isinstance(
                            n, (ast.Tuple, ast.List, ast.Set)) and any(isinstance(e, ast.Constant) and e.value in
                                                                       SCENARIO_NAMES for e in n.elts)
                                for n in [node.left, *node.comparators])})
        if lines:
            found[rel] = lines
    assert found == {}


def test_no_module_imports_another_modules_private_name():
    """A name used by another module is part of its module's interface: it has no leading underscore."""
    found = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
