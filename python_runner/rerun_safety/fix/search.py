"""Verified fixes: each root cause's candidates (candidates.py) proven or refused by game days.

A candidate is applied to a copy of the project inside the run's work root (the user's files are
never touched), and the model with everything the first game day judged below it is replayed in
every scenario of that game day. It counts only when every one of those models is `safe` there and
each one's clean build produces what it produced in the first game day (the reference outputs'
fingerprints, diff/fingerprint.py): a fix must not change the data, only make it survive a rerun.
Root causes whose subtrees share no model are verified together, one candidate each, in one game
day (each subtree judges its own change alone); the next round tries the next candidate of those
not verified. The first candidate verified is reported, as a unified diff of the user's file; the
others tried are listed with why each failed.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path


from ..errors import RerunSafetyError, first_line
from ..gameday.core import Finished, Gameday
from ..gameday.options import GamedayOptions
from ..gameday.scenarios import with_baseline
from ..partial_parse import write_partial_parse
from ..results import UNSAFE, Fix, GamedayReport, ModelVerdict, Tried, Verdict
from ..warehouse.base import PARSE_PREFIX, make_locked_dir
from .candidates import candidates
from .jinja import sets_config
from .target import Candidate, SideTable, Target
from .overrides import model_override, package_var
from .package_vars import in_effect, needed, number, window_vars
from .copies import copy_package as _copy_package, not_copied as _not_copied, relink as _relink
from .measured import late_batches as _late_batches, lookback as _lookback, lookback_seconds as _lookback_seconds
from .measured import microbatch_lookback as _microbatch_lookback
from .project_files import kept as _kept, model_file as _model_file, outside_package as _outside_package
from .project_files import package_yaml as _package_yaml, read as _read
from .project_files import readers as _readers, texts as _texts, yaml_data as _yaml
from ..vars import parse_vars
from ..gameday.side_effects import per_run

class _Prefixed:
    """The progress of a verifying game day, told as part of the fix search."""

    def __init__(self, inner, prefix: str):
        self.inner, self.prefix = inner, prefix

    def start(self, total: int, description: str) -> None:
        self.inner.start(total, f"{self.prefix}: {description}")

    def advance(self, description: str) -> None:
        self.inner.advance(f"{self.prefix}: {description}")

    def scenario(self, name: str) -> None:
        self.inner.scenario(name)


def gameday_with_fixes(options: GamedayOptions, progress=None) -> GamedayReport:
    """The game day, then the fix search for each root cause it names."""
    # the fault-free schedule (replay) is what a fix must keep writing (_history_kept): always among them
    scenarios = with_baseline((*options.scenarios, "replay"))
    first = Gameday(replace(options, fingerprints=True, scenarios=scenarios), progress).run_finished()
    report = first.report
    searches = [_Search.of(first, mv) for mv in report.root_causes if mv.verdict in UNSAFE]
    _rounds(first, report, [s for s in searches if s.found])
    return replace(report, fixes=tuple(s.result() for s in searches))


@dataclass
class _Search:
    """One root cause's search: its candidates, the next to try, what failed, the verified one."""

    mv: ModelVerdict
    below: list[str]  # the model and the models judged below it
    text: str = ""  # the model file's text, as read (line ends included)
    rel: Path | None = None
    befores: dict[str, str] = field(default_factory=dict)  # another file a candidate changes -> its text
    found: list[Candidate] = field(default_factory=list)
    why_none: str = ""
    tried: list[Tried] = field(default_factory=list)
    verified: tuple[Candidate, list[str]] | None = None
    seconds: float = 0.0
    note: str = ""
    # a local package's file outside the project folder: (its link in the project, the package's folder)
    outside: tuple[Path, Path] | None = None
    project_dir: Path | None = None

    @classmethod
    def of(cls, first: Finished, mv: ModelVerdict) -> "_Search":
        search = cls(mv, _below(first, mv.unique_id))
        path = _model_file(first, mv.unique_id)
        if path is None or first.project.models[mv.unique_id].language != "sql":
            search.why_none = "no candidate: only a SQL model's file is changed"
            return search
        search.outside, search.project_dir = _outside_package(first, path), first.options.project_dir
        search.text = _read(path)
        # (a local package's file outside the folder: by its link, which the copy points at a copy of the package)
        search.rel = path.relative_to(first.options.project_dir) if search.outside else _relative(
            path, first.options.project_dir)
        search.found, search.why_none = candidates(_target(first, mv, _lf(search.text)))
        search.note = _package_note(first, mv.unique_id, search.outside)
        own = first.project.manifest.nodes[mv.unique_id].package_name == first.project.name
        if not own and search.outside:  # the package's own code, developed beside this project: its file first
            search.found = [*search.found, *(c for c in search._with_overrides(first) if c.path)][:4]
        elif not own:
            search.found = search._with_overrides(first)
        kept = _kept(first, path)
        if kept:  # a file the search cannot change in its copy: only your dbt_project.yml is changed
            search.found = [c for c in search.found if c.path]
            search.note = ""
        made = search._with_vars(first)
        search.found = (made + search.found if not own else search.found + made)[:4]
        if search.found:
            search.why_none = ""
        elif kept:
            search.why_none = "; ".join(x for x in (search.why_none, f"{kept}: no var or config of it in your "
                                                    "dbt_project.yml applies") if x)
        return search

    def _with_vars(self, first: Finished) -> list[Candidate]:
        """For a loss or drift whose window reads a var of time (in the model's file or in the macros it calls,
        a package's lookback): that var set, in your dbt_project.yml for the model's package, to the lateness
        the replay measured plus one batch. Every other model that reads the var is judged with it."""
        uid = self.mv.unique_id
        seconds = _lookback_seconds(first, uid)
        project_yml = first.options.project_dir / "dbt_project.yml"
        if self.mv.verdict not in (Verdict.LOSS, Verdict.DRIFT) or seconds is None or not project_yml.is_file():
            return []
        manifest = first.project.manifest
        node = manifest.nodes[uid]
        package = node.package_name
        before = self.befores.get("dbt_project.yml") or _read(project_yml)
        root, own = _yaml(before), _package_yaml(first, node)
        cli = parse_vars(first.options.vars_yaml)
        out = []
        for var in window_vars(_texts(manifest, node)):
            if var.name in cli:
                continue  # --vars wins over any file
            now = in_effect(var.name, package, cli, root, own, var.default)
            want = needed(var, seconds)
            if number(now) is not None and want <= number(now):
                continue
            text = package_var(_lf(before), package, var.name, want)
            if text is None:
                continue
            self.befores.setdefault("dbt_project.yml", before)
            readers = tuple(u for u in _readers(first, package, var.name) if u not in self.below)
            now_said = f"it was {now:g}" if isinstance(now, (int, float)) else (f"it was {now}" if now is not None
                                                                                else "it had no value")
            also = f"; also read by {', '.join(first.project.models[u].name for u in readers)}, judged with it" \
                if readers else ""
            out.append(Candidate(
                f"var {var.name} = {want}", f"the var `{var.name}` that the window reads set to {want} "
                f"({var.unit_name}s; {now_said}) for {package} under `vars:` in your dbt_project.yml: each run "
                f"re-reads what the replay showed arriving late{also}", text, path="dbt_project.yml", also=readers))
        return out

    def judged(self, first: Finished, cand: Candidate) -> list[str]:
        """The models a candidate's game day judges for it: the root cause and below, and what else it reaches."""
        plan = list(self.below)
        for u in cand.also:
            plan += [b for b in _below(first, u) if b not in plan]
        return plan

    def _with_overrides(self, first: Finished) -> list[Candidate]:
        """A package model's config-only candidates, each first as an override in the user's
        dbt_project.yml where the package's file does not set those keys itself (its config() wins)."""
        node = first.project.manifest.nodes[self.mv.unique_id]
        project_yml = first.options.project_dir / "dbt_project.yml"
        out = []
        for cand in self.found:
            settings = dict(cand.settings)
            if settings and not sets_config(_lf(self.text), settings) and project_yml.is_file():
                before = self.befores.setdefault("dbt_project.yml", _read(project_yml))
                text = model_override(_lf(before), list(node.fqn), settings)
                if text is not None:
                    out.append(replace(cand, name=f"{cand.name} (dbt_project.yml)", text=text, path="dbt_project.yml",
                                       description=f"{cand.description}; set for {node.package_name}'s model under "
                                       "`models:` in your dbt_project.yml, which `dbt deps` leaves alone"))
            out.append(cand)
        return out[:4]

    def file_of(self, cand: Candidate) -> tuple[Path, str]:
        """The file a candidate changes (relative to the project) and its text as read."""
        if cand.path:
            return Path(cand.path), self.befores[cand.path]
        assert self.rel is not None
        return self.rel, self.text

    @property
    def next(self) -> Candidate | None:
        if self.verified:
            return None
        for cand in self.found[len(self.tried):]:
            # a log's declaration only where every delete tried could only destroy the history: a delete by
            # a column that keeps one row per batch (a batch's summary) says the rows are data, and a rerun
            # that adds a second one is the defect, which a declaration would hide
            if cand.declaration and not all(t.why.startswith(HISTORY) for t in self.tried):
                continue  # (the last candidates: the search ends)
            return cand
        return None

    def result(self) -> Fix:
        mv, rel = self.mv, self.rel
        if self.verified is None:
            return Fix(mv.name, mv.verdict, False, path=str(rel or ""), tried=tuple(self.tried),
                       why_none=self.why_none if not self.found else "", seconds=self.seconds)
        cand, safe = self.verified
        rel, before = self.file_of(cand)
        after = _as_read(cand.text, before)
        named = rel
        if self.outside is not None and not cand.path:  # the package's file: its patch is the package's
            link, _root = self.outside
            named = rel.relative_to(link)
            rel = Path(os.path.relpath(_root / named, self.project_dir)) if self.project_dir else rel
        patch = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                             fromfile=f"a/{named}", tofile=f"b/{named}"))
        note = "" if cand.path else self.note
        if cand.declaration:
            note = "; ".join(x for x in (note, DECLARATION_NOTE) if x)
        return Fix(mv.name, mv.verdict, True, cand.name, cand.description, str(rel), patch, tuple(safe),
                   tuple(self.tried), seconds=self.seconds, note=note,
                   before_sha256=hashlib.sha256(before.encode()).hexdigest(), text=after,
                   declaration=cand.declaration)


