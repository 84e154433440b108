"""Candidate fixes of a root cause, as new texts of its model file: pure text work, no I/O.

A candidate is only a guess until a game day of the changed project proves it (fix/search.py):
each one here is made from the defect's class and what the model's file says, and changes as
little of it as the defect needs:

  keyed      duplicates from an append (or delete+insert / merge without unique_key): dbt's
             `delete+insert` on a key, so re-read rows replace themselves instead of adding
  align      a partition overwrite whose window starts inside a partition (loss: the partition is
             replaced by the window's part of it): the window's start moved back to the start of
             its partition
  widen      a watermark or lookback that a half-committed batch or late rows outrun (loss): the
             window widened by the batches the replay showed, plus one, with `keyed` where the
             strategy would append what it reads again
  order      a list aggregate without ORDER BY (nondeterministic): ordered by the value it gathers
  tiebreak   an ordering with ties (nondeterministic): the key, or every output column, added to
             each window's ORDER BY
  hook       a hook that inserts into another relation on every run (side_effect): the rows of the
             run's batch deleted from it first, keyed by one column of what it inserts
  this       a CTE reading {{ this }} outside is_incremental() (the first build fails, a full refresh
             reads the table it replaces): the CTE moved inside the is_incremental() branch
  serialise  a model unsafe only when two runs of a batch overlap (the concurrent scenario): the
             package's `rerun_safety.serialize_runs()` as its pre_hook, so a second run waits for
             the first's commit and then replaces what it wrote

Never: anything that changes what a clean build produces (search.py checks it), a change outside the
model's own file (search.py may put a package model's config keys into dbt_project.yml instead:
overrides.py), or a guess at a lost row.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..cadence import SECONDS
from .jinja import INCREMENTAL_BLOCK, close_bracket, literal, set_config, top_items
from .relations import hook_candidates, this_moved
from .target import Candidate, SideTable, Target
from ..results import Verdict

__all__ = ["Candidate", "SideTable", "Target", "candidates", "set_config", "this_moved", "watermarks", "tiebroken",
           "ordered_aggregates", "widened", "day_valued"]

UNKEYED = (None, "", "append", "default")
KEYED_STRATEGIES = ("delete+insert", "merge")
OVERWRITES = ("partition_overwrite", "insert_overwrite")


# ------------------------------------------------------------------ the incremental filter
_WATERMARK = re.compile(
    r"(?P<col>[A-Za-z_][\w.]*\s*\([^()]*\)|[A-Za-z_][\w.]*|\"[^\"]+\")\s*(?P<op>>=|>)\s*\(\s*select\s+(?P<expr>.+?)\s+from\s+"
    r"\{\{-?\s*this\s*-?\}\}\s*\)", re.S | re.I)


@dataclass(frozen=True)
class Watermark:
    """`col > (select expr from {{ this }})` in the model's is_incremental() block."""

    start: int
    end: int
    column: str
    op: str
    expr: str

    def rewritten(self, raw: str, expr: str) -> str:
        return raw[:self.start] + f"{self.column} >= (select {expr} from {{{{ this }}}})" + raw[self.end:]


def watermarks(raw: str) -> list[Watermark]:
    out = []
    for block in INCREMENTAL_BLOCK.finditer(raw):
        for m in _WATERMARK.finditer(raw, block.start(1), block.end(1)):
            out.append(Watermark(m.start(), m.end(), m.group("col"), m.group("op"), " ".join(m.group("expr").split())))
    return out


_LOOKBACK = re.compile(r"(?is)^(?P<base>.+?)\s*-\s*interval\s*'\s*(?P<n>\d+)\s*(?P<unit>[a-z]+?)s?\s*'$")


def _seconds(n: str, unit: str) -> int | None:
    size = SECONDS.get(unit.lower().rstrip("s"))
    return int(n) * size if size else None


def widened(expr: str, lookback: str) -> str | None:
    """`expr` reaching back `lookback` earlier: an existing `- interval '...'` is replaced by the longer of
    the two (None: it already reaches that far), else the interval is subtracted."""
    n, unit = lookback.split()
    m = _LOOKBACK.match(expr.strip())
    if m:
        have, need = _seconds(m.group("n"), m.group("unit")), _seconds(n, unit)
        if have is not None and need is not None:
            return None if have >= need else f"{m.group('base')} - interval '{lookback}'"
    return f"{expr} - interval '{lookback}'"


def _aligned(expr: str) -> bool:
    return bool(re.match(r"(?i)\s*(date_trunc|cast\s*\(\s*date_trunc)\b", expr)) or "{{" in expr


