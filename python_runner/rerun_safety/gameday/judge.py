"""Judging a scenario's sandbox: each model's output diffed against its reference, as a verdict."""

from __future__ import annotations

from dataclasses import replace

from ..diff import DiffResult, diff_relations
from ..results import ScenarioResult, Verdict
from ..warehouse.base import REFERENCE_SCHEMA, Connection
from . import order_only, side_effects
from .plan import Plan, partition_column
from .scenarios import scenario as scenario_kind
from .verdict import current_versions, failed_result, scenario_result


def failed(plan: Plan, uid: str, scenario: str, message: str) -> ScenarioResult:
    """A model whose build failed, with the hooks it runs (a failing hook is named as such)."""
    hooks = side_effects.hook_texts(plan.project.manifest, [uid])[0].get(uid, "")
    return failed_result(scenario, message, hooks)


def judge(con: Connection, name: str, plan: Plan, errors: dict[str, str], ref_errors: dict[str, str],
          float_tolerance: float | None, only: set[str] | None = None,
          skipped: dict[str, str] | None = None) -> dict[str, ScenarioResult]:
    """The verdicts of scenario `name` for the judged models (those in `only`, if given)."""
    out: dict[str, ScenarioResult] = {}
    with con.catalog_cached():
        for m in plan.judged:
            if only is None or m.unique_id in only:
                out[m.unique_id] = judge_one(con, name, plan, m, errors, ref_errors, skipped, float_tolerance)
    return out


def judge_one(con: Connection, name: str, plan: Plan, m, errors: dict[str, str], ref_errors: dict[str, str],
              skipped: dict[str, str] | None, float_tolerance: float | None) -> ScenarioResult:
    uid = m.unique_id
    kind = scenario_kind(name)
    if uid in ref_errors:
        return kind.on_reference_error(ref_errors[uid], lambda: failed(plan, uid, name, ref_errors[uid]))
    if uid in errors:
        return failed(plan, uid, name, errors[uid])
    # not built, or not in every run: never shown safe
    if not con.relation_kind(m.schema, m.identifier) or uid in (skipped or {}):
        why = (skipped or {}).get(uid) or "not built in this scenario (an upstream model failed)"
        return ScenarioResult(name, Verdict.UNTESTED, message=why)
    tol = m.float_tolerance if m.float_tolerance is not None else float_tolerance
    ignored = (*m.ignore_columns, *plan.facts.audit_columns.get(uid, ()))
    d = diff_relations(con, (REFERENCE_SCHEMA, plan.ref_names[uid]), (m.schema, m.identifier),
                       key=m.key, ignore_columns=ignored, where=current_versions(m, con.dialect),
                       partition_column=plan.facts.time_columns.get(uid) or partition_column(m),
                       column_detail=kind.column_detail, float_tolerance=tol)
    numbers = [c for c in plan.facts.window_columns.get(uid, ()) if c not in {i.lower() for i in ignored}]
    if numbers and not d.identical and not d.keyed and d.missing_rows and d.extra_rows and not d.schema_message:
        d = renumbered(d, diff_relations(con, (REFERENCE_SCHEMA, plan.ref_names[uid]), (m.schema, m.identifier),
                                         ignore_columns=(*ignored, *numbers), where=current_versions(m, con.dialect),
                                         float_tolerance=tol), numbers)
    r = replace(scenario_result(name, d), input_rows=plan.decisive_rows(m, name))
    def compare(a, b, column_detail=False):
        return diff_relations(con, a, b, key=m.key, ignore_columns=ignored, where=current_versions(m, con.dialect),
                              float_tolerance=tol, column_detail=column_detail)

    r = order_only.judge(con, plan, m, r, compare)
    if listed := order_only.order_only_columns(con, plan, m, r, lambda a, b: compare(a, b, True)):
        r = replace(r, order_only_columns=listed)
    return kind.coverage(plan, m, r)


def renumbered(d: DiffResult, without: DiffResult, numbers: list[str]) -> DiffResult:
    """An unkeyed comparison told in the user's units where the model numbers its rows with a window
    (`numbers`): `without` compares the same sides leaving those columns out. A row that matches there
    was renumbered (a window counted anew over a re-read window), one changed row, not a missing and an
    extra one; what still differs there is lost or added. The sample shows those rows first (a lost row
    when there is one), then renumbered ones."""
    moved = min(d.missing_rows - without.missing_rows, d.extra_rows - without.extra_rows)
    if moved <= 0:
        return d
    named = [c for c in d.differing_columns if c.lower() in numbers] or numbers
    columns = tuple(dict.fromkeys([*named, *without.differing_columns]))
    return replace(d, extra_rows=without.extra_rows + moved, missing_rows=without.missing_rows + moved,
                   extra_copies=without.extra_copies, changed_rows=without.changed_rows + moved,
                   differing_columns=columns, sample=(*without.sample, *d.sample)[:max(len(d.sample), 10)])