HISTORY = "it deletes the history"  # why a change is refused by _history_kept
DECLARATION_NOTE = ("a declaration of what the table is for, not a change of what runs: --apply leaves it to you. "
                    "Apply it if a row per run is the table's purpose (a run log); a table of one row per batch "
                    "(a batch's summary) wants that batch's row replaced instead, and a rerun that adds a second "
                    "one is the defect")


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _as_read(text: str, before: str) -> str:
    """A candidate's text (made on `\n` line ends) with the line ends of the file it changes."""
    return text.replace("\n", "\r\n") if "\r\n" in before else text


def _rounds(first: Finished, report: GamedayReport, searches: list[_Search]) -> None:
    """Rounds of verifying game days: each round applies the next candidate of as many root causes as
    have disjoint subtrees (no model below two of them, so each one's models judge its own change
    alone) and replays their subtrees together: one game day verifies several fixes."""
    n = 0
    alone: set[int] = set()  # searches whose candidate stopped a shared game day: tried alone next
    while True:
        pending = [s for s in searches if s.next is not None]
        if not pending:
            return
        batch: list[_Search] = []
        taken: set[str] = set()  # the models judged, and the files changed, by the batch's candidates
        for s in pending:
            if id(s) in alone and batch:
                continue
            mine = {*s.judged(first, s.next), str(s.file_of(s.next)[0])}
            if not taken & mine:
                batch.append(s)
                taken |= mine
            if id(s) in alone:
                break
        started = time.perf_counter()
        stopped, judged = _verify(first, report, [(s, s.next) for s in batch], str(n))
        n += 1
        for s in batch:
            s.seconds += time.perf_counter() - started
            if stopped and len(batch) > 1:
                alone.add(id(s))  # which change stopped it is not known: each tried alone
            elif stopped:
                s.tried.append(Tried(s.next.name, s.next.description, stopped))
            else:
                why, safe, then = judged[id(s)]
                cand = s.next
                if why is None:
                    s.verified = (cand, safe)
                    continue
                s.tried.append(Tried(cand.name, cand.description, why))
                if not cand.follows:  # it mended the defect and showed another: that one's candidates, on top
                    s.found[len(s.tried):len(s.tried)] = [replace(
                        c, name=f"{cand.name}, then {c.name}", description=f"{cand.description}; then {c.description}",
                        follows=True, settings=()) for c in then]