# ------------------------------------------------------------------ window orderings
_OVER = re.compile(r"\bover\s*\(", re.I)
_ALIAS = re.compile(r'\s*(?:as\s+)?("?)([A-Za-z_]\w*)\1', re.I)


_AS = re.compile(r'\bas\s+("?)([A-Za-z_]\w*)\1', re.I)


def computed_columns(raw: str) -> set[str]:
    """The names the text gives to what it computes (`... as name`, a window's `over (...) name`), lower case:
    not columns of the rows a window of the same select orders."""
    names = {m.group(2).lower() for m in _AS.finditer(raw)}
    for m in _OVER.finditer(raw):
        close = close_bracket(raw, m.end())
        alias = _ALIAS.match(raw, close + 1) if close >= 0 else None
        if alias and alias.group(2).lower() not in ("from", "over", "as"):
            names.add(alias.group(2).lower())
    return names


def tiebroken(raw: str, extra: tuple[str, ...]) -> str | None:
    """The text with `extra` columns appended to each window's ORDER BY that lacks them (None: no
    window orders anything)."""
    edits = []
    windows = [(m, close_bracket(raw, m.end())) for m in _OVER.finditer(raw)]
    # the columns windows compute (`... over (...) as rn`) are not columns to order a window by
    computed = {a.group(2).lower() for _m, close in windows if close >= 0
                if (a := _ALIAS.match(raw, close + 1)) and a.group(2).lower() not in ("from", "over", "as")}
    for m, close in windows:
        if close < 0:
            continue
        inside = raw[m.end():close]
        order = re.search(r"\border\s+by\b", inside, re.I)
        if not order:
            continue
        named = {t.strip().strip('"').lower() for t in re.split(r"[\s,()]+", inside[order.end():]) if t.strip()}
        add = [c for c in extra if c.lower() not in named and c.lower() not in computed]
        if add:
            end = m.end() + len(inside.rstrip())
            edits.append((end, ", " + ", ".join(add)))
    if not edits:
        return None
    for at, text in sorted(edits, reverse=True):
        raw = raw[:at] + text + raw[at:]
    return raw


_AGGREGATE = re.compile(r"\b(string_agg|array_agg|group_concat|list)\s*\(", re.I)


def _in_jinja(raw: str, at: int) -> bool:
    """Whether position `at` lies inside a Jinja expression or statement ({{ ... }}, {% ... %})."""
    opened = max(raw.rfind("{{", 0, at), raw.rfind("{%", 0, at))
    if opened < 0:
        return False
    closed = max(raw.rfind("}}", opened, at), raw.rfind("%}", opened, at))
    return closed < 0


def ordered_aggregates(raw: str) -> str | None:
    """The text with each list-building aggregate that has no ORDER BY ordered by the value it gathers
    (None: there is none): equal values then list alike whatever order the rows came in."""
    edits = []
    for m in _AGGREGATE.finditer(raw):
        if _in_jinja(raw, m.start()):
            continue  # a macro's aggregate ({{ fivetran_utils.string_agg(...) }}): its arguments are not SQL
        close = close_bracket(raw, m.end())
        if close < 0 or re.search(r"\border\s+by\b", raw[m.end():close], re.I):
            continue
        items = top_items(raw, m.end(), close)
        if not items:
            continue
        value = raw[items[0][0]:items[0][1]].strip()
        if value.lower().startswith("distinct "):
            value = value[len("distinct "):].strip()
        end = m.end() + len(raw[m.end():close].rstrip())
        edits.append((end, f" order by {value}"))
    if not edits:
        return None
    for at, text in sorted(edits, reverse=True):
        raw = raw[:at] + text + raw[at:]
    return raw


# ------------------------------------------------------------------ the catalogue
def _rewrite_all(raw: str, marks: list[Watermark], expr_of) -> str:
    """Every watermark of the block rewritten as `column >= (select expr_of(mark) from {{ this }})`."""
    for mark in sorted(marks, key=lambda m: -m.start):
        raw = mark.rewritten(raw, expr_of(mark))
    return raw


def _keyed(t: Target, raw: str, key: tuple[str, ...], why: str) -> Candidate:
    settings = {"incremental_strategy": "delete+insert", "unique_key": key}
    return Candidate(f"keyed on {', '.join(key)}",
                     f"incremental_strategy='delete+insert', unique_key={literal(key)}: {why}",
                     set_config(raw, **settings), tuple(settings.items()) if raw == t.raw else ())


_DAY_TYPES = ("date", "text", "varchar", "character varying", "string")
_MAX_OF = re.compile(r'(?i)^max\(\s*"?(\w+)"?\s*\)$')


