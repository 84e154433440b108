"""The house rules the game day's code keeps, counted in the tree (each check proved on a planted case):
the game-day state is frozen and written nowhere, engines are asked, never probed, scenarios and
verdicts carry their behaviour, functions stay short."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "python_runner" / "rerun_safety"
VERDICT_WORDS = {"error", "nondeterministic", "loss", "duplicates", "drift", "side_effect", "untested", "safe",
                 "skipped"}
TRAITS = {"reorders", "baseline", "late_arrivals", "half_committed", "decisive"}
STATE = {"plan", "facts"}


def _files(*folders: str):
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not folders or rel.split("/")[0] in folders:
            yield rel, path.read_text()


def _ends_in(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names or isinstance(node, ast.Attribute) and node.attr in names


def state_writes(source: str) -> list[int]:
    """Lines that set an attribute of the game-day plan or its facts (`plan.x = ...`, `x.facts.y += ...`)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            while isinstance(t, ast.Subscript):  # plan.facts.arrivals[k] = ...
                t = t.value
            if isinstance(t, ast.Attribute) and (_ends_in(t.value, STATE) or t.attr == "facts"):
                out.append(node.lineno)
    return out


def engine_probes(source: str) -> list[int]:
    """Lines that probe an engine's parts with hasattr/getattr (the layer declares what they offer)."""
    engines = {"engine", "con", "scratch", "dialect", "adapter"}
    return [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("hasattr", "getattr") and n.args and _ends_in(n.args[0], engines)]


def verdict_string_branches(source: str) -> list[int]:
    """Comparisons of a verdict with a verdict's word ("safe", ("loss", "drift"), ...)."""
    def words(n):
        return (isinstance(n, ast.Constant) and n.value in VERDICT_WORDS or isinstance(n, (ast.Tuple, ast.List, ast.Set))
                and any(isinstance(e, ast.Constant) and e.value in VERDICT_WORDS for e in n.elts))

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(words(o) for o in operands) and any("verdict" in ast.unparse(o).lower() for o in operands):
                out.append(node.lineno)
    return out


def trait_reads(source: str) -> list[int]:
    """Reads of a scenario's traits (`scenario_kind(x).reorders`, `kind.baseline`): code asks the scenario
    to do the thing instead."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in TRAITS:
            v = node.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("scenario", "scenario_kind") \
                    or isinstance(v, ast.Name) and v.id == "kind":
                out.append(node.lineno)
    return out


def long_functions(source: str, limit: int = 60) -> list[str]:
    return [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_each_check_finds_its_planted_case():
    assert state_writes("plan.audit_columns = {}\nplan.facts.arrivals['x'] = 1\nx.facts = 2\nplan2 = plan\n") == [1, 2, 3]
    assert engine_probes("hasattr(engine, 'user_relations')\ngetattr(self.engine, 'notes', [])\ngetattr(m, 'x')\n") == [1, 2]
    assert verdict_string_branches('a = r.verdict == "safe"\nb = s.verdict in ("loss", "drift")\n'
                                   'c = n.status == "error"\nd = r.verdict == Verdict.SAFE\n') == [1, 2]
    assert trait_reads("a = scenario_kind(n).reorders\nif kind.baseline: pass\nb = t.half_committed\n") == [1, 2]
    assert long_functions("def f():\n" + "    x = 1\n" * 60) == ["f (61 lines)"]


def test_the_game_day_state_is_frozen_and_written_nowhere():
    from rerun_safety.gameday.facts import Facts, FrozenMap
    from rerun_safety.gameday.plan import Plan, ScenarioJob

    for cls in (Plan, Facts, ScenarioJob):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
    assert isinstance(Facts(arrivals={"a": (1,)}).arrivals, FrozenMap)
    # (the diff's own `plan` is its query plan, built in place by the diff's modules)
    found = {rel: lines for rel, text in _files("gameday", "fix", "report") if (lines := state_writes(text))}
    assert found == {}


def test_engines_are_asked_not_probed_outside_the_layer():
    found = {rel: lines for rel, text in _files() if not rel.startswith("warehouse/") and (lines := engine_probes(text))}
    assert found == {}


def test_verdicts_are_an_enum_compared_nowhere_by_their_words():
    found = {rel: lines for rel, text in _files() if rel != "results.py" and (lines := verdict_string_branches(text))}
    assert found == {}


def test_scenarios_carry_their_behaviour_no_trait_is_branched_on_outside_them():
    found = {rel: lines for rel, text in _files() if rel != "gameday/scenarios.py" and (lines := trait_reads(text))}
    assert found == {}


def test_no_function_over_60_lines_in_the_game_day_the_fix_search_and_the_engines():
    found = {rel: names for rel, text in _files("gameday", "fix", "warehouse") if (names := long_functions(text))}
    assert found == {}