def _target(first: Finished, mv: ModelVerdict, text: str) -> Target:
    plan, uid = first.plan, mv.unique_id
    m = first.project.models[uid]
    pk = m.partition_key if isinstance(m.partition_key, dict) else {}
    replayed = _replay_side(first)
    side = tuple(SideTable(r.name, r.columns, r.label, per_run(replayed[r.label]) if r.label in replayed else 0)
                 for r in (plan.facts.side.relations if plan.facts.side else ()) if uid in r.writers and r.columns)
    microbatch, now = _microbatch_lookback(first, uid)
    return Target(mv.name, mv.verdict, text, m.materialized, m.strategy, tuple(m.key),
                  tuple(c for c, _ in plan.facts.reference_columns.get(uid, ())),
                  keys=tuple(plan.facts.unique_keys.get(uid, ())),
                  column_types=tuple(plan.facts.reference_columns.get(uid, ())),
                  granularity=str(pk.get("granularity") or "") or None, lookback=_lookback(first, mv.unique_id),
                  late=_late_batches(first, mv.unique_id) > 0, side=side, dialect=str(first.dialect),
                  microbatch_lookback=microbatch, lookback_now=now, overlap_only=mv.overlap_only)


def _replay_side(finished: Finished) -> dict[str, dict]:
    """The side relations that the fault-free schedule (the replay scenario) left other than a one-shot
    build, by label: what `side_effects.judge` found there."""
    return {f["relation"]: f for f in finished.side_found.get("replay", ())}


