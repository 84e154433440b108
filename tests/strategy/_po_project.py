"""A dbt project using the `partition_overwrite` strategy, driven in-process on one engine.

Each model reads a raw table named `raw_<model>` that the test fills directly; the project is
parsed once and every later run reuses the manifest (one dbt invocation at a time).
"""
from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import yaml

from support.common import REPO_ROOT, duckdb_profile, postgres_profile

SHIM = (REPO_ROOT / "integration_tests" / "macros" / "get_incremental_partition_overwrite_sql.sql").read_text()


class DbtFailed(AssertionError):
    pass


class PoProject:
    """One dbt project + one warehouse (a DuckDB file or a PostgreSQL database)."""

    def __init__(self, root: Path, engine: str, models: dict[str, str], pg_server=None, dbname=None):
        self.root = Path(root)
        self.engine = engine
        self.pg_server = pg_server
        self.dbname = dbname
        self.db_path = self.root / "warehouse.duckdb"
        self.schema = "main" if engine == "duckdb" else "public"
        (self.root / "models").mkdir(parents=True, exist_ok=True)
        (self.root / "macros").mkdir(exist_ok=True)
        (self.root / "macros" / "get_incremental_partition_overwrite_sql.sql").write_text(SHIM)
        for name, sql in models.items():
            (self.root / "models" / f"{name}.sql").write_text(sql)
        (self.root / "dbt_project.yml").write_text(yaml.safe_dump({
            "name": "po_tests", "version": "1.0", "config-version": 2, "profile": "po_tests",
            "model-paths": ["models"], "macro-paths": ["macros"]}))
        (self.root / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
        self.write_profiles()
        self._manifest = None

    # -- profiles -------------------------------------------------------------------------
    def output(self, **extra) -> dict:
        if self.engine == "duckdb":
            # keep_open false: the test opens the file between dbt invocations.
            return duckdb_profile(self.db_path, schema=self.schema, keep_open=False, **extra)
        return postgres_profile(self.pg_server, self.dbname, schema=self.schema, **extra)

    def write_profiles(self) -> None:
        off = {"disable_transactions": True} if self.engine == "duckdb" else {"autocommit": True}
        outputs = {"dev": self.output(), "notx": self.output(**off)}
        (self.root / "profiles.yml").write_text(yaml.safe_dump(
            {"po_tests": {"target": "dev", "outputs": outputs}}))

    # -- dbt ------------------------------------------------------------------------------
    def _args(self, args: list[str]) -> list[str]:
        # No artifacts or file log per call: writing manifest.json costs ~0.3 s per invocation.
        return [*args, "--project-dir", str(self.root), "--profiles-dir", str(self.root),
                "--no-write-json", "--log-level-file", "none", "--log-level", "warn"]

    def setup(self, parse: bool = True) -> None:
        from dbt.cli.main import dbtRunner

        res = dbtRunner().invoke(self._args(["deps"]))
        if not res.success:
            raise DbtFailed(f"dbt deps failed: {res.exception}")
        if not parse:
            return
        res = dbtRunner().invoke(self._args(["parse"]))
        if not res.success:
            raise DbtFailed(f"dbt parse failed: {res.exception}")
        self._manifest = res.result

    def dbt(self, *args: str, reuse_manifest: bool = True):
        """Run dbt in-process; return (success, list of node messages, exception)."""
        from dbt.cli.main import dbtRunner

        runner = dbtRunner(manifest=self._manifest) if reuse_manifest else dbtRunner()
        res = runner.invoke(self._args(list(args)))
        messages = []
        self.last_by_node = {}
        if res.result is not None and hasattr(res.result, "results"):
            # models only: the package's on-run-start hook (a no-op unless the ledger is used) is a result too
            models = [r for r in res.result.results if r.node.resource_type.value == "model"]
            messages = [f"{r.status}: {r.message}" for r in models]
            self.last_by_node = {r.node.name: (str(r.status), r.message or "") for r in models}
        return res.success, messages, res.exception

    def run(self, model: str, *extra: str) -> None:
        ok, messages, exc = self.dbt("run", "--select", model, *extra)
        if not ok:
            raise DbtFailed(f"dbt run of {model} failed: {exc} {messages}")

    def run_fails(self, model: str, *extra: str, reuse_manifest: bool = True) -> str:
        ok, messages, exc = self.dbt("run", "--select", model, *extra, reuse_manifest=reuse_manifest)
        assert not ok, f"dbt run of {model} unexpectedly succeeded"
        assert exc is None, f"dbt crashed instead of failing the model: {exc}"
        return "\n".join(messages)

    # -- warehouse ------------------------------------------------------------------------
    def connect(self):
        if self.engine == "duckdb":
            import duckdb

            return duckdb.connect(str(self.db_path))
        return self.pg_server.connect(self.dbname)

    def sql(self, statements: str | list, params_rows=None, fetch: bool = False):
        conn = self.connect()
        try:
            cur = conn.cursor()
            if isinstance(statements, str):
                statements = [statements]
            out = None
            for stmt in statements:
                cur.execute(stmt)
                if fetch:
                    out = cur.fetchall()
            if self.engine == "postgres":
                conn.commit()
            return out
        finally:
            conn.close()

    def fill_raw(self, model: str, columns: str, rows: list[tuple]) -> None:
        """(Re)create raw_<model> with `columns` (SQL column defs) and exactly `rows`."""
        self.fill_raws({model: (columns, rows)})

    def fill_raws(self, tables: dict[str, tuple[str, list[tuple]]]) -> None:
        """fill_raw for several models through one connection: {model: (columns, rows)}."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            mark = "%s" if self.engine == "postgres" else "?"
            for model, (columns, rows) in tables.items():
                cur.execute(f"drop table if exists raw_{model}")
                cur.execute(f"create table raw_{model} ({columns})")
                if rows:
                    cur.executemany(f"insert into raw_{model} values ({', '.join([mark] * len(rows[0]))})", rows)
            if self.engine == "postgres":
                conn.commit()
        finally:
            conn.close()

    def rows(self, table: str, columns: str = "*") -> Counter:
        """The exact multiset of rows of a table."""
        return Counter(self.sql(f"select {columns} from {table}", fetch=True))

    def rows_of(self, tables) -> dict[str, Counter]:
        """The exact multiset of rows of each table, read through one connection."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            out = {}
            for table in tables:
                cur.execute(f"select * from {table}")
                out[table] = Counter(cur.fetchall())
            return out
        finally:
            conn.close()

    def drop_warehouse(self) -> None:
        if self.engine == "postgres":
            self.pg_server.drop_database(self.dbname)


def make_project(tmp_root: Path, engine: str, models: dict[str, str], pg_server=None,
                 parse: bool = True, project_class: type = PoProject) -> PoProject:
    dbname = pg_server.create_database("po") if engine == "postgres" else None
    project = project_class(tmp_root, engine, models, pg_server=pg_server, dbname=dbname)
    project.setup(parse=parse)
    return project


def model_sql(config: str, columns: str = "*") -> str:
    """A model reading its raw table; `config` is the body of config(...)."""
    return (
        "{{ config(materialized='incremental', incremental_strategy='partition_overwrite', "
        + config
        + ") }}\nselect " + columns + " from {{ target.schema }}.raw_{{ this.identifier }}\n"
    )


SPARK_SHIM = (REPO_ROOT / "integration_tests" / "macros" / "rerun_safety_spark_shim.sql").read_text()


def spark_literal(value) -> str:
    """A Python value as a Spark SQL literal (strings escaped for Spark's backslash-escaping parser)."""
    import datetime as dt

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dt.datetime):
        return f"timestamp'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"date'{value.isoformat()}'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


