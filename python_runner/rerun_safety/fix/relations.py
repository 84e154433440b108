"""Candidates for a model that reads or writes another relation the wrong way (fix/): a CTE that
reads {{ this }} outside is_incremental(), moved inside it; a hook that inserts into another relation
at every run, made to delete the rows of its batch first. Pure text work, no I/O."""
from __future__ import annotations

import ast
import re

import sqlglot
from sqlglot import exp

from .jinja import INCREMENTAL_BLOCK, close_bracket, config_calls, set_config, setting_span, top_items
from .target import Candidate, SideTable, Target


# ------------------------------------------------------------------ {{ this }} outside is_incremental()
_THIS = re.compile(r"\{\{-?\s*this\s*-?\}\}")
_CTE = re.compile(r"(?i)\b([A-Za-z_]\w*|\"[^\"]+\")\s+as\s*\(")


def _spans_inside(raw: str) -> list[tuple[int, int]]:
    """Where {{ this }} may be read: the is_incremental() branches and the config() calls (hooks)."""
    return [b.span(1) for b in INCREMENTAL_BLOCK.finditer(raw)] + [(lo, hi) for lo, hi, _ in config_calls(raw)]


def this_moved(raw: str) -> str | None:
    """The text with each CTE that reads {{ this }} outside is_incremental() wrapped in an
    `{% if is_incremental() %}` of its own (None: there is no such read, or one that is not in a CTE used
    only inside the is_incremental() branch)."""
    inside = _spans_inside(raw)
    outside = [m.start() for m in _THIS.finditer(raw) if not any(a <= m.start() < b for a, b in inside)]
    if not outside:
        return None
    edits: dict[int, tuple[int, str]] = {}
    for at in outside:
        found = None
        for m in _CTE.finditer(raw, 0, at):
            close = close_bracket(raw, m.end())
            if close > at:
                found = (m, close)
                break  # the outermost: a CTE's body may hold subqueries named the same way
        if found is None:
            return None
        m, close = found
        name = m.group(1).strip('"')
        uses = [u.start() for u in re.finditer(rf"(?i)(?<![\w.]){re.escape(name)}(?!\w)", raw)
                if not m.start() <= u.start() <= close]
        if any(not any(a <= u < b for a, b in inside) for u in uses):
            return None  # read outside the branch too: moving it would break the first build
        before, after = raw[:m.start()].rstrip(), raw[close + 1:].lstrip()
        if re.search(r"(?i)\bwith$", before) and after.startswith(","):  # the first of several: `a as (...),`
            start, end = m.start(), raw.index(",", close) + 1
        elif re.search(r"(?i)\bwith$", before):  # the only one: `with a as (...)`
            start, end = len(before) - 4, close + 1
        elif before.endswith(","):  # a later one: `, a as (...)`
            start, end = len(before) - 1, close + 1
        else:
            return None
        edits[start] = (end, "{% if is_incremental() %}" + raw[start:end] + "{% endif %}")
    for start in sorted(edits, reverse=True):
        end, text = edits[start]
        raw = raw[:start] + text + raw[end:]
    return raw


# ------------------------------------------------------------------ hooks that insert into another relation
def _declared_logs(raw: str, labels: list[str]) -> str | None:
    """The text with these relations added to `meta.rerun_safety.log_tables` (the meta of its one config()
    call kept, merged), or None when its meta is not a literal this can merge into."""
    calls = config_calls(raw)
    meta: dict = {}
    if len(calls) == 1:
        lo, hi, _ = calls[0]
        span = setting_span(raw, lo, hi, "meta")
        if span:
            try:
                meta = ast.literal_eval(raw[span[0]:span[1]])
            except (ValueError, SyntaxError):
                return None
            if not isinstance(meta, dict) or not isinstance(meta.get("rerun_safety", {}), dict):
                return None
    elif len(calls) > 1 and any(setting_span(raw, lo, hi, "meta") for lo, hi, _ in calls):
        return None
    ours = dict(meta.get("rerun_safety") or {})
    have = list(ours.get("log_tables") or [])
    ours["log_tables"] = have + [x for x in labels if x not in have]
    return set_config(raw, meta={**meta, "rerun_safety": ours})


_JINJA = re.compile(r"\{\{.*?\}\}", re.S)
_AGGREGATES = (exp.Count, exp.Sum, exp.Avg)
_TIME_TYPES = ("date", "timestamp", "datetime")