def _history_kept(first: Finished, second: Finished, below: list[str]) -> str:
    """Why the changed project's fault-free schedule keeps less of a history than the original's ('' when
    it keeps it): a relation the models' hooks write a row per run into (a run log) must hold, after the
    replay, what it held before the change. A change that turns a log into one row per model passes every
    comparison with a one-shot build, and destroys the history."""
    before, after = _replay_side(first), _replay_side(second)
    known = {r.label: r for r in (second.plan.facts.side.relations if second.plan.facts.side else ())}
    for rel in first.plan.facts.side.relations if first.plan.facts.side else ():
        found = before.get(rel.label)
        if found is None or not set(rel.writers) & set(below) or not per_run(found):
            continue
        now = after.get(rel.label)
        if now is None and known.get(rel.label) is not None and known[rel.label].log_of is not None:
            continue  # declared a log there, and one row per run it held
        rows = now["rows"] if now is not None else found["reference_rows"]
        if rows < found["rows"]:
            return (f"{HISTORY} a fault-free schedule keeps in {rel.label} ({rows:,} row"
                    f"{'s' if rows != 1 else ''} instead of {found['rows']:,} after {found['runs']} runs): the hook "
                    "records every run; where one row per run is by design, declare it a log "
                    "(meta.rerun_safety.log_tables)")
    return ""


