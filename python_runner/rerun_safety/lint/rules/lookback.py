"""A window that looks across rows (lag, lead, a running or moving sum) computed over only the rows
of the batch: the first rows of each batch see no predecessor, so an incremental run writes other
values than a full refresh of the same data.

The rows a window sees are those of its own select (after WHERE and HAVING) and, through its FROM
and inner joins, of the CTEs and derived tables it reads. A filter there that the full-refresh
branch does not have (the `is_incremental()` block) restricts them to the batch. It is harmless
when the window is partitioned by the filtered column (whole partitions are read: a day's
windows over a batch of whole days, a session's events re-read for every session with a new
one), when the window's result is trimmed again after it (a lookback read for the window,
then only the newer rows kept: the author sized the lookback), and when the batch is unioned with
rows kept in `{{ this }}` before the window (the previous active rows give the first rows of the
batch their predecessors).
"""
from __future__ import annotations

from sqlglot import exp

from ..context import ModelContext
from .base import Hit, is_this, needle, sql_text

# functions whose value in a row comes from other rows, in order: lag/lead always; an aggregate
# only with an ORDER BY or a frame (running, moving). Ranking (row_number, rank) numbers the batch
# on purpose (a dedup), first/last_value often picks the latest version: neither is judged.
_ACROSS = (exp.Lag, exp.Lead)
_RUNNING = (exp.Sum, exp.Avg, exp.Count, exp.Min, exp.Max)
_MAX_DEPTH = 12


def _looks_across(win: exp.Window) -> bool:
    fn = win.this
    if isinstance(fn, _ACROSS):
        return True
    return isinstance(fn, _RUNNING) and bool(win.args.get("order") or win.args.get("spec"))


def _text(node: exp.Expression, ctx: ModelContext) -> str:
    return " ".join(node.sql(dialect=ctx.dialect).lower().split())


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, (exp.Where, exp.Having)):
        node = node.this
    while isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _filters(sel: exp.Select) -> list[exp.Expression]:
    return _conjuncts(sel.args.get("where")) + _conjuncts(sel.args.get("having"))


def _full_filters(ctx: ModelContext) -> set[str]:
    """Every WHERE/HAVING conjunct of the full-refresh branch, as text."""
    out: set[str] = set()
    for stmt in ctx.full.statements:
        for sel in stmt.find_all(exp.Select):
            out.update(_text(c, ctx) for c in _filters(sel))
    return out