def day_valued(t: Target, mark: Watermark) -> bool:
    """The watermark is `max(<column>)` of an output column that holds days (a date, or text such as
    '2024-01-31'): `>=` then re-reads a whole day."""
    m = _MAX_OF.match(mark.expr.strip())
    types = {c.lower(): d.lower() for c, d in t.column_types}
    return bool(m) and types.get(m.group(1).lower(), "").startswith(_DAY_TYPES)


def _windows(t: Target, marks: list[Watermark]) -> list[tuple[str, str]]:
    """The incremental filter's variants for a loss, smallest change first: (new text, what it does)."""
    out = []
    if any(m.op == ">" for m in marks) and all(day_valued(t, m) for m in marks):
        out.append((_rewrite_all(t.raw, marks, lambda m: m.expr),
                    "the incremental filter re-reads the last day (`>=` where it had `>`: a day that a "
                    "half-committed batch left half done is read again)"))
    if t.lookback and any(widened(m.expr, t.lookback) for m in marks):
        out.append((_rewrite_all(t.raw, marks, lambda m: widened(m.expr, t.lookback) or m.expr),
                    f"the incremental window re-reads the last {t.lookback} (what a half-committed batch and "
                    "the latest rows left behind)"))
    return out


def _overwrite(t: Target, marks: list[Watermark]) -> list[Candidate]:
    """A partition overwrite whose window starts inside a partition: the window aligned (and widened)."""
    if not all(not _aligned(m.expr) for m in marks):
        return []
    g = t.granularity
    aligned = Candidate(
        "align the window", f"the incremental window starts at the start of its {g} (date_trunc('{g}', ...)): "
        "a partition is replaced only with all of its rows",
        _rewrite_all(t.raw, marks, lambda m: f"date_trunc('{g}', {m.expr})"))
    if t.verdict != Verdict.LOSS or not t.lookback or not any(widened(m.expr, t.lookback) for m in marks):
        return [aligned]
    wider = Candidate(
        "align and widen the window", f"the incremental window reaches back {t.lookback}, from the start of that "
        f"{g}: a partition is replaced only with all of its rows, late ones included",
        _rewrite_all(t.raw, marks, lambda m: f"date_trunc('{g}', {widened(m.expr, t.lookback) or m.expr})"))
    # rows that arrive after a later batch than their time's land in partitions an aligned window
    # alone does not read again
    return [wider, aligned] if t.late else [aligned, wider]


def candidates(t: Target) -> tuple[list[Candidate], str]:
    """The candidates for this root cause, most likely first (at most three), or none and why."""
    moved = this_moved(t.raw)
    if moved is not None:
        return [Candidate("move the read of this", "the CTE that reads {{ this }} moved inside the "
                          "is_incremental() branch: the first build (and a full refresh) no longer reads the "
                          "relation it creates", moved)], ""
    if t.overlap_only:
        return _serialised(t)
    return DEFECTS.get(t.verdict, _rows)(t)


SERIALISE_HOOK = "{{ rerun_safety.serialize_runs() }}"
_PRE_HOOK = re.compile(r"\bpre[_-]hook\s*=")


def _serialised(t: Target) -> tuple[list[Candidate], str]:
    """Runs of the model made to wait for one another (unsafe only when two runs overlap)."""
    if t.materialized != "incremental":
        return [], f"no candidate for a {t.materialized} model unsafe when two runs overlap"
    if _PRE_HOOK.search(t.raw):
        return [], (f"no candidate: its config() sets a pre_hook already; add `{SERIALISE_HOOK}` to it (a second "
                    "run then waits for the first's commit)")
    return [Candidate("serialise its runs", f"pre_hook={literal(SERIALISE_HOOK)}: a run takes the model's run lock "
                      "before it writes, so a second run of the same batch waits for the first's commit and then "
                      "replaces what it wrote instead of writing the batch twice", set_config(t.raw, pre_hook=SERIALISE_HOOK))], ""


