"""Rules on a model's hooks (pre_hook, post_hook): SQL that writes outside the model's own relation
and is run again, whole, by every rerun."""
from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from ...project import hook_sql
from ..context import ModelContext
from .base import Hit

_SOURCE = re.compile(r"\{\{\s*source\(\s*['\"]([^'\"]+)['\"]\s*,\s*['\"]([^'\"]+)['\"]\s*\)\s*\}\}")
_REF = re.compile(r"\{\{\s*ref\(\s*['\"]([^'\"]+)['\"]\s*\)\s*\}\}")
_THIS = re.compile(r"\{\{\s*this\s*\}\}")
_KNOWN = re.compile(r"\{\{\s*((?:this|target|model)\.[a-z_]+)\s*\}\}", re.IGNORECASE)


def hook_sqls(ctx: ModelContext) -> list[tuple[str, str]]:
    """(pre_hook | post_hook, SQL as written) in the order dbt runs them: pre-hooks, then post-hooks."""
    return [(kind, sql) for kind in ("pre_hook", "post_hook") for sql in hook_sql(ctx.config.get(kind))]


def _render(sql: str, ctx: ModelContext) -> str:
    """The hook with its relations rendered (source, ref, this) and any other Jinja blanked: enough
    to see which table a statement writes."""
    database, schema, ident = ctx.this
    sql = _SOURCE.sub(lambda m: ctx.relation_names.get(f"source:{m[1]}.{m[2]}", f"{m[1]}.{m[2]}"), sql)
    sql = _REF.sub(lambda m: ctx.relation_names.get(f"ref:{m[1]}", m[1]), sql)
    sql = _THIS.sub(f"{schema}.{ident}" if schema else ident, sql)
    # the names hooks build from dbt's context (`{{ target.schema }}_audit`, `'{{ this.name }}'`);
    # target.schema stands for the model's schema, which it usually is
    known = {"this.name": ident, "this.identifier": ident, "this.table": ident, "this.schema": schema,
             "this.database": database, "target.schema": schema, "target.database": database,
             "target.dbname": database, "model.name": ident}
    sql = _KNOWN.sub(lambda m: known.get(m[1].lower()) or m[0], sql)
    sql = re.sub(r"\{#.*?#\}|\{%.*?%\}", " ", sql, flags=re.S)

    def other(m: re.Match) -> str:
        # inside a literal or a name (`'{{ x }}'`, `{{ x }}_audit`): a bare word keeps it one token
        before, after = sql[m.start() - 1:m.start()], sql[m.end():m.end() + 1]
        return "jinja" if (before and (before.isalnum() or before in "'\"_.")) or \
            (after and (after.isalnum() or after in "'\"_.")) else "'jinja'"
    return re.sub(r"\{\{.*?\}\}", other, sql, flags=re.S)


def _table(node: exp.Expression | None) -> tuple[str, str] | None:
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table) or not node.name:
        return None
    return (node.db or "").lower(), node.name.lower()


