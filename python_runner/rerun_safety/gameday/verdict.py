"""From diffs to verdicts: per scenario, per model, and the root cause / contamination graph."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from sqlglot import exp

from ..diff import DiffResult
from ..warehouse.refusals import KERNEL, ROLE, SANDBOX_FILE
from ..warehouse.registry import refusals
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


def failed_result(name: str, message: str, hooks: str = "") -> ScenarioResult:
    """A model that failed in a scenario: an error; or, when the sandbox refused a hook a file outside
    it (the user's export, another database), a side effect naming the hook: in production that hook
    writes there on every run. The engines type what was refused (warehouse/refusals.py)."""
    lines = [ln.strip() for ln in (hooks or "").splitlines() if ln.strip()]
    found = {r.kind: r for r in refusals(message or "")}
    if KERNEL in found:
        return _written_outside(name, found[KERNEL].path, lines)
    if ROLE in found and lines:
        return ScenarioResult(name, Verdict.SIDE_EFFECT, message=(
            f"a hook does what the game day's database role may not (refused there by the database): "
            f"{found[ROLE].text}; hook: {lines[0]}"))
    refused = found.get(SANDBOX_FILE)
    if refused is None:
        return ScenarioResult(name, Verdict.ERROR, message=message)
    path, duckdb_home = Path(refused.path), Path.home() / ".duckdb"
    if refused.engine_setting and (path == Path.home() or duckdb_home == path or duckdb_home in path.parents):
        # INSTALL in a hook writes DuckDB's extension folder: not the user's data, but not possible here
        return ScenarioResult(name, Verdict.UNTESTED, message=(
            f"not judged: a hook installs a DuckDB extension, which a sandbox cannot ({refused.text}); list "
            "it under the profile's `extensions:`, which are installed and loaded before the sandbox is confined"))
    if not lines:
        # a model's own SQL only reads: a file by a path the game day did not find in it (built in Jinja)
        return ScenarioResult(name, Verdict.UNTESTED, message=(
            f"not judged: the model reads a file outside the sandbox, which refused it ({refused.text}); "
            "write its path as a literal in the model's SQL, or declare the file as a source (dbt-duckdb "
            "external_location), which the game day copies into its sandboxes"))
    base = Path(refused.path).name
    hook = next((ln for ln in lines if base and base in ln), lines[0])
    what = refused.text.removeprefix("refused in the sandbox: ")
    return ScenarioResult(name, Verdict.SIDE_EFFECT, message=f"a hook writes or reads a file outside the sandbox (refused "
                                                       f"there): {what}; hook: {hook}")


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
            parents: tuple[str, ...], shown: Mapping[str, tuple] | None = None) -> None:
        """One candidate's isolated replay of one scenario (`results`: every model it judged; `shown`:
        model -> what its builds showed nondeterministic, `nondeterminism_shown`)."""
        r = results[uid]
        if not differs(r.verdict):
            return  # right on its parents' clean output: its difference came from them
        shown = shown or {}

        def chance(u: str, s: ScenarioResult) -> bool:
            found = shown.get(u)
            return found is not None and explained_by_nondeterminism(s, *found)

        still = [p for p in parents if p in results and differs(results[p].verdict)]
        computed = plan.facts.computed_columns.get(uid, {})
        # a parent rebuilt in full draws its own chance again (a list's order, a tie): where that is all
        # it still differs in, a difference of the model beyond what chance explains in it is its own
        # (had the parent's chance cost the model rows or values, the determinism build would show it)
        if not still or own_difference(r, [results[p] for p in still], computed) or beside_parent_values(
                r, [results[p] for p in still], computed, plan.facts.row_columns.get(uid)) or (
                not chance(uid, r) and all(chance(p, results[p]) for p in still)):
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


def beside_parent_values(r: ScenarioResult, parents: list[ScenarioResult], computed: Mapping[str, frozenset[str]],
                         row_columns: frozenset[str] | None) -> bool:
    """Whether a model's difference is its own beside parents that differ only in some columns' values
    (their rows and keys the reference's: a nondeterministic `string_agg`, say) that its SQL picks and
    pairs no row by (`row_columns`): those values reach only the columns computed from them or carried,
    so rows or keys that differ, or a column it computes from none of them, are its own defect."""
    if row_columns is None or not parents:
        return False
    values = {c.lower() for p in parents for c in p.differing_columns}
    if values & row_columns or not all(value_only(p) for p in parents):
        return False
    if r.missing_keys or r.extra_keys or r.duplicate_keys or r.rows != r.reference_rows:
        return True
    return any(c.lower() in computed and not computed[c.lower()] & values for c in r.differing_columns)


def value_only(r: ScenarioResult) -> bool:
    """Whether a scenario's difference is only in some columns' values: its rows and keys the reference's."""
    return bool(r.differing_columns) and r.rows == r.reference_rows and not (
        r.missing_keys or r.extra_keys or r.duplicate_keys) and r.extra_rows == r.missing_rows == r.changed_rows


def reaches(r: ScenarioResult, parent: ScenarioResult, computed: Mapping[str, frozenset[str]],
            row_columns: frozenset[str] | None) -> bool:
    """Whether a parent's difference in a scenario can be in a model's: not where the parent differs only
    in values of columns the model picks and pairs no row by (`row_columns`), and no column that differs
    in the model is one it carries or computes from them (a column it passes on is not in `computed`,
    and may carry any of them under another name)."""
    if not differs(parent.verdict):
        return False
    if row_columns is None or not value_only(parent):
        return True
    values = {c.lower() for c in parent.differing_columns}
    if values & row_columns:
        return True
    return any(c.lower() not in computed or computed[c.lower()] & values for c in r.differing_columns)


def root_causes(verdicts: Mapping[str, Mapping[str, str]], parents: Mapping[str, tuple[str, ...]],
                isolated: Isolation | None = None, chance: Mapping[str, set[str]] | None = None,
                unreached: Mapping[str, Mapping[str, frozenset[str]]] | None = None,
                ) -> tuple[set[str], dict[str, set[str]], dict[str, str]]:
    """verdicts[model][scenario]; parents[model] are the judged models it reads (or whose hooks write
    it); isolated: what the isolated replays showed; chance[model]: the scenarios whose difference the
    model's own nondeterminism explains; unreached[model][scenario]: the parents whose difference there
    cannot be in the model's (`reaches`).

    A model that differs in a scenario where every parent matches (or differs in what cannot reach it),
    or whose difference the isolation showed its own, is a root cause. A model that differs below a root cause (in the same scenario,
    through models that differ there and can pass the difference on) is contaminated by it, unless no
    replay could show that in that scenario. A root's difference that its nondeterminism explains (a
    `string_agg`'s order, a tie) contaminates only a difference that nondeterminism explains: had it
    cost the model rows or values beyond that, the determinism build would have shown it there too.
    Returns the root causes, the contaminated models with their root causes, and, for a differing
    model that is neither, why its attribution is inconclusive.
    """
    isolated = isolated or Isolation()
    chance = chance or {}
    unreached = unreached or {}
    roots: set[str] = set()
    root_in: dict[str, set[str]] = {}
    for model, scenarios in isolated.own.items():
        if scenarios:
            roots.add(model)
            root_in.setdefault(model, set()).update(scenarios)
    for model, by_scenario in verdicts.items():
        for scenario, v in by_scenario.items():
            blocked = unreached.get(model, {}).get(scenario, frozenset())
            if differs(v) and not any(differs(verdicts.get(p, {}).get(scenario, Verdict.SAFE))
                                      for p in parents.get(model, ()) if p not in blocked):
                roots.add(model)
                root_in.setdefault(model, set()).add(scenario)

    reach = _Reach(verdicts, parents, root_in, unreached)

    contaminated: dict[str, set[str]] = {}
    inconclusive: dict[str, str] = {}
    for model, by_scenario in verdicts.items():
        bad = {s for s, v in by_scenario.items() if differs(v)}
        unshown = isolated.unshown.get(model, {})
        # not where no replay could tell (a model with a defect of its own may also inherit one)
        for s in sorted(bad - set(unshown)):
            for anc in reach.roots(model, s) - {model}:
                if s in chance.get(model, ()) or s not in chance.get(anc, ()):
                    contaminated.setdefault(model, set()).add(anc)
        if bad and model not in roots and model not in contaminated and unshown:
            inconclusive[model] = unshown[sorted(unshown)[0]]
    return roots, contaminated, inconclusive


@dataclass
class _Reach:
    """The roots whose difference in a scenario can be in a model's: through its parents that differ
    there and are not among those whose difference cannot reach it (`unreached`)."""

    verdicts: Mapping[str, Mapping[str, str]]
    parents: Mapping[str, tuple[str, ...]]
    root_in: Mapping[str, set[str]]
    unreached: Mapping[str, Mapping[str, frozenset[str]]]
    memo: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    def roots(self, model: str, scenario: str) -> frozenset[str]:
        if (model, scenario) in self.memo:
            return self.memo[model, scenario]
        self.memo[model, scenario] = frozenset()  # a cycle (hooks writing each other's relations) ends here
        blocked = self.unreached.get(model, {}).get(scenario, frozenset())
        out: set[str] = set()
        for p in self.parents.get(model, ()):
            v = self.verdicts.get(p, {}).get(scenario)
            if p in blocked or (v is not None and not differs(v)):
                continue
            out |= self.roots(p, scenario)
            if v is not None and scenario in self.root_in.get(p, ()):
                out.add(p)
        self.memo[model, scenario] = frozenset(out)
        return self.memo[model, scenario]


def row_level(s: ScenarioResult) -> bool:
    """Whether a nondeterministic scenario's difference is in the rows themselves (a random sample, a
    `limit` without a total order: other rows, another count), not only in some columns' values."""
    return s.verdict == Verdict.NONDETERMINISTIC and bool(
        s.rows != s.reference_rows or s.missing_keys or s.extra_keys
        or (s.extra_rows or s.missing_rows) and not s.volatile_columns
        or s.extra_rows != s.changed_rows or s.missing_rows != s.changed_rows)


def explained_by_nondeterminism(s: ScenarioResult, volatile: set[str], rows: bool = False,
                                ordered: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether a scenario's difference is the nondeterminism already shown: values changed, rows and keys
    as in the reference, and only in the columns that differ between two builds of the same data; a
    column that differed there only in the order of the values it lists (`ordered`) only where it does
    here too (`4` against `1, 3, 4` is not another order). Where the rows themselves differed between
    two builds (`rows`), rows lost, added or changed are that too; copies of a key are not (two builds
    of a sample never keep a row twice)."""
    if s.verdict == Verdict.NONDETERMINISTIC:
        return True
    if rows:
        return s.verdict in (Verdict.LOSS, Verdict.DRIFT) and not s.duplicate_keys and not s.message
    return (s.verdict == Verdict.DRIFT and bool(s.differing_columns) and set(s.differing_columns) <= volatile
            and s.rows == s.reference_rows and not (s.missing_keys or s.extra_keys or s.duplicate_keys)
            and s.extra_rows == s.missing_rows == s.changed_rows
            and all(c in s.order_only_columns for c in s.differing_columns if c in ordered))


def nondeterminism_shown(scenarios) -> tuple[set[str], bool, set[str]] | None:
    """What a model's builds showed nondeterministic: its volatile columns, whether the rows themselves
    differed (then no column is named), and the volatile columns that only ever differed in the order
    of the values they list. None when no build was nondeterministic."""
    shown = [s for s in scenarios if s.verdict == Verdict.NONDETERMINISTIC]
    if not shown:
        return None
    # where some build kept other rows, no column is named (other rows differ in every column, and a
    # scenario whose counts came out alike by chance says nothing more)
    rows = any(row_level(s) for s in scenarios)
    volatile = set() if rows else {c for s in shown for c in s.volatile_columns}
    ordered = {c for c in volatile if all(c in s.order_only_columns for s in shown if c in s.volatile_columns)}
    return volatile, rows, ordered


def chance_scenarios(scenarios: Mapping[str, ScenarioResult]) -> set[str]:
    """The scenarios whose difference the model's own nondeterminism explains (as verdict_of counts)."""
    found = nondeterminism_shown(scenarios.values())
    if found is None:
        return set()
    volatile, rows, ordered = found
    return {name for name, s in scenarios.items()
            if differs(s.verdict) and (volatile or rows) and explained_by_nondeterminism(s, volatile, rows, ordered)}


def verdict_of(scenarios) -> tuple[str, tuple[str, ...]]:
    """A model's verdict from its scenarios, and its nondeterministic columns. Nondeterminism never hides
    another defect: where a scenario differs beyond what nondeterminism explains (in other columns, in
    rows or keys), that defect is the verdict and the nondeterministic columns are named beside it. Where
    two clean builds gave other rows (row_level), rows lost, added or changed are explained by it; and
    when no column explains the nondeterminism, it stays the verdict."""
    found = nondeterminism_shown(scenarios)
    if found is None:
        return worst(s.verdict for s in scenarios), ()
    volatile, rows, ordered = found
    if volatile or rows:
        defects = [s.verdict for s in scenarios
                   if differs(s.verdict) and not explained_by_nondeterminism(s, volatile, rows, ordered)]
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
