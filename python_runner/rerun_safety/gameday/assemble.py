"""From the scenarios' results to the report: verdicts, root causes, contamination, notes."""
from __future__ import annotations

import re
import time

from .. import clock
from . import side_effects
from .options import GamedayOptions
from .plan import Plan
from .scenarios import delaying, overlap_only
from .scenarios import scenario as scenario_kind
from .timeline import late_delay
from ..project import Project
from ..results import VERDICT_ORDER, GamedayReport, ModelVerdict, Verdict
from .verdict import (Isolation, chance_scenarios, differs, explained_by_nondeterminism, nondeterminism_shown, reaches,
                      root_causes, verdict_of)


def build_report(options: GamedayOptions, project: Project, plan: Plan, by_model, isolated: Isolation,
                 invocations, started: float, started_at: str, notes=(), side_found=None) -> GamedayReport:
    """The frozen report: verdicts per model, root causes and contamination, notes (`notes`: the run's
    notes so far, in the order found; `side_found`: scenario -> the side relations that differ)."""
    parents = {m.unique_id: plan.parents_in_judged(m) for m in plan.judged}
    # a model reading a relation that another model's hook writes inherits that side effect
    readers = _side_readers(project, plan)
    # a model whose relation another model's hook writes: its state depends on that model too, and no
    # replay shows which of the two a difference comes from
    writers = _hook_writers(project, plan)
    graph = {uid: tuple(sorted(set(ps) | readers.get(uid, set()) | writers.get(uid, set())))
             for uid, ps in parents.items()}
    names = {m.unique_id: m.name for m in plan.judged}
    from .by_name import candidates

    named = {m.unique_id for m in candidates(project, plan.build)}
    by_model = own_nondeterminism(project.models, plan.judged, by_model, graph, set(readers) | set(writers) | named)
    verdicts = {uid: {s: r.verdict for s, r in rs.items()} for uid, rs in by_model.items()}
    for uid, ws in writers.items():
        for scenario, v in verdicts[uid].items():
            bad = sorted(names[w] for w in ws if differs(verdicts.get(w, {}).get(scenario, Verdict.SAFE)))
            if differs(v) and bad:
                isolated.unshown_in(uid, scenario, f"its relation is also written by a hook of {', '.join(bad)}, "
                                                   "which differs too: no replay can tell whose difference it is")
    chance = {uid: chance_scenarios(rs) for uid, rs in by_model.items()}
    roots, contaminated, inconclusive = root_causes(verdicts, graph, isolated, chance,
                                                    _unreached(plan, by_model, parents))
    reads = _clock_reads(invocations)
    models = []
    for m in plan.judged:
        uid = m.unique_id
        scen = tuple(by_model[uid][s] for s in options.scenarios if s in by_model[uid])
        v, volatile = verdict_of(scen)
        reason = next((s.message for s in scen if s.verdict == v and s.message and s.message != OWN_NONDETERMINISM), "")
        if not reason and all(s.message == OWN_NONDETERMINISM for s in scen if s.verdict == v):
            reason = OWN_NONDETERMINISM  # only this reasoning found it (no build of its own showed it)

        models.append(ModelVerdict(
            name=m.name, unique_id=uid, verdict=v, root_cause=uid in roots,
            contaminated_by=tuple(sorted(names[r] for r in contaminated.get(uid, ()))), materialized=m.materialized,
            strategy=m.strategy, key=m.key, parents=tuple(names[p] for p in parents[uid]), scenarios=scen, reason=reason,
            notes=tuple(_model_notes(plan, m, reads.get(uid), scen)), nondeterministic_columns=volatile,
            audit_columns=plan.facts.audit_columns.get(uid, ()), inconclusive=inconclusive.get(uid, ""),
            overlap_only=overlap_only(scen)))
    models.sort(key=lambda mv: (VERDICT_ORDER.index(mv.verdict), not mv.root_cause, mv.name))
    assert plan.facts.timeline
    t = plan.facts.timeline
    run_notes = _run_notes(options, plan, names, notes, side_found or {})
    return GamedayReport(
        project=project.name, adapter=project.adapter, target=project.target_name,
        scenarios=options.scenarios, steps=t.steps,
        cutoffs=tuple(c.isoformat(sep=" ") for c in t.bounds), models=tuple(models),
        wall_time=time.perf_counter() - started, dbt_invocations=len(invocations),
        model_time=sum(r.model_time for r in invocations), started_at=started_at,
        extra={"invocations": [{"wall_s": round(r.wall_time, 4), "model_s": round(r.model_time, 4),
                                "nodes": len(r.nodes)} for r in invocations],
               **({"confinement": {"confined": options.confinement.confined,
                                   "writable": list(options.confinement.writable)}}
                  if options.confinement is not None else {})},
        batch_size=t.batch.label, notes=tuple(run_notes), baseline=options.baseline)