def _rows(t: Target, windows: bool = False) -> tuple[list[Candidate], str]:
    """An incremental model's rows lost, copied or changed: its strategy or its window (`windows`: a
    loss, which a window that reads again what arrives late can cure)."""
    if t.materialized != "incremental":
        return [], f"no candidate for a {t.materialized} model with this defect ({t.verdict})"
    strategy = (t.strategy or "").lower() or None
    unkeyed = strategy in UNKEYED or (strategy in KEYED_STRATEGIES and not t.key)
    marks = watermarks(t.raw)
    out: list[Candidate] = []
    if strategy in OVERWRITES and marks and t.granularity:
        out = _overwrite(t, marks)
    elif windows and marks and (variants := _windows(t, marks)):
        for text, what in variants:
            if unkeyed:  # the window is what differs between these: the most likely key only
                out += [_keyed(t, text, k, what + f", and rows read again replace themselves by {', '.join(k)}")
                        for k in t.keys[:1]]
            else:
                out.append(Candidate("re-read the window", what + f" ({strategy} on {', '.join(t.key)} replaces "
                                     "rows read again)", text))
    elif t.verdict.row_defect and unkeyed:
        out = [_keyed(t, t.raw, k, "dbt deletes the rows of the keys a run reads again before inserting them")
               for k in t.keys[:2]]
    if out:
        return out[:3], ""
    if unkeyed and not t.keys and t.verdict.row_defect:
        return [], ("no candidate: no key holds its clean build's output unique (its configured or tested key, a "
                    "column named like an id, or one with its time column); declare one with a `unique` test")
    if not marks:
        return [], ("no candidate: its incremental filter is not of the shape `<column> >= (select ... from "
                    "{{ this }})` inside `{% if is_incremental() %}`, and its strategy is not an append")
    return [], f"no candidate for {t.verdict} with strategy {strategy or 'append'} and this incremental filter"


def _tiebreaks(t: Target, aggregates: bool = True) -> tuple[list[Candidate], str]:
    out = []
    ordered = ordered_aggregates(t.raw) if aggregates else None
    if ordered is not None:
        out.append(Candidate("order the aggregates", "each string_agg/array_agg without ORDER BY ordered by the "
                             "value it gathers: the list is the same whatever order the rows come in", ordered))
    computed = computed_columns(t.raw)
    for extra, what in ((t.key, "the key"), (t.columns, "every output column")):
        # (a column the model computes, `... as noise`, is not in scope where its windows order rows)
        extra = tuple(c for c in extra if c.lower() not in computed)
        if not extra:
            continue
        text = tiebroken(t.raw, tuple(extra))
        if text is not None and text not in [c.text for c in out]:
            out.append(Candidate(f"tie-break by {what}", f"{', '.join(extra)} added to each window's ORDER BY: "
                                 "rows that tie are ordered the same way in every build", text))
    if out:
        return out, ""
    macro = next((m for m in _AGGREGATE.finditer(t.raw) if _in_jinja(t.raw, m.start())), None)
    if aggregates and macro is not None:
        call = t.raw[t.raw.rfind("{{", 0, macro.start()):t.raw.find("}}", macro.start()) + 2]
        return [], (f"no candidate: its list aggregate is a macro's (`{' '.join(call.split())}`), whose arguments "
                    "take no ORDER BY: order what it gathers in the macro, or write the engine's own aggregate "
                    "with an ORDER BY")
    return [], ("no candidate: no window function or list aggregate orders its rows here; a function such as "
                "random() or the clock has no deterministic replacement that keeps the clean build's output")


def _microbatch(t: Target) -> list[Candidate]:
    """A microbatch model that loses or changes rows while rows arrive late: its lookback raised to
    the lateness the replay measured, plus one batch (dbt then re-processes those batches at every run)."""
    n = t.microbatch_lookback
    if (t.strategy or "").lower() != "microbatch" or not n or n <= t.lookback_now:
        return []
    return [Candidate(f"lookback {n}", f"lookback={n}: each run processes again the last {n} batches before "
                      f"its own (it had {t.lookback_now}), so rows that land late are read in the batch of their "
                      "time", set_config(t.raw, lookback=n), (("lookback", n),))]


def _defect(t: Target, windows: bool) -> tuple[list[Candidate], str]:
    """A loss or drift: the microbatch lookback, then the strategy and window candidates (for drift, the
    strategy alone first: re-reading more is only needed where rows come late), then ties broken in the
    model's windows (a tie broken otherwise at every run moves a value between rows)."""
    found = _microbatch(t)
    why = ""
    for w in ((False, True) if not windows else (True,)):
        more, why = _rows(t, windows=w)
        found += [c for c in more if c.text not in {x.text for x in found}]
    if t.verdict == Verdict.DRIFT or not found:
        ties, _ = _tiebreaks(t, aggregates=False)
        found += [c for c in ties if c.text not in {x.text for x in found}]
    return (found[:3], "") if found else ([], why)


# The candidates of each defect, like the lint's rules: a verdict -> its search (another defect: the
# rows' search, which names why it has none).
DEFECTS = {
    Verdict.SIDE_EFFECT: hook_candidates,
    Verdict.NONDETERMINISTIC: _tiebreaks,
    Verdict.LOSS: lambda t: _defect(t, windows=True),
    Verdict.DUPLICATES: _rows,
    Verdict.DRIFT: lambda t: _defect(t, windows=False),
}
