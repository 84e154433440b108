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

import re
from pathlib import Path
from typing import Any, Callable, Iterable

from ...errors import ConfigError, SandboxError
from ...errors import first_line as _first_line
from . import own_catalog
from .dialect import SPARK
# the connection and the name mapping, importable from here as before
from .connection import SEP, SparkConnection, map_bare_schema, map_schemas  # noqa: F401
from ..base import (CLOCK_SCHEMA, CLOCK_TABLE, PREFIX, SNAPSHOT_SCHEMA, Engine, Sandbox, SourceTable, ident, is_kept,
                    lock_is_free, snapshot_table)

# the backends, importable from here as before (dbt_invoke, the tests, the benchmarks)
from .backends import (CLOSE_TIMEOUT_S, SessionBackend, ThriftBackend, Backend,  # noqa: F401
                       close_hive_connection, make_backend, thrift_socket)


# ---------------------------------------------------------------------------------- engine
class SparkEngine(Engine):
    dialect = SPARK

    def __init__(self, target_output: dict, work_root: Path, run_id: str, attach: bool = False,
                 confined: bool = False, statement_guard: bool = True):
        """`confined`: a game day confined by privilege; an in-process Spark then keeps its catalog and
        files in the run folder (own_catalog.py)."""
        self.method = str(target_output.get("method") or "")
        schema = str(target_output.get("schema") or "")
        if schema.lower().startswith(PREFIX):
            raise SandboxError(f"refusing to run: the target schema '{schema}' starts with the sandbox prefix '{PREFIX}'")
        super().__init__(target_output, work_root, run_id, attach, statement_guard)
        from ..base import REFERENCE_SCHEMA

        # the names the runner's own SQL uses, known from the start: text naming them is pointed
        # at a sandbox from the first statement on (the project's join when it is parsed)
        self.schemas: set[str] = {REFERENCE_SCHEMA, SNAPSHOT_SCHEMA, CLOCK_SCHEMA, "rerun_safety_prehook",
                                  *([schema.lower()] if schema else [])}
        self._original_schema: dict[str, str] = {}
        self.backend: Backend | None = None
        own = confined and self.method == "session"
        self._gap = own_catalog.gap(self._parameters()) if own else None
        if self._gap is not None:
            return  # refused by the game day (confinement_gap) before Spark starts
        try:
            self.backend = self._start_own_catalog() if own else make_backend(self.target_output)
        except BaseException:
            self._abandon()
            raise

    def _start_own_catalog(self) -> Backend:
        """The confined in-process Spark, on the run's own copy of the user's catalog (own_catalog.py)."""
        import tempfile

        own = own_catalog.own_catalog(self._parameters(), self.run_dir, Path.cwd())
        # dbt's invocations share this process's Spark, and its profile says the same
        self.target_output = {**self.target_output, "server_side_parameters": own.parameters}
        self.notes.append("Spark (method: session) ran on the run's own copy of the catalog" + (
            f" ({own.copied_from})" if own.copied_from else "") + ": the user's tables were read where "
            "they are, and nothing but the run folder could be written")
        # pyspark's own temporary folder (the gateway's connection file) in the run folder too: a run killed
        # while Spark starts leaves it where the next run's sweep removes it
        saved, tempfile.tempdir = tempfile.tempdir, str(self.run_dir / "spark" / "tmp")
        try:
            return make_backend(self.target_output)
        finally:
            tempfile.tempdir = saved

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
        if CLOCK_SCHEMA in src.databases():
            for statement in self.dialect.clock_functions(CLOCK_SCHEMA, CLOCK_TABLE):
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

