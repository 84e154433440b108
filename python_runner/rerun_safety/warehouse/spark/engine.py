"""Apache Spark sandboxes: sets of databases in the Spark catalog, one set per sandbox.

Spark has no level above the schema (a "database"), so a sandbox cannot be a database of its own
as on PostgreSQL. Each schema `s` of the project lives in a sandbox as the database
`<sandbox name>__s`, and everything the runner and dbt send to a sandbox is pointed there:

- the runner's SQL through `SparkConnection` (sqlglot tables renamed; text rewritten token by
  token: `s.t` becomes `<sandbox>__s.t` for the project's schemas only);
- dbt through the manifest (every node's and source's schema) and the profile's `schema`; what
  the project's own SQL names by hand (`insert into analytics.log ...` in a hook) is rewritten the
  same way on its way to Spark (`dbt_invoke`'s `rewrite_sql`), so no statement of a game day
  reaches the user's databases except the snapshot's reads.

Two ways to reach Spark, as dbt-spark has them: `method: session` (Spark inside this process:
one SparkSession for the whole game day, shared with dbt; its Hive catalog allows one process, so
scenarios run one after another) and `method: thrift` (a cluster's Thrift server through PyHive;
worker processes may connect at once).
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from sqlglot import exp
from sqlglot.tokens import TokenType

from ...errors import ConfigError, SandboxError
from ...errors import first_line as _first_line
from ...project import SourceTable
from . import own_catalog
from .dialect import SPARK
from ..base import PREFIX, SNAPSHOT_SCHEMA, Connection, Engine, Sandbox, ident, is_kept, lock_is_free, snapshot_table

SEP = "__"
_IDENT_TOKENS = (TokenType.VAR, TokenType.IDENTIFIER)
_READ = re.compile(r"\s*(select|show|describe|desc)\b", re.IGNORECASE)  # not WITH: it may lead an INSERT
_DATABASE_DDL = re.compile(r"\s*(create|drop|alter|use)\s+(database|schema|namespace)\b", re.IGNORECASE)


# the backends, importable from here as before (dbt_invoke, the tests, the benchmarks)
from .backends import (CLOSE_TIMEOUT_S, SessionBackend, ThriftBackend, Backend,  # noqa: F401
                             close_hive_connection, make_backend, thrift_socket)

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


# ---------------------------------------------------------------------------------- engine
class SparkEngine(Engine):
    dialect = SPARK

    def __init__(self, target_output: dict, work_root: Path, run_id: str, attach: bool = False,
                 confined: bool = False):
        """`confined`: a game day confined by privilege; an in-process Spark then keeps its catalog and
        files in the run folder (own_catalog.py)."""
        self.method = str(target_output.get("method") or "")
        schema = str(target_output.get("schema") or "")
        if schema.lower().startswith(PREFIX):
            raise SandboxError(f"refusing to run: the target schema '{schema}' starts with the sandbox prefix '{PREFIX}'")
        super().__init__(target_output, work_root, run_id, attach)
        from ...clock import CLOCK_SCHEMA
        from ..base import REFERENCE_SCHEMA

        # the names the runner's own SQL uses, known from the start: text naming them is pointed
        # at a sandbox from the first statement on (the project's join when it is parsed)
        self.schemas: set[str] = {REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, CLOCK_SCHEMA, "rerun_safety_prehook",
                                  *([schema.lower()] if schema else [])}
        self._original_schema: dict[str, str] = {}
        self.notes: list[str] = []
        self.backend: Backend | None = None
        self._gap = own_catalog.gap(self._parameters()) if confined and self.method == "session" else None
        if self._gap is not None:
            return  # refused by the game day (confinement_gap) before Spark starts
        try:
            if confined and self.method == "session":
                own = own_catalog.own_catalog(self._parameters(), self.run_dir, Path.cwd())
                # dbt's invocations share this process's Spark, and its profile says the same
                self.target_output = {**target_output, "server_side_parameters": own.parameters}
                self.notes.append("Spark (method: session) ran on the run's own copy of the catalog" + (
                    f" ({own.copied_from})" if own.copied_from else "") + ": the user's tables were read where "
                    "they are, and nothing but the run folder could be written")
            if confined and self.method == "session":
                # pyspark's own temporary folder (the gateway's connection file) in the run folder too: a
                # run killed while Spark starts leaves it where the next run's sweep removes it
                import tempfile

                saved, tempfile.tempdir = tempfile.tempdir, str(self.run_dir / "spark" / "tmp")
                try:
                    self.backend = make_backend(self.target_output)
                finally:
                    tempfile.tempdir = saved
            else:
                self.backend = make_backend(self.target_output)
        except BaseException:
            self._abandon()
            raise

    def _parameters(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.target_output.get("server_side_parameters") or {}).items()}

    # a parallel pool cannot share an in-process Spark's catalog (Derby: one process at a time)
    @property
    def parallel_ok(self) -> bool:
        return self.method != "session"

    @property
    def confinement_gap(self) -> str | None:
        if self._gap is not None:
            return f"Spark's method: session: {self._gap}"
        return None

    @property
    def unconfined_part(self) -> str | None:
        if self.method == "thrift":
            return ("the Spark cluster behind the Thrift server runs the SQL under its own permissions, which the "
                    "game day does not confine (docs/reliability.md says what they must forbid)")
        return None

    def prefix(self, sandbox: Sandbox) -> str:
        return f"{sandbox.name}{SEP}"

    def user_schema(self, schema: str) -> str:
        # `<sandbox>__raw` is the sandbox's copy of `raw` (a source() or ref() compiled in a sandbox)
        low = schema.lower()
        return low.split(SEP, 1)[1] if low.startswith(PREFIX) and SEP in low else schema

    def _connection(self, prefix: str | None) -> SparkConnection:
        if self.method == "thrift":
            # Each connection to a Thrift server is a Spark session of its own, and a session
            # caches what it read of a table: after dbt rewrote the table (in its own session) a
            # long-lived connection would look for files that are gone. One session per use.
            backend = ThriftBackend(self.target_output)
            return SparkConnection(backend, prefix, self.schemas, on_close=backend.close)
        return SparkConnection(self.backend, prefix, self.schemas)

    def connect(self, sandbox: Sandbox) -> SparkConnection:
        return self._connection(self.prefix(sandbox))

    def user_connection(self) -> SparkConnection:
        """The user's catalog as it is: only read."""
        return self._connection(None)

    def _new(self, role: str) -> Sandbox:
        # names carry the run's id, which no other run has (a dead run's are swept by that id)
        sandbox = Sandbox(self.sandbox_name(role), self.sandbox_name(role))
        self.sandboxes.append(sandbox)
        return sandbox

    def create_snapshot(self, sources: Iterable[SourceTable]) -> Sandbox:
        sandbox = self._new("snapshot")
        self.add_to_snapshot(sandbox, sources)
        return sandbox

    def add_to_snapshot(self, sandbox: Sandbox, sources: Iterable[SourceTable], empty: bool = False) -> None:
        """Copy sources from the user's catalog into the snapshot (`empty`: their columns only)."""
        with self.connect(sandbox) as con, self.user_connection() as user_con:
            for src in sources:
                self._copy_source(con, user_con, src, empty)

    def _copy_source(self, con: SparkConnection, user_con: SparkConnection, src: SourceTable, empty: bool) -> None:
        if src.database and src.database.lower() not in ("spark_catalog", src.schema.lower()):
            raise ConfigError(f"source {src.name} lives in catalog '{src.database}': only sources in the "
                              "session catalog can be copied")
        con.create_schema(src.schema)
        user = f"{ident(src.schema).sql(dialect='spark')}.{ident(src.identifier).sql(dialect='spark')}"
        try:
            parts = user_con.partitioned_by(src.schema, src.identifier)
            con._raw(f"create table {con._q(src.schema, src.identifier)} using parquet{parts} as "
                     f"select * from {user}{' where false' if empty else ''}")
        except Exception as err:  # noqa: BLE001
            raise ConfigError(f"source {src.name}: cannot read {src.schema}.{src.identifier}: "
                              f"{_first_line(err)}") from None
        if src.time_column and not empty:
            con.copy_table(src.schema, src.identifier, SNAPSHOT_SCHEMA, snapshot_table(src))

    @property
    def database_names(self) -> set[str]:
        """The names the session catalog goes by in compiled SQL (Spark has no database above the schema)."""
        return {"spark_catalog"}

    def user_relations(self) -> dict[tuple[str, str], tuple[str, str]]:
        """Every table and view of the user's catalog (the sandboxes' databases aside): (schema, name) lower
        case -> as stored."""
        out: dict[tuple[str, str], tuple[str, str]] = {}
        with self.user_connection() as con:
            for schema in con.databases():
                if schema.startswith(PREFIX):
                    continue
                out.update({(schema, n): (schema, n) for n in con._names("show tables", schema)})
        return out

    def clone(self, source: Sandbox, role: str, read_only: tuple[str, ...] = ()) -> Sandbox:
        """Tables are copied (Spark has no cheap copy of a parquet table without Delta); those of
        `read_only` schemas become views of the source's (which outlives the clone)."""
        sandbox = self._new(role)
        with self.connect(source) as src, self.connect(sandbox) as dst:
            self._clone(src, dst, source, sandbox, read_only)
        return sandbox

    def _clone(self, src: SparkConnection, dst: SparkConnection, source: Sandbox, sandbox: Sandbox,
               read_only: tuple[str, ...]) -> None:
        from ... import clock

        run = dst._raw
        old, new = self.prefix(source), self.prefix(sandbox)
        shared = {s.lower() for s in read_only}
        views = []
        for schema in src.databases():
            dst.create_schema(schema)
            tables = src._names("show tables", schema)
            view_names = src._names("show views", schema)
            for name in sorted(tables - view_names):
                kind = "view" if schema in shared else "table"
                how = f" using parquet{src.partitioned_by(schema, name)}" if kind == "table" else ""
                run(f"create {kind} {dst._q(schema, name)}{how} as select * from {src._q(schema, name)}")
            views += [(schema, name) for name in sorted(view_names)]
        for schema, name in views:
            text = run(f"show create table {src._q(schema, name)}")[1][0][0]
            body = re.split(r"\bAS\s", text, maxsplit=1, flags=re.IGNORECASE)[-1]
            run(f"create view {dst._q(schema, name)} as {body.replace(old, new)}")
        if clock.CLOCK_SCHEMA in src.databases():
            for statement in clock.function_sql("spark"):
                dst.execute(statement)

    def drop(self, sandbox: Sandbox) -> None:
        with self.connect(sandbox) as con:
            failed = self._drop(con)
        if sandbox in self.sandboxes:
            self.sandboxes.remove(sandbox)
        if failed:
            raise SandboxError(failed)

    def _drop(self, con: SparkConnection) -> str | None:
        failed = None
        for schema in con.databases():
            try:
                con._raw(f"drop database if exists {con._q(schema)} cascade")
            except Exception as err:  # noqa: BLE001
                failed = failed or f"could not remove sandbox database {con.physical(schema)}: {_first_line(err)}"
        return failed

    def profile_output(self, sandbox: Sandbox) -> dict:
        # The user's schema: `target.schema` renders as in production (a connector package writes it
        # into `source_relation` and hashes it into keys). Every relation is the sandbox's through
        # the manifest (prepare_manifest), and a name the SQL spells by hand through sql_rewriter.
        return dict(self.target_output)

    def prepare_manifest(self, manifest: Any, sandbox: Sandbox) -> None:
        # Every node and source of the project lives in the sandbox's copy of its schema; the
        # manifest is shared by every sandbox of the process, so the user's value is kept.
        prefix = self.prefix(sandbox)
        for collection in (manifest.nodes, manifest.sources):
            for uid, node in collection.items():
                if not getattr(node, "schema", None):
                    continue
                original = self._original_schema.setdefault(uid, node.schema)
                self.schemas.add(original.lower())
                node.schema = f"{prefix}{original.lower()}"
                if getattr(node, "relation_name", None):
                    name = getattr(node, "alias", None) or getattr(node, "identifier", None) or node.name
                    node.relation_name = f"{node.schema}.{name}"

    def sql_rewriter(self, sandbox: Sandbox) -> Callable[[str], str]:
        """What dbt's statements go through in this sandbox: names the project's SQL writes by hand
        (`analytics.log`) pointed at the sandbox's copy of the schema."""
        prefix = self.prefix(sandbox)
        return lambda sql: map_bare_schema(map_schemas(sql, prefix, self.schemas), prefix, self.schemas)

    def sweep(self) -> int:
        """Drop the databases of dead runs of this machine (their run folder is here, unlocked, or
        gone after the folder sweep below); then the folders."""
        try:
            names = [str(r[0]).lower() for r in self.backend.run(f"show databases like '{PREFIX}*'")[1]]
        except Exception:  # noqa: BLE001
            names = []
        dead: set[str] = set()
        for name in names:
            run = name[len(PREFIX):].split("_", 1)[0]
            if run == self.run_id or run in dead:
                continue
            folder = self.work_root / f"{PREFIX}{run}"
            # a run lives as long as its locked folder; an in-process catalog is this machine's
            # alone, so there a missing folder means a dead run too
            if (folder.is_dir() and lock_is_free(folder) and not is_kept(folder)) or (
                    self.method == "session" and not folder.exists()):
                dead.add(run)
        for name in names:
            if name[len(PREFIX):].split("_", 1)[0] in dead:
                try:
                    self.backend.run(f"drop database if exists {ident(name).sql(dialect='spark')} cascade")
                except Exception:  # noqa: BLE001 - the next sweep tries again
                    pass
        return super().sweep()

    def close(self) -> None:
        # the Thrift connection kept for sweeps; an in-process Spark stays up (dbt shares it)
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
        super().close()