class _Statement:
    """One incremental statement: its CTEs by name, and the column names an alias stands for."""

    def __init__(self, stmt: exp.Expression, ctx: ModelContext, full: set[str]):
        self.stmt, self.ctx, self.full = stmt, ctx, full
        self.ctes = {cte.alias_or_name.lower(): cte.this for cte in stmt.find_all(exp.CTE)}
        self.aliases: dict[str, set[str]] = {}
        for sel in stmt.find_all(exp.Select):
            for proj in sel.expressions:
                if isinstance(proj, exp.Alias):
                    names = {c.name.lower() for c in proj.this.find_all(exp.Column)}
                    self.aliases.setdefault(proj.alias.lower(), set()).update(names)

    def batch_only(self, sel: exp.Select) -> list[exp.Expression]:
        return [c for c in _filters(sel) if _text(c, self.ctx) not in self.full]

    def _selects(self, body: exp.Expression | None) -> list[exp.Select]:
        if isinstance(body, exp.Subquery):
            body = body.this
        if isinstance(body, exp.Select):
            return [body]
        if isinstance(body, exp.Union):
            return self._selects(body.this) + self._selects(body.expression)
        return []

    def _body(self, node: exp.Expression) -> exp.Expression | None:
        if isinstance(node, exp.Table) and not node.db and node.name.lower() in self.ctes:
            return self.ctes[node.name.lower()]
        if isinstance(node, exp.Subquery):
            return node.this
        return None

    def _source(self, node: exp.Expression) -> list[exp.Select]:
        return self._selects(self._body(node))

    def rows_from_this(self, sel: exp.Select, depth: int = 0) -> bool:
        """Whether rows of `sel` come from {{ this }} (through its FROM and joins, CTEs and derived tables;
        not a subquery of its WHERE, such as a watermark)."""
        if depth >= _MAX_DEPTH:
            return False
        frm = sel.args.get("from_")
        nodes = ([frm.this] if frm is not None else []) + [j.this for j in sel.args.get("joins") or []]
        for node in nodes:
            if isinstance(node, exp.Table) and is_this(node, self.ctx):
                return True
            if any(self.rows_from_this(inner, depth + 1) for inner in self._source(node)):
                return True
        return False

    def restrictions(self, sel: exp.Select, depth: int = 0, seen: set | None = None) -> list[exp.Expression]:
        """The batch-only filters on the rows `sel` reads: its own, and those of what its FROM and
        inner joins read (not the nullable side of an outer join), transitively."""
        seen = set() if seen is None else seen
        if id(sel) in seen or depth >= _MAX_DEPTH:
            return []
        seen.add(id(sel))
        found = self.batch_only(sel)
        joins = sel.args.get("joins") or []
        sources = []
        if not any(j.side in ("RIGHT", "FULL") for j in joins) and sel.args.get("from_") is not None:
            sources.append(sel.args["from_"].this)
        sources += [j.this for j in joins if j.side not in ("LEFT", "FULL")]
        for node in sources:
            inner = self._source(node)
            if len(inner) > 1 and any(self.rows_from_this(b) for b in inner):
                continue  # the batch unioned with rows kept in {{ this }}: the window sees their predecessors
            for branch in inner:
                found += self.restrictions(branch, depth + 1, seen)
        return found

    def trimmed(self, sel: exp.Select, depth: int = 0) -> bool:
        """Whether what reads `sel`'s rows filters them again to the batch (a lookback, then trim)."""
        if depth >= _MAX_DEPTH:
            return False
        node = sel
        while isinstance(node.parent, (exp.Union, exp.Paren)):
            node = node.parent
        parent = node.parent
        users: list[exp.Select] = []
        if isinstance(parent, exp.CTE):
            name = parent.alias_or_name.lower()
            users = [t.find_ancestor(exp.Select) for t in self.stmt.find_all(exp.Table)
                     if not t.db and t.name.lower() == name]
        elif isinstance(parent, exp.Subquery):
            users = [parent.find_ancestor(exp.Select)]
        return any(u is not None and (self.batch_only(u) or self.trimmed(u, depth + 1)) for u in users)

    def names(self, columns: set[str]) -> set[str]:
        """Column names with the names they are aliases of, transitively."""
        out, todo = set(), list(columns)
        while todo:
            name = todo.pop()
            if name not in out:
                out.add(name)
                todo += self.aliases.get(name, ())
        return out


def _filtered_columns(cond: exp.Expression) -> set[str]:
    """Column names a filter tests, outside its subqueries (`session_id in (select ...)`: session_id)."""
    return {c.name.lower() for c in cond.find_all(exp.Column)
            if c.find_ancestor(exp.Subquery, exp.Select) in (None, cond.find_ancestor(exp.Select))}


def window_over_batch(ctx: ModelContext) -> list[Hit]:
    if not ctx.is_incremental or ctx.incremental is None or not ctx.incremental.ok \
            or ctx.full is None or not ctx.full.ok:
        return []
    full = _full_filters(ctx)
    hits: list[Hit] = []
    for stmt in ctx.incremental.statements:
        st = _Statement(stmt, ctx, full)
        for win in stmt.find_all(exp.Window):
            sel = win.find_ancestor(exp.Select)
            if sel is None or not _looks_across(win):
                continue
            parts = st.names({c.name.lower() for p in win.args.get("partition_by") or [] for c in p.find_all(exp.Column)})
            batch = [c for c in st.restrictions(sel) if not (_filtered_columns(c) & parts)]
            if not batch or st.trimmed(sel):
                continue
            fn = win.this.sql_name().lower()  # LAG, SUM...: where the needle finds it in the file
            hits.append(Hit("window-over-batch",
                            f"`{sql_text(win, ctx, 90)}` looks across rows, but in an incremental run it sees only the "
                            f"batch (`{sql_text(batch[0], ctx, 80)}` is in the incremental branch alone): the first rows of "
                            "each batch get no predecessor, so the values written differ from a full refresh",
                            "incremental", (needle(fn),), key=f"window-over-batch|{_text(win, ctx)}"))
    return hits