def _judge(first: Finished, report: GamedayReport, second: Finished, again: GamedayReport,
           below: list[str], root: str = "") -> tuple[str | None, list[str]]:
    before = {m.unique_id: m for m in report.models}
    after = {m.unique_id: m for m in again.models}
    own: list[str] = []  # below the root cause, nondeterministic on their own before and after (_not_safe)
    for uid in below:
        was, now = before.get(uid), after.get(uid)
        name = was.name if was else uid
        if now is None:
            return f"{name} was not judged in the game day of the changed project", []
        why = _not_safe(was, now, root=uid == root)
        if why:
            return f"{name} {why}", []
        if now.verdict == Verdict.NONDETERMINISTIC:
            own.append(uid)
    why = _side_changed(first, second, below) or _history_kept(first, second, below)
    if why:
        return why, []
    for uid in below:
        a, b = first.plan.facts.fingerprints.get(uid), second.plan.facts.fingerprints.get(uid)
        if a is None or b is None:
            continue
        volatile = before[uid].nondeterministic_columns if uid in before else ()
        if not a.same(b, volatile):
            name = before[uid].name if uid in before else uid
            what = (f"{b.rows:,} rows instead of {a.rows:,}" if a.rows != b.rows else
                    "other values in " + ", ".join(a.differing_columns(b)[:5]))
            return f"it changes what a clean build of {name} produces ({what})", []
    return None, [before[u].name if u not in own else f"{before[u].name} (but for its own nondeterminism)"
                  for u in below if u in before]


def _side_changed(first: Finished, second: Finished, below: list[str]) -> str:
    """Why a relation the models' hooks write holds other rows after a clean build of the changed
    project ('' when each holds what it held in the first game day's)."""
    after = {r.label: r for r in (second.plan.facts.side.relations if second.plan.facts.side else ())}
    for rel in first.plan.facts.side.relations if first.plan.facts.side else ():
        if rel.fingerprint is None or not set(rel.writers) & set(below):
            continue
        now = after.get(rel.label)
        if now is None or now.fingerprint is None:
            return f"the clean build of the changed project leaves no {rel.label}"
        if not rel.fingerprint.same(now.fingerprint):
            what = (f"{now.fingerprint.rows:,} rows instead of {rel.fingerprint.rows:,}"
                    if now.fingerprint.rows != rel.fingerprint.rows else "other values")
            return f"it changes what a clean build writes to {rel.label} ({what})"
    return ""


def _not_safe(was: ModelVerdict | None, now: ModelVerdict, root: bool = True) -> str:
    """Why a model of the changed project is not shown safe ('' when it is): each scenario must be
    `safe`, or `untested` where the first game day did not exercise it either (a sparse input whose
    half-committed batch holds no rows, say): what no replay can show is not held against a fix. A model
    below the root cause (`root` False) that was nondeterministic in the first game day (its own ties) and
    is now nondeterministic and nothing else, in the same columns and no others, has a defect of its own,
    not the fix's: not held against it either."""
    if now.verdict == Verdict.SAFE:
        return ""
    # scenarios the first game day did not exercise: untested there, or no input rows in its deciding step
    # (its verdict came from the runs around it)
    idle = {s.name for s in (was.scenarios if was else ()) if s.verdict == Verdict.UNTESTED or s.input_rows == 0}
    # its own ties, known before the change: the model's verdict is its nondeterminism (what differs anywhere
    # is in the columns that change between builds), in the same columns as before, and no other
    if (not root and was is not None and now.verdict == Verdict.NONDETERMINISTIC
            and any(s.verdict == Verdict.NONDETERMINISTIC for s in was.scenarios)
            and set(now.nondeterministic_columns) <= set(was.nondeterministic_columns)):
        return ""
    for s in sorted(now.scenarios, key=lambda x: x is not now.worst_scenario):
        if s.verdict == Verdict.SAFE or (s.verdict == Verdict.UNTESTED and s.name in idle):
            continue
        if s.verdict == Verdict.UNTESTED:
            return f"is untested in {s.name}, which the first game day exercised"
        stays = was is not None and was.verdict == now.verdict
        return f"{'stays' if stays else 'is'} {now.verdict}{_where(now)}"
    return "" if now.verdict == Verdict.UNTESTED else f"is {now.verdict}"


def _where(m: ModelVerdict) -> str:
    s = m.worst_scenario
    if s is None or s.verdict == Verdict.SAFE:
        return ""
    parts = [f"{n:,} {what}" for n, what in ((s.extra_rows, "extra"), (s.missing_rows, "missing"),
                                              (s.duplicate_keys, "dup keys"), (s.changed_rows, "changed")) if n]
    if not parts and s.verdict == Verdict.ERROR and s.message:  # what failed: the changed model's own error
        words = " ".join(s.message.split())
        parts = [words if len(words) <= 200 else words[:199] + "…"]
    return f" ({s.name}: {', '.join(parts)})" if parts else f" ({s.name})"


