"""What the rules see of one model: its config, and its compiled SQL parsed by sqlglot.

Kept free of dbt objects so the rules can be tested on SQL strings and plain configs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

# sqlglot reads these dialects under the adapter's own name; other adapters map here or parse generic.
_DIALECT_ALIASES = {"databricks": "databricks", "trino": "trino", "athena": "athena",
                    "sqlserver": "tsql", "fabric": "tsql", "synapse": "tsql", "materialize": "postgres"}

# Sentinel window bounds passed as vars when compiling the full-refresh branch: the compiled literal
# of a window var is recognisable by its date. ISO-8601, as window_filter's vars require.
WINDOW_START_SENTINEL = "1901-02-03T04:05:06"
WINDOW_END_SENTINEL = "1901-02-05T06:07:08"
WINDOW_VARS = ("rerun_safety_window_start", "rerun_safety_window_end")


def sqlglot_dialect(adapter_type: str) -> str | None:
    """sqlglot's dialect for a dbt adapter type, or None (generic SQL) when sqlglot has none."""
    name = _DIALECT_ALIASES.get(adapter_type, adapter_type)
    try:
        sqlglot.Dialect.get_or_raise(name)
    except Exception:  # sqlglot raises ValueError for unknown dialects
        return None
    return name


@dataclass(frozen=True)
class ParsedSql:
    """One compiled branch of a model: the SQL text and, when sqlglot parsed it, its statements."""

    sql: str
    statements: tuple[exp.Expression, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.statements)