OWN_NONDETERMINISM = ("built again from parents that all matched the reference, at the reference's clock: "
                      "a table's difference there is its own nondeterminism (ties broken another way, "
                      "a value picked from a group, chance)")


def own_nondeterminism(models, judged, by_model, graph, unknown: set[str]):
    """A table or view differs in a scenario while every model it reads matched the reference there:
    it was built again at the scenario's end, from the same rows, at the reference build's clock, so
    the difference can only be its own nondeterminism (the determinism scenario may have broken its
    ties as the reference did). Such a scenario is `nondeterministic`, its differing columns volatile.
    Not where what it reads is not all known (`unknown`: relations read by name, hooks of other
    models), nor over a parent that was not judged. `models`: uid -> Model; `graph`: uid -> judged
    parents."""
    from dataclasses import replace

    ids = {m.unique_id for m in judged}
    out = dict(by_model)
    for m in judged:
        uid = m.unique_id
        if (m.materialized not in ("table", "view") or m.language != "sql" or m.keeps_state or uid in unknown
                or not graph.get(uid) or not _reads_judged_only(models, m, ids)):
            continue
        changed = {}
        # what a build of its own already showed nondeterministic is explained there (verdict_of)
        volatile, rows, ordered = nondeterminism_shown(by_model[uid].values()) or (set(), False, set())
        for s, r in by_model[uid].items():
            if (not scenario_kind(s).rebuilds_on_final_parents() or not r.verdict.row_defect or r.duplicate_keys
                    or r.message or explained_by_nondeterminism(r, volatile, rows, ordered)):
                continue
            if all(by_model.get(p, {}).get(s) is not None and by_model[p][s].verdict == Verdict.SAFE
                   for p in graph[uid]):
                changed[s] = replace(r, verdict=Verdict.NONDETERMINISTIC, message=OWN_NONDETERMINISM,
                                     volatile_columns=r.differing_columns)
        if changed:
            out[uid] = {**by_model[uid], **changed}
    return out


def _unreached(plan: Plan, by_model, parents) -> dict[str, dict[str, frozenset[str]]]:
    """model -> scenario -> the parents (read in its SQL, not through hooks) whose difference there
    cannot be in the model's (verdict.reaches)."""
    out: dict[str, dict[str, frozenset[str]]] = {}
    for uid, ps in parents.items():
        computed = plan.facts.computed_columns.get(uid, {})
        rows = plan.facts.row_columns.get(uid)
        for s, r in by_model.get(uid, {}).items():
            blocked = frozenset(p for p in ps if s in by_model.get(p, {}) and differs(by_model[p][s].verdict)
                                and not reaches(r, by_model[p][s], computed, rows))
            if blocked:
                out.setdefault(uid, {})[s] = blocked
    return out


def _reads_judged_only(models, m, judged: set[str]) -> bool:
    """Every model `m` reads (through ephemeral models) is judged; sources and seeds are inputs."""
    stack, seen = list(m.parents), set()
    while stack:
        p = stack.pop()
        if p in seen or p not in models:
            continue
        seen.add(p)
        if p in judged:
            continue
        if models[p].materialized != "ephemeral":
            return False
        stack.extend(models[p].parents)
    return True


def _run_notes(options: GamedayOptions, plan: Plan, names: dict[str, str], notes, side_found) -> list[str]:
    """What the reader of the whole run should know: the schedule, how inputs arrive, what was left out,
    how the project's code was confined."""
    t = plan.facts.timeline
    run_notes = [f"simulated schedule: {t.steps} {t.batch.label} batches from {t.bounds[0]} to {t.end} "
                 f"(the first build holds everything before {t.bounds[0]}); each run sees the clock at the "
                 "end of its batch", *notes]
    if options.confinement is not None and not options.confinement.confined:
        run_notes.insert(0, options.confinement.note())  # first: nothing but parsing kept production safe

    for src in plan.inputs:
        if src.load_column:
            run_notes.append(f"{src.name}: rows arrive by their load time ({src.load_column}) in every scenario; "
                             f"{plan.facts.late_rows.get(src.unique_id, 0)} of them after a later batch than their event time")
        elif delaying(options.scenarios):
            run_notes.append(f"late: {plan.facts.late_rows.get(src.unique_id, 0)} rows of {src.name} arrive after a later "
                             f"batch than their event time ({plan.late.fraction:.0%} of its rows delayed by "
                             f"{late_delay(plan).label})")
    run_notes += plan.input_notes()
    if plan.facts.audit_columns:
        run_notes.append("audit columns, which only stamp the run's clock (now(), current_timestamp, run_started_at), "
                         "left out of the comparison (compare_audit_columns: true in rerun_safety.yml or a model's "
                         "meta.rerun_safety compares them): " + ", ".join(
                             f"{names[u]}.{c}" for u in sorted(plan.facts.audit_columns, key=names.get)
                             for c in plan.facts.audit_columns[u]))
    for scenario, found in sorted(side_found.items()):
        for f in found:
            if not f["writers"]:
                run_notes.append(f"side effect in {scenario}: {f['relation']} differs from the reference run and "
                                 "only the project's on-run-start/end hooks write it")
    if options.since or options.until:
        run_notes.append(f"slice: only rows from {options.since or 'the start'} to "
                         f"{options.until or 'the end'} were copied; older history is not in any build")
    if options.confinement is not None and options.confinement.confined:
        run_notes.append(options.confinement.note())
    return run_notes