class SparkPoProject(PoProject):
    """The same project on the process's in-process Spark, in a schema of its own; raw_<model> is a
    view over literal rows (a catalog change only, no files written)."""

    def __init__(self, root: Path, engine: str, models: dict[str, str], pg_server=None, dbname=None):
        from support.spark import unique_schema

        self.spark_schema = unique_schema("po")
        super().__init__(root, engine, models, pg_server=pg_server, dbname=dbname)
        self.schema = self.spark_schema
        (self.root / "macros" / "rerun_safety_spark_shim.sql").write_text(SPARK_SHIM)

    def output(self, **extra) -> dict:
        from support.spark import spark_profile

        return spark_profile(self.spark_schema, **extra)

    def write_profiles(self) -> None:
        (self.root / "profiles.yml").write_text(yaml.safe_dump(
            {"po_tests": {"target": "dev", "outputs": {"dev": self.output()}}}))

    def sql(self, statements: str | list, params_rows=None, fetch: bool = False):
        from support.spark import spark_query

        out = None
        try:
            for stmt in [statements] if isinstance(statements, str) else statements:
                spark_query(f"use {self.spark_schema}")
                out = spark_query(stmt)
        finally:
            spark_query("use default")  # the session is shared: leave no schema current
        return out if fetch else None

    def fill_raws(self, tables: dict[str, tuple[str, list[tuple]]]) -> None:
        from support.spark import spark_query

        spark_query(f"create schema if not exists {self.spark_schema}")
        for model, (columns, rows) in tables.items():
            defs = [c.strip().split(" ", 1) for c in columns.split(",")]
            casts = ", ".join(f"cast(c{i} as {typ}) as {name}" for i, (name, typ) in enumerate(defs))
            if rows:
                values = ", ".join("(" + ", ".join(spark_literal(v) for v in row) + ")" for row in rows)
                names = ", ".join(f"c{i}" for i in range(len(defs)))
                body = f"select {casts} from values {values} as t({names})"
            else:
                body = "select " + ", ".join(f"cast(null as {typ}) as {name}" for name, typ in defs) + " where false"
            self.sql(f"create or replace view {self.spark_schema}.raw_{model} as {body}")

    def rows_of(self, tables) -> dict[str, Counter]:
        from support.spark import spark_query

        return {t: Counter(spark_query(f"select * from {self.spark_schema}.{t}")) for t in tables}

    def drop_warehouse(self) -> None:
        from support.spark import spark_query

        spark_query(f"drop schema if exists {self.spark_schema} cascade")