def _jinja_string(sql: str) -> str:
    return '"' + sql.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _keyed_deletes(hook: str, side: tuple[SideTable, ...], dialect: str) -> list[tuple[str, str]]:
    """For `insert into <a side table> [(cols)] select ...`: (column, `delete from <it> where <column> in
    (select <its expression> from ...)`) for the columns that can key a batch, most likely first."""
    holes: list[str] = []

    def hole(m: re.Match) -> str:
        holes.append(m.group(0))
        return f"__rs_jinja_{len(holes) - 1}__"

    def back(sql: str) -> str:
        return re.sub(r"__rs_jinja_(\d+)__", lambda m: holes[int(m.group(1))], sql)

    if "{%" in hook:
        return []
    try:
        tree = sqlglot.parse_one(_JINJA.sub(hole, hook), read=dialect or None)
    except sqlglot.errors.ParseError:
        return []
    if not isinstance(tree, exp.Insert) or not isinstance(tree.expression, exp.Select):
        return []
    into = tree.this
    named = [c.name for c in into.expressions] if isinstance(into, exp.Schema) else []
    target = into.this if isinstance(into, exp.Schema) else into
    written = back(target.sql(dialect=dialect or None))
    rel = next((r for r in side if re.search(rf"(?i)(?<![\w$]){re.escape(r.name)}(?![\w$])", written)), None)
    select = tree.expression
    if rel is None or any(isinstance(e, exp.Star) for e in select.expressions):
        return []
    names = named or [c for c, _ in rel.columns]
    parts = _select_parts(_JINJA.sub(hole, hook))
    if parts is None or not (len(names) == len(select.expressions) == len(parts[0])):
        return []
    items, rest = parts
    types = {c.lower(): t.lower() for c, t in rel.columns}
    ranked = []
    for i, (name, e) in enumerate(zip(names, select.expressions)):
        value = e.this if isinstance(e, exp.Alias) else e
        if isinstance(value, _AGGREGATES) or value.find(*_AGGREGATES) is not None:
            continue
        ranked.append((0 if types.get(name.lower(), "").startswith(_TIME_TYPES) else 1, i, name))
    out = []
    for _, i, name in sorted(ranked)[:2]:
        # `group by 2` names a position of the whole select list: the expression itself, here
        grouped = re.sub(r"(?i)\bgroup\s+by\s+(\d+(?:\s*,\s*\d+)*)\s*$", lambda m: "group by " + ", ".join(
            _unaliased(items[int(n) - 1]) for n in re.split(r"\s*,\s*", m.group(1))), rest.rstrip())
        column = exp.to_identifier(name, quoted=not re.fullmatch(r"[a-z_][a-z0-9_]*", name)).sql(dialect=dialect or None)
        out.append((name, back(f"delete from {written} where {column} in (select {_unaliased(items[i])} {grouped})")))
    return out


def _unaliased(item: str) -> str:
    return re.sub(r"(?is)\s+as\s+(\w+|\"[^\"]+\")\s*$", "", item.strip())


def _select_parts(text: str) -> tuple[list[str], str] | None:
    """The select list's items and the text from its FROM on, of the first top-level SELECT in `text`."""
    depth, i, start = 0, 0, None
    for m in re.finditer(r"(?i)[()]|'(?:[^']|'')*'|\bselect\b|\bfrom\b", text):
        token = m.group(0).lower()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0 and token == "select" and start is None:
            start = m.end()
        elif depth == 0 and token == "from" and start is not None:
            i = m.start()
            return [text[a:b].strip() for a, b in top_items(text, start, i)], text[i:]
    return None


def hook_candidates(t: Target) -> tuple[list[Candidate], str]:
    """A hook that inserts into another relation on every run: the batch's rows deleted from it first,
    keyed by a column of what it inserts (a date or time first), so a rerun replaces them."""
    out = []
    calls = config_calls(t.raw)
    for setting in ("post_hook", "pre_hook"):
        spans = [sp for lo, hi, _ in calls if (sp := setting_span(t.raw, lo, hi, setting))]
        if len(spans) != 1:  # set in several calls (one per target, say): which one runs is not known here
            continue
        (a, b), = spans
        try:
            value = ast.literal_eval(t.raw[a:b])
        except (ValueError, SyntaxError):
            continue
        hooks = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        if not all(isinstance(h, str) for h in hooks):
            continue
        starts = [a] if isinstance(value, str) else [x + len(t.raw[x:y]) - len(t.raw[x:y].lstrip())
                                                     for x, y in top_items(t.raw, a + 1, b - 1)]
        for i, hook in enumerate(hooks):
            if any(re.match(r"(?is)\s*(delete|truncate)\b", h) for h in hooks[:i]):
                continue  # the hooks already replace what they insert
            for column, delete in _keyed_deletes(hook, t.side, t.dialect):
                if isinstance(value, str):  # one hook: a list of the delete and it
                    new = t.raw[:a] + "[" + _jinja_string(delete) + ", " + t.raw[a:b] + "]" + t.raw[b:]
                else:
                    new = t.raw[:starts[i]] + _jinja_string(delete) + ", " + t.raw[starts[i]:]
                out.append(Candidate(f"replace the hook's rows by {column}",
                                     f"the {setting} deletes the rows of the run's {column} before inserting them "
                                     f"again: a rerun replaces what it wrote (`{delete}`)", new))
    out = out[:2]
    # a relation the hook adds its rows to at every run of the fault-free schedule: a per-run snapshot (a
    # delete of its run's rows keeps one per run) or a run log (a delete would destroy its history, which
    # the search refuses, search._history_kept): the log declared by design, after the deletes
    logs = [s for s in t.side if s.per_run]
    declared = _declared_logs(t.raw, [s.label for s in logs]) if logs else None
    if declared is not None:
        out.append(Candidate(
            "declare the run log", f"meta.rerun_safety.log_tables names {', '.join(s.label for s in logs)}: its hook "
            f"keeps {logs[0].per_run} row{'s' if logs[0].per_run > 1 else ''} per run, a history of the runs that a "
            "rerun adds to as production would (checked as one row per run, never deleted)", declared,
            declaration=True))
    if out:
        return out, ""
    if logs:
        return [], (f"no candidate: its hook keeps a row per run in {', '.join(s.label for s in logs)} (a run log: a "
                    "fix that deletes would destroy that history); declare it in "
                    "`meta={'rerun_safety': {'log_tables': [...]}}` (the model's meta is not one literal here)")
    return [], ("no candidate: no hook set in one config() call of the model is an `insert into <table> select ...` "
                "of the relation that differed; make it replace what it covers (delete the batch's rows before "
                "inserting them) or move the write into a model of its own")
