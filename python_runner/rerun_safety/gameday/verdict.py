"""From diffs to verdicts: per scenario, per model, and the root cause / contamination graph."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from sqlglot import exp

from ..diff import DiffResult
from ..results import PartitionCount, ScenarioResult, worst, Verdict
from .scenarios import scenario as scenario_kind


def scenario_verdict(scenario: str, diff: DiffResult) -> Verdict:
    """Name what a difference means. Loss outranks duplicates, duplicates outrank drift."""
    if diff.identical:
        return Verdict.SAFE
    if (fixed := scenario_kind(scenario).verdict_of(diff)) is not None:
        return fixed
    if diff.schema_message:
        return Verdict.DRIFT
    if diff.keyed:
        if diff.missing_keys:
            return Verdict.LOSS
        if diff.duplicate_keys:
            return Verdict.DUPLICATES
        return Verdict.DRIFT
    # Without a key, a changed row is one extra (its new version, not a copy of a reference row)
    # and one missing row; missing rows beyond those changed versions were lost, even when copies
    # of other rows make the table larger than the reference.
    changed_versions = diff.extra_rows - diff.extra_copies
    if diff.missing_rows > changed_versions:
        return Verdict.LOSS
    if diff.extra_copies:
        return Verdict.DUPLICATES
    return Verdict.DRIFT


# DuckDB refusing a file outside the sandbox (warehouse/duckdb/confine.py)
# DuckDB refusing a file outside the sandbox (warehouse/duckdb/confine.py), or the PostgreSQL sandbox refusing a
# statement that writes a server file (warehouse/postgres/redirect.refuse_server_files)
_REFUSED = re.compile(r'Permission Error: Cannot access (?:file|directory) "([^"]*)" - file system operations are '
                      r'disabled by configuration|refused in the sandbox: [^\n]*?(?:"([^"]*)"[^\n]*|$)', re.M)


def failed_result(name: str, message: str, hooks: str = "") -> ScenarioResult:
    """A model that failed in a scenario: an error; or, when the sandbox refused a hook a file outside
    it (the user's export, another database), a side effect naming the hook: in production that hook
    writes there on every run."""
    lines = [ln.strip() for ln in (hooks or "").splitlines() if ln.strip()]
    kernel = _KERNEL_REFUSED.search(message or "")
    if kernel is not None:
        return _written_outside(name, next(g for g in kernel.groups() if g), lines)
    role = _ROLE_REFUSED.search(message or "") if lines else None
    if role is not None:
        return ScenarioResult(name, Verdict.SIDE_EFFECT, message=(
            f"a hook does what the game day's database role may not (refused there by the database): "
            f"{role.group(0).strip()}; hook: {lines[0]}"))
    refused = _REFUSED.search(message or "")
    path = Path(refused.group(1) or refused.group(2) or "") if refused is not None else None
    duckdb_home = Path.home() / ".duckdb"
    if path is not None and refused.group(1) and (path == Path.home() or duckdb_home == path
                                                  or duckdb_home in path.parents):
        # INSTALL in a hook writes DuckDB's extension folder: not the user's data, but not possible here
        return ScenarioResult(name, Verdict.UNTESTED, message=(
            f"not judged: a hook installs a DuckDB extension, which a sandbox cannot ({refused.group(0)}); list "
            "it under the profile's `extensions:`, which are installed and loaded before the sandbox is confined"))
    if refused is not None and not lines:
        # a model's own SQL only reads: a file by a path the game day did not find in it (built in Jinja)
        return ScenarioResult(name, Verdict.UNTESTED, message=(
            f"not judged: the model reads a file outside the sandbox, which refused it ({refused.group(0)}); "
            "write its path as a literal in the model's SQL, or declare the file as a source (dbt-duckdb "
            "external_location), which the game day copies into its sandboxes"))
    if refused is None:
        return ScenarioResult(name, Verdict.ERROR, message=message)
    base = Path(refused.group(1) or refused.group(2) or "").name
    hook = next((ln for ln in lines if base and base in ln), lines[0])
    what = refused.group(0).removeprefix("refused in the sandbox: ")
    return ScenarioResult(name, Verdict.SIDE_EFFECT, message=f"a hook writes or reads a file outside the sandbox (refused "
                                                       f"there): {what}; hook: {hook}")


# the kernel refusing a write outside the run folder (confine/): DuckDB's, Python's and Spark's (Hadoop's local file
# system: a job's `_temporary` folder under the path it writes, or the file itself) words for EACCES (Landlock) and
# EROFS (the confined namespace's read-only mounts, which answer first). Reading is never refused there, so this is
# a write.
_DENIED = r"(?:Permission denied|Read-only file system)"
_KERNEL_REFUSED = re.compile(rf'Cannot open file "([^"]*)": {_DENIED}|{_DENIED}: \'([^\'\n]*)\'|'
                             r'Mkdirs failed to create (?:file:)?(/[^\s]*?)(?:/_temporary/|\s|$)|'
                             rf'java\.io\.FileNotFoundException: (?:file:)?(/[^\s]*) \({_DENIED}\)')


# PostgreSQL refusing the game day's own role (warehouse/postgres/role.py) what takes a superuser, the owner of another
# database or role, or a membership it lacks: a server file or program, ALTER/COMMENT ON DATABASE, ALTER ROLE,
# another role's sessions, an untrusted extension. Inside its sandbox the role owns everything.
_ROLE_REFUSED = re.compile(r"(?:must be (?:a )?superuser|must be owner of|must be a member of|must have privileges of|"
                           r"permission denied (?:to|for))[^\n]*")


def _written_outside(name: str, path: str, hooks: list[str]) -> ScenarioResult:
    """The project's code wrote a file outside the sandbox and the kernel refused it: in production it
    writes there on every run. Names the hook that wrote it where one names the file (DuckDB writes a
    COPY's file under a tmp_ name first), else says the model's own code did."""
    base = Path(path).name
    names = {base, base.removeprefix("tmp_")} - {""}
    hook = next((ln for ln in hooks if any(n in ln for n in names)), None)
    where = f"hook: {hook}" if hook else (f"hook: {hooks[0]}" if hooks else "the model's own code")
    return ScenarioResult(name, Verdict.SIDE_EFFECT, message=f"writes a file outside the sandbox (refused there by the "
                                                       f"kernel): {path}; {where}")


def differs(verdict: str) -> bool:
    return Verdict(verdict).unsafe


@dataclass
class Isolation:
    """What the isolated replays showed. `own`: model -> scenarios where its difference is its own;
    `unshown`: model -> scenario -> why no replay could show where its difference comes from (a parent
    still differed in isolation; another model's hook writes its relation). A model is called
    contaminated only in scenarios not in `unshown`."""

    own: dict[str, set[str]] = field(default_factory=dict)
    unshown: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, plan, uid: str, scenario: str, results: Mapping[str, ScenarioResult],
            parents: tuple[str, ...]) -> None:
        """One candidate's isolated replay of one scenario (`results`: every model it judged)."""
        r = results[uid]
        if not differs(r.verdict):
            return  # right on its parents' clean output: its difference came from them
        still = [p for p in parents if p in results and differs(results[p].verdict)]
        if not still or own_difference(r, [results[p] for p in still], plan.facts.computed_columns.get(uid, {})):
            self.own.setdefault(uid, set()).add(scenario)
            return
        names = ", ".join(sorted(plan.project.models[p].name for p in still))
        self.unshown.setdefault(uid, {})[scenario] = (
            f"the isolated replay could not put its parents back in their reference state ({names} still "
            f"differed there), and its own differences are not only in columns it computes itself")

    def unshown_in(self, uid: str, scenario: str, reason: str) -> None:
        self.unshown.setdefault(uid, {}).setdefault(scenario, reason)


def own_difference(r: ScenarioResult, parents: list[ScenarioResult], computed: Mapping[str, frozenset[str]]) -> bool:
    """Whether a model's difference is its own although a parent differs too: its rows and keys are the
    reference's, and every column that differs is one it computes itself (`computed`: lineage's
    computed_columns) from no column that differs in a parent."""
    if r.missing_keys or r.extra_keys or r.duplicate_keys or r.rows != r.reference_rows or not r.differing_columns:
        return False
    parent_columns = {c.lower() for p in parents for c in p.differing_columns}
    return all(c.lower() in computed and not computed[c.lower()] & parent_columns for c in r.differing_columns)


def root_causes(verdicts: Mapping[str, Mapping[str, str]], parents: Mapping[str, tuple[str, ...]],
                isolated: Isolation | None = None) -> tuple[set[str], dict[str, set[str]], dict[str, str]]:
    """verdicts[model][scenario]; parents[model] are the judged models it reads (or whose hooks write
    it); isolated: what the isolated replays showed.

    A model that differs in a scenario where every parent matches, or whose difference the isolation
    showed its own, is a root cause. A model that differs below a root cause (in the same scenario) is
    contaminated by it, unless no replay could show that in that scenario. Returns the root causes, the
    contaminated models with their root causes, and, for a differing model that is neither, why its
    attribution is inconclusive.
    """
    isolated = isolated or Isolation()
    roots: set[str] = set()
    root_in: dict[str, set[str]] = {}
    for model, scenarios in isolated.own.items():
        if scenarios:
            roots.add(model)
            root_in.setdefault(model, set()).update(scenarios)
    for model, by_scenario in verdicts.items():
        for scenario, v in by_scenario.items():
            if differs(v) and not any(differs(verdicts.get(p, {}).get(scenario, Verdict.SAFE))
                                      for p in parents.get(model, ())):
                roots.add(model)
                root_in.setdefault(model, set()).add(scenario)

    def ancestors(model: str) -> set[str]:
        seen: set[str] = set()
        stack = list(parents.get(model, ()))
        while stack:
            p = stack.pop()
            if p not in seen:
                seen.add(p)
                stack.extend(parents.get(p, ()))
        return seen

    contaminated: dict[str, set[str]] = {}
    inconclusive: dict[str, str] = {}
    for model, by_scenario in verdicts.items():
        bad = {s for s, v in by_scenario.items() if differs(v)}
        unshown = isolated.unshown.get(model, {})
        # not where no replay could tell (a model with a defect of its own may also inherit one)
        shown = bad - set(unshown)
        for anc in ancestors(model) - {model}:
            if anc in roots and shown & root_in.get(anc, set()):
                contaminated.setdefault(model, set()).add(anc)
        if bad and model not in roots and model not in contaminated and unshown:
            inconclusive[model] = unshown[sorted(unshown)[0]]
    return roots, contaminated, inconclusive


def explained_by_nondeterminism(s: ScenarioResult, volatile: set[str]) -> bool:
    """Whether a scenario's difference is the nondeterminism already shown: values changed, rows and keys
    as in the reference, and only in the columns that differ between two builds of the same data."""
    return (s.verdict == Verdict.NONDETERMINISTIC or (
        s.verdict == Verdict.DRIFT and bool(s.differing_columns) and set(s.differing_columns) <= volatile
        and s.rows == s.reference_rows and not (s.missing_keys or s.extra_keys or s.duplicate_keys)
        and s.extra_rows == s.missing_rows == s.changed_rows))


def verdict_of(scenarios) -> tuple[str, tuple[str, ...]]:
    """A model's verdict from its scenarios, and its nondeterministic columns. Nondeterminism never hides
    another defect: where a scenario differs beyond what nondeterminism explains (in other columns, in
    rows or keys), that defect is the verdict and the nondeterministic columns are named beside it. When
    no column explains the nondeterminism (rows themselves differ), it stays the verdict."""
    volatile = {c for s in scenarios if s.verdict == Verdict.NONDETERMINISTIC for c in s.volatile_columns}
    if not any(s.verdict == Verdict.NONDETERMINISTIC for s in scenarios):
        return worst(s.verdict for s in scenarios), ()
    if volatile:
        defects = [s.verdict for s in scenarios if differs(s.verdict) and not explained_by_nondeterminism(s, volatile)]
        if defects:
            return worst(defects), tuple(sorted(volatile))
    return worst(s.verdict for s in scenarios), tuple(sorted(volatile))


def levels(candidates: list[str], ancestors: dict[str, set[str]]) -> list[list[str]]:
    """Candidates grouped by depth among themselves: those with no candidate above them first."""
    depth: dict[str, int] = {}

    def of(u: str) -> int:
        if u not in depth:
            depth[u] = 1 + max((of(a) for a in ancestors[u] if a in candidates), default=-1)
        return depth[u]

    by_depth: dict[int, list[str]] = {}
    for u in candidates:
        by_depth.setdefault(of(u), []).append(u)
    return [sorted(by_depth[d]) for d in sorted(by_depth)]


def current_versions(m, dialect: str) -> exp.Expression | None:
    """A snapshot is judged on its open versions: one full build holds one version of each key, a
    replay the history of the batches as well (legitimately); the open versions must be the same,
    and a rerun that opens a version twice shows as a duplicated key."""
    if not m.snapshot or not m.valid_to:
        return None
    column = exp.column(m.valid_to, quoted=True)
    is_open = column.is_(exp.null())
    if m.valid_to_current:
        is_open = exp.or_(is_open, column.eq(exp.maybe_parse(m.valid_to_current, dialect=dialect)))
    return is_open


def scenario_result(name: str, d: DiffResult) -> ScenarioResult:
    verdict = scenario_verdict(name, d)
    return ScenarioResult(
        name=name, verdict=verdict, reference_rows=d.reference_rows, rows=d.rows,
        extra_rows=d.extra_rows, missing_rows=d.missing_rows, duplicate_keys=d.duplicate_keys,
        missing_keys=d.missing_keys, extra_keys=d.extra_keys, changed_rows=d.changed_rows,
        volatile_columns=scenario_kind(name).volatile(d),
        differing_columns=d.differing_columns, message=d.schema_message,
        sample=d.sample, partitions=tuple(PartitionCount(p, r, c) for p, r, c in d.partitions),
        partition_column=d.partition_column)
