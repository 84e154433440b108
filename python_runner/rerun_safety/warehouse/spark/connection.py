"""Spark SQL in one sandbox, or in the user's catalog read as it is: names pointed at the sandbox's
databases (`<sandbox>__<schema>`), the catalog read through SHOW and DESCRIBE, rows deleted by rewriting a
table (parquet has no DELETE). See engine.py for the sandboxes themselves."""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Iterable, Sequence

from sqlglot import exp
from sqlglot.tokens import TokenType

from ...errors import SandboxError
from .backends import Backend
from .dialect import SPARK
from ..base import PREFIX, Connection, ident

SEP = "__"
_IDENT_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER)
_READ = re.compile(r"\s*(select|show|describe|desc)\b", re.IGNORECASE)  # not WITH: it may lead an INSERT
_DATABASE_DDL = re.compile(r"\s*(create|drop|alter|use)\s+(database|schema|namespace)\b", re.IGNORECASE)


# ---------------------------------------------------------------------------------- names
# A statement that names a bare schema (no table after it): the database DDL, USE, SHOW ... IN,
# DESCRIBE DATABASE. Leading comments (dbt's query comment) are skipped.
_LEAD = r"^(\s*(?:/\*.*?\*/\s*|--[^\n]*\n\s*)*"
_BARE_SCHEMA = re.compile(
    _LEAD + r"(?:(?:create|drop|alter)\s+(?:database|schema|namespace)\s+(?:if\s+(?:not\s+)?exists\s+)?"
    r"|use\s+(?:(?:database|schema|namespace)\s+)?"
    r"|(?:describe|desc)\s+(?:database|schema|namespace)\s+(?:extended\s+)?"
    r"|show\s+(?:tables|views|functions|table\s+extended)\s+(?:in|from)\s+))"
    r"(`?)([A-Za-z_][A-Za-z0-9_]*)\2(?=\s|;|$)", re.IGNORECASE | re.DOTALL)


def map_bare_schema(sql: str, prefix: str, schemas: Iterable[str]) -> str:
    """`sql` with the bare schema a database statement names (`create schema if not exists
    analytics`, `show tables in analytics`, `use analytics`) written as the sandbox's copy, when it
    is one of `schemas`: a hook that creates `{{ target.schema }}` creates the sandbox's."""
    m = _BARE_SCHEMA.match(sql)
    if not m or m.group(3).lower() not in {s.lower() for s in schemas}:
        return sql
    return f"{sql[:m.start(2)]}`{prefix}{m.group(3).lower()}`{sql[m.end():]}"


def map_schemas(sql: str, prefix: str, schemas: Iterable[str]) -> str:
    """`sql` with every `schema.name` whose schema is one of `schemas` (case-insensitive, not
    already in a sandbox) written as `prefix+schema`.name; strings, comments and the rest of the
    text are untouched. Statements sqlglot cannot tokenize go as they are."""
    known = {s.lower() for s in schemas}
    low = sql.lower()
    if not any(s in low for s in known):
        return sql
    from sqlglot.dialects.dialect import Dialect

    try:
        tokens = Dialect.get_or_raise("spark").tokenize(sql)
    except Exception:  # noqa: BLE001
        return sql
    edits: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.token_type not in _IDENT_TOKENS or tok.text.lower() not in known:
            continue
        if i and tokens[i - 1].token_type == TokenType.DOT:
            continue  # the second part of a name
        if i + 2 >= len(tokens) or tokens[i + 1].token_type != TokenType.DOT:
            continue
        edits.append((tok.start, tok.end, f"`{prefix}{tok.text.lower()}`"))
    if not edits:
        return sql
    parts, pos = [], 0
    for start, end, text in edits:
        parts += [sql[pos:start], text]
        pos = end + 1
    parts.append(sql[pos:])
    return "".join(parts)