def _model_notes(plan: Plan, m, reads: tuple[set, set] | None, scenarios=()) -> list[str]:
    notes = []
    if plan.facts.empty_first.get(m.unique_id):
        notes.append(plan.facts.empty_first[m.unique_id])
    if reads and reads[0]:
        notes.append(f"reads the clock ({', '.join(sorted(reads[0]))}): each run saw the end of its batch")
    # a loss no larger than the rows that arrive late is put down to them (the partial scenario has
    # its own cause: a half-committed batch)
    late_rows = sum(plan.facts.late_rows.get(s.unique_id, 0) for s in plan.inputs_of(m)
                    if s.load_column or delaying(x.name for x in scenarios))
    lossy = [s for s in scenarios if s.verdict == Verdict.LOSS and scenario_kind(s.name).loss_by_late_rows
             and 0 < s.missing_rows <= late_rows]
    if lossy:
        s = lossy[0]
        notes.append(f"dropped {s.missing_rows} rows in {s.name}, where rows arrive late (by load time, not in "
                     "event-time order): filter on the load time, or re-read a lookback at least as long as the "
                     "lateness with a keyed strategy")
    if m.strategy == "microbatch" and any(s.verdict == Verdict.LOSS for s in scenarios):
        node = plan.project.manifest.nodes.get(m.unique_id)
        size = node.config.get("batch_size") if node is not None else None
        back = node.config.get("lookback", 1) if node is not None else 1
        notes.append(f"microbatch: each run rebuilds the {size} batches from {back} before the run's own up to the "
                     f"run's time (batch_size {size}, lookback {back}); on a {plan.facts.timeline.batch.label} schedule "
                     "the batches in between may never be rebuilt, or rows landing later miss theirs: the lookback "
                     "must cover the time between runs and the lateness")
    unsimulated = sorted(reads[1]) if reads else []
    if m.language == "python":
        unsimulated += list(clock.python_clock_reads(m.raw_code))
    if unsimulated:
        notes.append(f"reads the clock in a way that cannot be simulated ({', '.join(unsimulated)}): its runs "
                     "saw the real time, so a difference may come from the clock")
    return notes


def _clock_reads(invocations) -> dict[str, tuple[set, set]]:
    out: dict[str, tuple[set, set]] = {}
    for res in invocations:
        for node, used, kept in res.clock_reads:
            seen = out.setdefault(node, (set(), set()))
            seen[0].update(used)
            seen[1].update(kept)
    return out


def _side_readers(project: Project, plan: Plan) -> dict[str, set[str]]:
    """Model -> the models whose hooks write a relation it reads as a source."""
    out: dict[str, set[str]] = {}
    if plan.facts.side is None:
        return out
    by_relation = {(r.schema.lower(), r.name.lower()): set(r.writers) for r in plan.facts.side.relations if r.writers}
    for m in plan.judged:
        for s in project.sources_of(m.unique_id):
            src = project.sources[s]
            writers = by_relation.get((src.schema.lower(), src.identifier.lower()), set()) - {m.unique_id}
            if writers:
                out.setdefault(m.unique_id, set()).update(writers)
    return out


_WRITE = re.compile(r"\b(?:delete\s+from|update|insert\s+into|truncate(?:\s+table)?|merge\s+into)\s+"
                    r"(?:\{\{\s*ref\(\s*['\"]([^'\"]+)['\"]\s*\)\s*\}\}|([\w\".]+))", re.I)


def _hook_writers(project: Project, plan: Plan) -> dict[str, set[str]]:
    """Model -> the other judged models whose hooks delete from, update, insert into or truncate its
    relation (named by `ref` or by its identifier)."""
    by_name = {}
    for m in plan.judged:
        by_name.setdefault(m.name.lower(), m.unique_id)
        by_name.setdefault(m.identifier.lower(), m.unique_id)
    hooks, _ = side_effects.hook_texts(project.manifest, [m.unique_id for m in plan.judged])
    out: dict[str, set[str]] = {}
    for writer, text in hooks.items():
        for ref, name in _WRITE.findall(text or ""):
            target = by_name.get((ref or name.replace('"', "").split(".")[-1]).lower())
            if target is not None and target != writer:
                out.setdefault(target, set()).add(writer)
    return out