def _package_note(first: Finished, uid: str, outside: tuple[Path, Path] | None = None) -> str:
    """For a model of an installed package: that the patch changes the package's installed copy; of a local
    package outside the project folder: that the patch is for that folder."""
    package = first.project.manifest.nodes[uid].package_name
    if outside is not None:
        where = os.path.relpath(outside[1], first.options.project_dir)
        return (f"the file is in the local package {package} at {where}, outside the project folder: the patch is "
                f"relative to that folder (`git apply` there); --apply leaves it to you")
    if package == first.project.name:
        return ""
    return (f"the file is the installed copy of package {package}: `dbt deps` replaces it; keep the patch with "
            "the project (or send it to the package), or override the model's config in your dbt_project.yml")


def _relative(path: Path, project_dir: Path) -> Path:
    try:
        return path.resolve().relative_to(project_dir.resolve())
    except ValueError:
        return path


def _below(first: Finished, uid: str) -> list[str]:
    """The model and every model the first game day judged below it, in its order."""
    plan = first.plan
    return [m.unique_id for m in plan.judged
            if m.unique_id == uid or uid in plan.project.ancestors([m.unique_id])]


def _verify(first: Finished, report: GamedayReport, changes: list[tuple[_Search, Candidate]],
            tag: str) -> tuple[str | None, dict[int, tuple[str | None, list[str]]]]:
    """One game day of a copy of the project with these changes, over their subtrees. Returns why it
    stopped (None: it ran), and per search None when its change is verified (with the models judged
    safe), else why not."""
    o = first.options
    folder = o.work_root / f"{PARSE_PREFIX}{first.run_id}_fix{tag}"
    lock = make_locked_dir(folder)  # swept after a kill, as a run's parse folder
    try:
        copy = folder / "project"
        shutil.copytree(o.project_dir, copy, ignore=_not_copied(o.work_root), symlinks=True)
        _relink(copy, o.project_dir)
        if first.parse_state:
            write_partial_parse(copy, first.parse_state)
        for search, cand in changes:
            if search.outside is not None and not cand.path:
                _copy_package(folder, copy, *search.outside)
            rel, before = search.file_of(cand)
            (copy / rel).write_bytes(_as_read(cand.text, before).encode("utf-8"))
        models = first.project.models
        below = [u for s, c in changes for u in s.judged(first, c)]
        profiles = o.profiles_dir or (str(o.project_dir) if (o.project_dir / "profiles.yml").exists() else None)
        options = replace(o, project_dir=copy, profiles_dir=profiles, select=tuple(models[u].selector for u in below),
                          exclude=(), output_dir=folder / "out", fix=False, fingerprints=True, baseline=None,
                          keep_sandboxes=False, verifying=True)
        what = ", ".join(f"{s.mv.name} ({c.name})" for s, c in changes)
        try:
            second = Gameday(options, _Prefixed(first.progress, f"fix {what}")).run_finished()
            again = second.report
        except RerunSafetyError as err:
            return f"the game day of the changed project stopped: {first_line(err)}", {}
        return None, {id(s): (*_judge(first, report, second, again, s.judged(first, c), s.mv.unique_id),
                              _then(second, again, s, c))
                      for s, c in changes}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        lock.close()


def _then(second: Finished, again: GamedayReport, search: _Search, cand: Candidate) -> list[Candidate]:
    """When the change mended the root cause's defect but its model shows another one (a first build that
    failed, then ran and appended what it read again), that defect's candidates on the changed text,
    made from what the changed project's game day measured (its reference's keys, say). A change that left
    it unsafe only where two runs overlap mended every defect of runs one at a time: the overlap's next."""
    now = next((m for m in again.models if m.unique_id == search.mv.unique_id), None)
    if now is None or now.verdict not in UNSAFE or cand.path:
        return []
    if now.verdict == search.mv.verdict and not (now.overlap_only and not search.mv.overlap_only):
        return []
    found, _ = candidates(_target(second, now, _lf(cand.text)))
    return [c for c in found if c.text != _lf(cand.text)]