def _same(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return a[1] == b[1] and (not a[0] or not b[0] or a[0] == b[0])


def _skips_existing(insert: exp.Insert, target: tuple[str, str]) -> bool:
    """The inserted rows leave out those already in the target (`not exists` / `not in`)."""
    for node in insert.find_all(exp.Not):
        inner = node.this.this if isinstance(node.this, exp.Paren) else node.this
        if isinstance(inner, (exp.Exists, exp.In)) and any(
                (t := _table(tbl)) is not None and _same(t, target) for tbl in inner.find_all(exp.Table)):
            return True
    return False


def hook_append(ctx: ModelContext) -> list[Hit]:
    """A hook that INSERTs into a table without a key runs again on every rerun and appends its
    rows again. Fine when the hooks first DELETE (or truncate) from that table, when the INSERT has
    ON CONFLICT (or is `insert or replace`), skips rows already there, or when the model declares
    the table a log written once per run (meta.rerun_safety.log_tables)."""
    hooks = hook_sqls(ctx)
    if not hooks:
        return []
    logs = ctx.rerun_safety_meta.get("log_tables") or ()
    logs = [logs] if isinstance(logs, str) else list(logs)
    declared = [(parts[-2] if len(parts) > 1 else "", parts[-1])
                for parts in (str(x).lower().replace('"', "").split(".") for x in logs)]
    cleared: list[tuple[str, str]] = []
    hits = []
    for kind, raw in hooks:
        try:
            statements = [s for s in sqlglot.parse(_render(raw, ctx), read=ctx.dialect) if s is not None]
        except Exception:  # sqlglot's ParseError / TokenError: a hook it cannot read is not judged
            continue
        for stmt in statements:
            if isinstance(stmt, exp.Delete) or type(stmt).__name__ == "TruncateTable":
                target = _table(stmt.this) if isinstance(stmt, exp.Delete) else \
                    next((t for t in map(_table, stmt.expressions) if t), None)
                if target:
                    cleared.append(target)
                continue
            if not isinstance(stmt, exp.Insert):
                continue
            target = _table(stmt.this)
            if target is None:
                continue
            if stmt.args.get("conflict") is not None or str(stmt.args.get("alternative") or "").upper() in (
                    "REPLACE", "IGNORE"):
                continue
            if any(_same(target, c) for c in cleared) or any(_same(target, d) for d in declared):
                continue
            if _skips_existing(stmt, target):
                continue
            name = ".".join(p for p in target if p)
            text = " ".join(raw.split())
            text = text if len(text) <= 90 else text[:87] + "..."
            hits.append(Hit("hook-append",
                            f"{kind} `{text}` inserts into {name} without a key: every rerun (or retry) of the "
                            f"model appends its rows to {name} again",
                            "config", (r"\binsert\s+into\b", kind), key=f"hook-append|{name}"))
    return hits


def hook_writes_other(ctx: ModelContext) -> list[Hit]:
    """A hook that deletes from, truncates or updates a relation other than the model's own (a parent it
    consumes, a source, another model): the next run, a rerun or a partial run reads that relation
    without the rows the hook took, and the relation's own state depends on this model's runs. Not when
    the hooks insert into the same relation after deleting from it (they replace the rows they cover)."""
    hooks = hook_sqls(ctx)
    if not hooks:
        return []
    _, schema, ident = ctx.this
    own = ((schema or "").lower(), (ident or "").lower())
    pending: dict[tuple[str, str], tuple[str, str, str]] = {}
    written: list[tuple[str, str]] = []  # tables the hooks insert into: theirs (hook-append judges those)
    hits = []
    for kind, raw in hooks:
        try:
            statements = [s for s in sqlglot.parse(_render(raw, ctx), read=ctx.dialect) if s is not None]
        except Exception:  # sqlglot's ParseError / TokenError: a hook it cannot read is not judged
            continue
        for stmt in statements:
            if isinstance(stmt, exp.Insert):
                target = _table(stmt.this)
                if target is not None:
                    written.append(target)
                for t in [t for t in pending if target is not None and _same(t, target) and pending[t][2] != "updates"]:
                    del pending[t]  # delete + insert: the hook replaces the rows it covers
                continue
            verb = ("deletes from" if isinstance(stmt, exp.Delete) else "updates" if isinstance(stmt, exp.Update)
                    else "truncates" if type(stmt).__name__ == "TruncateTable" else None)
            if verb is None:
                continue
            target = _table(stmt.this) if not type(stmt).__name__ == "TruncateTable" else \
                next((t for t in map(_table, stmt.expressions) if t), None)
            if target is None or _same(target, own) or (verb != "updates" and any(_same(target, w) for w in written)):
                continue
            text = " ".join(raw.split())
            pending.setdefault(target, (kind, text if len(text) <= 90 else text[:87] + "...", verb))
    for target, (kind, text, verb) in pending.items():
        name = ".".join(p for p in target if p)
        hits.append(Hit("hook-writes-other",
                        f"{kind} `{text}` {verb} {name}, which is not this model's relation: a rerun or a partial "
                        f"run then reads {name} without what the hook took, and {name}'s state depends on this "
                        "model's runs", "config", (r"\b(?:delete|update|truncate)\b", kind),
                        key=f"hook-writes-other|{name}"))
    return hits