class SparkConnection(Connection):
    """SQL in one sandbox (`prefix`), or in the user's catalog as it is (prefix None, read only)."""

    dialect = SPARK

    def __init__(self, backend: Backend, prefix: str | None, schemas: set[str], on_close: Callable | None = None):
        self._backend = backend
        self.prefix = prefix
        self.schemas = schemas  # the project's schemas (shared with the engine: new ones join)
        self._on_close = on_close
        # what SHOW and DESCRIBE said, while this connection changes nothing: a game day judges
        # every model by the same few listings (each statement costs Spark ~0.1 s or more)
        self._catalog: dict[str, tuple[list[str], list[tuple]]] = {}

    def _raw(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Run a statement as it is; anything but a read forgets the listings kept so far."""
        if not _READ.match(sql):
            self._catalog.clear()
        return self._backend.run(sql)

    @contextlib.contextmanager
    def session_conf(self, key: str, value: str):
        """`SET key=value` for the statements inside, then the value it had (the session may be
        dbt's too). `key` and `value` are the runner's constants, never a user's text."""
        before = self._backend.run(f"set {key}")[1]
        self._backend.run(f"set {key}={value}")
        try:
            yield
        finally:
            old = before[0][1] if before else None
            self._backend.run(f"set {key}={old}" if old not in (None, "<undefined>") else f"reset {key}")

    def _catalog_read(self, sql: str) -> tuple[list[str], list[tuple]]:
        """A SHOW or DESCRIBE, answered from what this connection read before if it wrote nothing since."""
        if sql not in self._catalog:
            self._catalog[sql] = self._backend.run(sql)
        return self._catalog[sql]

    def physical(self, schema: str) -> str:
        if self.prefix is None or schema.lower().startswith(PREFIX):
            return schema
        return f"{self.prefix}{schema.lower()}"

    def sql(self, expression) -> str:
        if isinstance(expression, str):
            if _DATABASE_DDL.match(expression):
                # its bare name would be the user's database: create_schema() names the sandbox's
                raise SandboxError(f"refusing a database statement outside create_schema(): {expression[:80]}")
            return map_schemas(expression, self.prefix, self.schemas) if self.prefix else expression
        if self.prefix is None:
            return expression.sql(dialect="spark")
        expression = expression.copy()
        for t in expression.find_all(exp.Table):
            if t.args.get("db") is not None and t.name:
                t.set("db", ident(self.physical(t.db)))
        return expression.sql(dialect="spark")

    def _run(self, sql) -> tuple[list[str], list[tuple]]:
        return self._raw(self.sql(sql))

    def execute(self, sql, params: Sequence[Any] | None = None) -> None:
        if params:
            raise SandboxError("parameters are not supported on Spark")
        self._run(sql)

    def fetchall(self, sql) -> list[tuple]:
        return self._run(sql)[1]

    def fetch_dicts(self, sql) -> list[dict]:
        names, rows = self._run(sql)
        return [dict(zip(names, r)) for r in rows]

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()

    # -- the catalog, through Spark's own statements (Spark has no information_schema)
    def _q(self, schema: str, name: str | None = None) -> str:
        db = ident(self.physical(schema)).sql(dialect="spark")
        return db if name is None else f"{db}.{ident(name).sql(dialect='spark')}"

    def columns(self, schema: str, name: str) -> list[tuple[str, str]]:
        try:
            rows = self._catalog_read(f"describe table {self._q(schema, name)}")[1]
        except Exception:  # noqa: BLE001 - no such relation
            return []
        out = []
        for r in rows:
            col = str(r[0] or "").strip()
            if not col or col.startswith("#"):
                break  # partition information follows, repeating the partition columns
            out.append((col, str(r[1]).lower()))
        return out

    def _names(self, statement: str, schema: str) -> set[str]:
        try:
            rows = self._catalog_read(f"{statement} in {self._q(schema)}")[1]
        except Exception:  # noqa: BLE001 - no such database
            return set()
        return {str(r[1]).lower() for r in rows if not r[2]}

    def relation_kind(self, schema: str, name: str) -> str | None:
        # the whole database listed once (the names compared here, not matched by a pattern)
        if name.lower() not in self._names("show tables", schema):
            return None
        return "view" if name.lower() in self._names("show views", schema) else "table"

    def base_tables(self) -> set[tuple[str, str]]:
        out = set()
        for schema in self.databases():
            out |= {(schema, n) for n in self._names("show tables", schema) - self._names("show views", schema)}
        return out

    def databases(self) -> list[str]:
        """The project schemas that exist in this sandbox (their names as the project knows them)."""
        if self.prefix is None:
            return [str(r[0]).lower() for r in self._backend.run("show databases")[1]]
        rows = self._backend.run(f"show databases like '{self.prefix}*'")[1]
        names = [str(r[0]).lower() for r in rows]
        return sorted(n[len(self.prefix):] for n in names if n.startswith(self.prefix))

    def drop_relation(self, schema: str, name: str, kind: str | None = None) -> None:
        kind = kind or self.relation_kind(schema, name)
        if kind:
            self._raw(f"drop {kind} if exists {self._q(schema, name)}")

    def create_schema(self, schema: str) -> None:
        self.schemas.add(schema.lower())
        self._raw(f"create database if not exists {self._q(schema)}")

    def partitioned_by(self, schema: str, name: str) -> str:
        """` partitioned by (...)` of a partitioned table, else '': a copy keeps the partitions, so
        that an insert overwrite (dynamic partitions) replaces in the copy what it replaces in the
        original, instead of the whole table."""
        try:
            rows = self._catalog_read(f"describe table {self._q(schema, name)}")[1]
        except Exception:  # noqa: BLE001 - no such relation
            return ""
        cols, inside = [], False
        for r in rows:
            col = str(r[0] or "").strip()
            if col == "# Partition Information":
                inside = True
            elif inside and (not col or (col.startswith("#") and col != "# col_name")):
                break
            elif inside and not col.startswith("#"):
                cols.append(ident(col).sql(dialect="spark"))
        return f" partitioned by ({', '.join(cols)})" if cols else ""

    def copy_table(self, src_schema: str, src: str, dst_schema: str, dst: str) -> None:
        self.create_schema(dst_schema)
        self._raw(f"create table {self._q(dst_schema, dst)} using parquet"
                  f"{self.partitioned_by(src_schema, src)} as select * from {self._q(src_schema, src)}")

    def delete_rows(self, target: exp.Table, where: exp.Expression | None = None) -> None:
        """Spark's parquet tables have no DELETE: the rows to keep go to a new table, which then
        takes the old one's name."""
        schema, name = target.db, target.name
        keep = f"{name}__rs_keep"
        self._raw(f"drop table if exists {self._q(schema, keep)}")
        cond = f" where not coalesce({self.sql(where)}, false)" if where is not None else " where false"
        self._raw(f"create table {self._q(schema, keep)} using parquet{self.partitioned_by(schema, name)} "
                  f"as select * from {self._q(schema, name)}{cond}")
        self._raw(f"drop table {self._q(schema, name)}")
        self._raw(f"alter table {self._q(schema, keep)} rename to {self._q(schema, name)}")