def parse_sql(sql: str, dialect: str | None) -> ParsedSql:
    """Parse compiled SQL; a parse error is returned (first line), never raised."""
    try:
        statements = tuple(s for s in sqlglot.parse(sql, read=dialect) if s is not None)
    except Exception as err:  # sqlglot raises ParseError / TokenError; any failure is a finding
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return ParsedSql(sql, (), first[:300])
    if not statements:
        return ParsedSql(sql, (), "no SQL statement found")
    return ParsedSql(sql, statements)


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class ModelContext:
    """A model as the rules see it."""

    name: str
    adapter_type: str
    materialized: str = "view"
    incremental_strategy: str | None = None
    unique_key: tuple[str, ...] = ()
    partition_key: Any = None
    partitions: Any = None
    config: dict = field(default_factory=dict)
    rerun_safety_meta: dict = field(default_factory=dict)
    unique_sets: tuple[frozenset, ...] = ()
    this: tuple[str, str, str] = ("", "", "")  # database, schema, identifier
    full: ParsedSql | None = None
    incremental: ParsedSql | None = None
    unique_id: str = ""
    path: str = ""
    raw_code: str = ""
    window_literals: tuple[str, str] = (WINDOW_START_SENTINEL[:10], WINDOW_END_SENTINEL[:10])
    root_macros: frozenset = frozenset()
    # the macro names a model's config can reach without a package prefix (its root project, its
    # own package, dbt's and the adapter's), where dbt looks for get_incremental_<name>_sql;
    # None: not known (the rules then assume a strategy's macro exists)
    strategy_macros: frozenset | None = None
    # (schema, name) -> {column: type} of the relations in the scratch catalog (lowercased), and
    # the model's own output columns (its relation there), when known
    catalog: dict = field(default_factory=dict)
    columns: dict | None = None
    # incremental, or upstream of an incremental model: reruns matter
    feeds_incremental: bool = False
    language: str = "sql"
    # (schema, name) -> unique column sets of each relation read (keys, unique tests, constraints)
    relation_keys: dict = field(default_factory=dict)
    # (source, event-time column, load-time column) of the sources upstream that declare when rows
    # were loaded beside when they happened
    load_times: tuple[tuple[str, str, str], ...] = ()
    # lint --with-data: what the target shows of those sources' lateness (lint.lateness.Observed)
    lateness: tuple = ()
    # the names the models below it use (every identifier of their SQL, lowercased); None when unknown (a
    # model below not linted here, a Python model, `*`): a column none of them reads reaches no rerun
    read_below: frozenset | None = None
    # (schema, name) -> what a relation holds: event | state | static | history (core.relation_kinds)
    relation_kinds: dict = field(default_factory=dict)
    # how often the models run: (label, seconds, where it came from), see run_lint
    schedule: tuple[str, float, str] = ("day", 86400.0, "the default schedule")
    # how hooks' `{{ source('a', 'b') }}` / `{{ ref('m') }}` render: {"source:a.b": "schema.table", "ref:m": ...}
    relation_names: dict = field(default_factory=dict)
    # the clock rendered into the SQL by Jinja: (a stretch of the SQL as compiled, the same compiled at
    # another time), see lint/compile._clock_rendered
    clock_rendered: tuple[str, str] | None = None

    def relation_types(self, table: exp.Table) -> dict | None:
        """{column: type} of a relation the SQL reads, from the scratch catalog."""
        name = table.name.lower()
        if table.db:
            found = self.catalog.get((table.db.lower(), name))
            if found is not None:
                return found
        _, schema, ident = self.this
        if ident and name == ident.lower() and (not table.db or table.db.lower() == schema.lower()):
            return self.columns if self.columns is not None else self.catalog.get((schema.lower(), name))
        if not table.db:
            matches = [cols for (s, n), cols in self.catalog.items() if n == name]
            if len(matches) == 1:
                return matches[0]
        return None

    @property
    def dialect(self) -> str | None:
        return sqlglot_dialect(self.adapter_type)

    @property
    def is_incremental(self) -> bool:
        return self.materialized == "incremental"

    @property
    def rerun_scope(self) -> bool:
        """Reruns matter: an incremental model, a materialization of the project's own (it may keep
        what earlier runs wrote, and the game day replays it like an incremental model), or one that
        feeds either."""
        from ..project import BUILTIN_MATERIALIZATIONS

        own = bool(self.materialized) and self.materialized not in BUILTIN_MATERIALIZATIONS
        return self.is_incremental or own or self.feeds_incremental

    @property
    def strategy(self) -> str:
        """The strategy that actually runs: dbt-duckdb and dbt-postgres default to delete+insert
        with a unique_key and to append without one."""
        if self.incremental_strategy:
            return str(self.incremental_strategy)
        return "delete+insert" if self.unique_key else "append"

    @property
    def keyed_write(self) -> bool:
        """Each run replaces what it rewrites by key or partition, so re-read rows replace themselves:
        merge or delete+insert with a unique_key, partition_overwrite, microbatch."""
        if self.strategy in ("merge", "delete+insert"):
            return bool(self.unique_key)
        return self.strategy in ("partition_overwrite", "microbatch")

    @property
    def compare_audit_columns(self) -> bool:
        """meta.rerun_safety.compare_audit_columns: the model's clock stamps are compared by the game day."""
        return self.rerun_safety_meta.get("compare_audit_columns") is True

    @property
    def ignore_columns(self) -> frozenset:
        cols = self.rerun_safety_meta.get("ignore_columns") or ()
        if isinstance(cols, str):
            cols = [cols]
        return frozenset(str(c).lower() for c in cols)

    def branches(self):
        """(branch name, parsed SQL) for each branch that parsed."""
        out = []
        if self.full is not None and self.full.ok:
            out.append(("full", self.full))
        if self.incremental is not None and self.incremental.ok:
            out.append(("incremental", self.incremental))
        return out

    @classmethod
    def from_sql(cls, name: str, adapter_type: str, full_sql: str | None = None,
                 incremental_sql: str | None = None, *, unique_key: Any = None,
                 unique_columns: Any = (), this: tuple[str, str, str] | None = None,
                 types: dict | None = None, keys: dict | None = None, **kwargs) -> "ModelContext":
        """Build a context from SQL strings (the tests use this). `types`: {"schema.name": {col: type}}
        for the relations the SQL reads; the model's own relation gives its output columns."""
        dialect = sqlglot_dialect(adapter_type)
        key = _as_tuple(unique_key)
        sets = [frozenset(c.lower() for c in key)] if key else []
        for cols in unique_columns:
            cols = _as_tuple(cols)
            if cols:
                sets.append(frozenset(c.lower() for c in cols))
        cat = {}
        for rel, cols in (types or {}).items():
            schema, _, rname = rel.lower().rpartition(".")
            cat[(schema, rname)] = {c.lower(): t.lower() for c, t in cols.items()}
        kwargs.setdefault("catalog", cat)
        if keys:
            rk = {}
            for rel, rel_sets in keys.items():
                schema, _, rname = rel.lower().rpartition(".")
                rk[(schema, rname)] = [frozenset(c.lower() for c in _as_tuple(k)) for k in rel_sets]
            kwargs.setdefault("relation_keys", rk)
        this_ = this or ("", "", name)
        if "columns" not in kwargs and (this_[1].lower(), this_[2].lower()) in cat:
            kwargs["columns"] = cat[(this_[1].lower(), this_[2].lower())]
        return cls(
            name=name, adapter_type=adapter_type, unique_key=key,
            unique_sets=tuple(dict.fromkeys(sets)),
            this=this_,
            full=parse_sql(full_sql, dialect) if full_sql is not None else None,
            incremental=parse_sql(incremental_sql, dialect) if incremental_sql is not None else None,
            **kwargs)
