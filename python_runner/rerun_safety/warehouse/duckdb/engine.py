"""DuckDB sandboxes: file copies taken after CHECKPOINT, one folder per run, held by a lock file."""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Sequence

import duckdb
import sqlglot
import sqlglot.errors
from sqlglot import exp

from ...errors import ConfigError, SandboxError
from .dialect import DUCKDB
from .session import release_duckdb
from ..base import SNAPSHOT_SCHEMA, Connection, Engine, Sandbox, SourceTable, ident, snapshot_table, table



class DuckDBConnection(Connection):
    dialect = DUCKDB

    def __init__(self, path: str, read_only: bool = False):
        self._path = path
        try:
            # shares the instance dbt-duckdb keeps open on this file, if any (same process)
            self._con = duckdb.connect(path, read_only=read_only)
        except duckdb.ConnectionException:
            # dbt holds the file with other settings (the profile's `settings`): close dbt's
            release_duckdb()
            self._con = duckdb.connect(path, read_only=read_only)

        # The catalog is the file's stem. When a schema has the same name, DuckDB refuses a
        # two-part name as ambiguous ("raw.events" in raw.duckdb): name the catalog too.
        self._catalog = str(self._con.execute("select current_database()").fetchone()[0])
        self._catalog_is_a_schema = False
        # the catalog's name before a dot: a two-part name that may read it as a schema
        self._names_catalog = re.compile(rf'(?<![\w$]){re.escape(self._catalog)}"?\s*\.', re.IGNORECASE)

    def sql(self, expression) -> str:
        if isinstance(expression, str):
            # Text SQL goes as it is unless the ambiguity exists: a schema named like the catalog
            # (asked once it does; a schema is never dropped while a connection lives).
            if not self._names_catalog.search(expression) or not self._ambiguous():
                return expression
            try:
                expression = sqlglot.parse_one(expression, read="duckdb")
            except sqlglot.errors.ParseError:
                return expression
        expression = expression.copy()
        for t in expression.find_all(exp.Table):
            if t.args.get("db") is not None and not t.args.get("catalog") and t.name and \
                    t.db.lower() not in ("information_schema", "pg_catalog"):
                t.set("catalog", ident(self._catalog))
        return expression.sql(dialect=self.dialect)

    def _ambiguous(self) -> bool:
        if not self._catalog_is_a_schema:
            self._catalog_is_a_schema = bool(self._con.execute(
                "select count(*) from information_schema.schemata where catalog_name = ? and schema_name = ?",
                [self._catalog, self._catalog]).fetchone()[0])
        return self._catalog_is_a_schema

    def execute(self, sql, params: Sequence[Any] | None = None) -> None:
        self._touched(sql)
        self._con.execute(self.sql(sql), params or [])

    def execute_temp(self, sql: str) -> None:
        """DDL of this session's temporary tables alone: they are not in the cached catalog."""
        self._con.execute(sql)

    def fetchall(self, sql) -> list[tuple]:
        return self._con.execute(self.sql(sql)).fetchall()

    def fetch_dicts(self, sql) -> list[dict]:
        cur = self._con.execute(self.sql(sql))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def close(self) -> None:
        try:
            if self._path != ":memory:":  # the diff's own connection holds nothing to write
                self._con.execute("checkpoint")
        except duckdb.Error:
            pass
        self._con.close()


class DuckDBEngine(Engine):
    dialect = DUCKDB

    def __init__(self, target_output: dict, work_root: Path, run_id: str, attach: bool = False,
                 statement_guard: bool = True):
        path = str(target_output.get("path") or "")
        if path.startswith("md:") or path.startswith("motherduck:"):
            raise ConfigError(f"DuckDB target path '{path}' is a MotherDuck database, which the game day "
                              "cannot copy: point the profile at a DuckDB file")
        self._original_location: dict[str, Any] = {}
        self.files_read: tuple[str, ...] = ()
        # An in-memory target (dbt-duckdb's default) holds nothing between runs: a project whose
        # inputs are seeds (or files) runs as is; a source to copy gets one clear error (add_to_snapshot).
        # The same for a file that does not exist yet (dbt-duckdb creates it at the first run).
        self.user_path: Path | None = None
        self.stem = "memory"  # the database name dbt-duckdb gives ':memory:', kept by the sandboxes' files
        self._no_sources = "an in-memory DuckDB (path ':memory:'), which holds no tables between runs"
        if path and path != ":memory:":
            self.user_path = Path(path).expanduser().resolve()
            self.stem = self.user_path.stem
            if not self.user_path.exists():
                self._no_sources = (f"the DuckDB file {self.user_path}, which does not exist yet (dbt creates "
                                    "it at the first run)")
                self.user_path = None
        if self.user_path is not None and self.user_path.is_relative_to(Path(work_root).resolve()):
            # sandboxes are created and swept there: the user's file could be taken for a leftover
            raise SandboxError(f"refusing to run: DuckDB file {self.user_path} is inside the runner's work "
                               f"root {Path(work_root).resolve()}, where sandboxes are created and removed")
        super().__init__(target_output, work_root, run_id, attach, statement_guard)

    def _path(self, role: str) -> Path:
        return self.run_dir / role / f"{self.stem}.duckdb"

    def _guard(self, path: Path) -> None:
        if path.resolve() == self.user_path:
            raise SandboxError(f"refusing to use the user's own database {self.user_path} as a sandbox")

    def create_snapshot(self, sources: Iterable[SourceTable]) -> Sandbox:
        path = self._path("snapshot")
        self._guard(path)
        path.parent.mkdir(parents=True)
        sandbox = Sandbox(self.sandbox_name("snapshot"), str(path))
        self.sandboxes.append(sandbox)
        self.add_to_snapshot(sandbox, sources)
        path.chmod(0o600)  # a copy of production: the owner's only
        return sandbox

    def add_to_snapshot(self, sandbox: Sandbox, sources: Iterable[SourceTable], empty: bool = False) -> None:
        """Copy sources from the user's file into the snapshot (`empty`: their columns only)."""
        sources = list(sources)
        if self.user_path is None and (stored := [s for s in sources if not s.external]):
            raise ConfigError(f"source {stored[0].name} is read from the target, {self._no_sources}: point the "
                              "profile at the DuckDB file that holds it")
        release_duckdb()  # a dbt invocation in the snapshot holds it open, confined to the sandbox
        con = DuckDBConnection(sandbox.location)
        try:
            if self.user_path is not None:
                self._attach_user(con)
            for src in sources:
                if src.database and src.database != self.stem:
                    raise ConfigError(f"source {src.name} lives in database '{src.database}', not in the "
                                      f"target's '{self.stem}': only sources in the target database can be copied")
                con.create_schema(src.schema)
                user_table = exp.Table(this=ident(src.identifier), db=ident(src.schema), catalog=ident("rs_user"))
                try:
                    if src.external:
                        # a file read through `external_location` (parquet, CSV): copied as a table,
                        # which the sandboxes' manifest reads instead of the file
                        con.execute(f"create table {table(src.schema, src.identifier).sql(dialect='duckdb')} "
                                    f"as select * from {src.external}")
                    else:
                        select = exp.select("*").from_(user_table)
                        con.execute(exp.Create(this=table(src.schema, src.identifier), kind="TABLE",
                                               expression=select.where(exp.false()) if empty else select))
                except duckdb.Error as err:
                    where = src.external or f"{src.schema}.{src.identifier} from {self.user_path}"
                    raise ConfigError(f"source {src.name}: cannot read {where}: {str(err).splitlines()[0]}") from None
                if src.time_column and not empty:
                    con.copy_table(src.schema, src.identifier, SNAPSHOT_SCHEMA, snapshot_table(src))
            if self.user_path is not None:
                con.execute("detach rs_user")
        finally:
            con.close()

    @property
    def database_names(self) -> set[str]:
        """The names the target's own database goes by in compiled SQL."""
        return {self.stem.lower()}

    def _attach_user(self, con: DuckDBConnection) -> None:
        try:
            con.execute(_attach_read_only(str(self.user_path)))
        except duckdb.Error as err:
            raise SandboxError(f"cannot open {self.user_path} read-only: {str(err).splitlines()[0]}") from None

    def user_relations(self) -> dict[tuple[str, str], tuple[str, str]]:
        """Every table and view in the user's file: (schema, name) lower case -> as stored (read
        through the same read-only attach as the copy, with its error for a file that cannot be opened)."""
        if self.user_path is None:
            return {}
        con = DuckDBConnection(":memory:")
        try:
            self._attach_user(con)
            return {(str(sch).lower(), str(n).lower()): (str(sch), str(n)) for sch, n in con.fetchall(
                "select schema_name, table_name from duckdb_tables() where database_name = 'rs_user' "
                "union all select schema_name, view_name from duckdb_views() "
                "where database_name = 'rs_user' and not internal")}
        finally:
            con.close()

    def user_columns(self, relations):
        wanted = {(str(sch).lower(), str(n).lower()): (sch, n) for sch, n in relations}
        if self.user_path is None or not wanted:
            return {}
        con = DuckDBConnection(":memory:")
        try:
            self._attach_user(con)
            rows = con.fetchall("select schema_name, table_name, column_name, data_type from duckdb_columns() "
                                "where database_name = 'rs_user' order by column_index")
        except SandboxError:
            return {}
        finally:
            con.close()
        out: dict = {}
        for sch, table_name, col, typ in rows:
            key = wanted.get((str(sch).lower(), str(table_name).lower()))
            if key is not None:
                out.setdefault(key, []).append((str(col), str(typ)))
        return out

    def clone(self, source: Sandbox, role: str, read_only: tuple[str, ...] = ()) -> Sandbox:
        path = self._path(role)
        self._guard(path)
        path.parent.mkdir(parents=True, exist_ok=False)
        src = Path(source.location)
        release_duckdb()  # dbt may hold the source open (keep_open): checkpoint and close it first
        wal = src.with_name(src.name + ".wal")
        if wal.exists():
            # Rows still in the WAL would be missing from a plain file copy.
            DuckDBConnection(str(src)).close()
        try:
            shutil.copyfile(src, path)
            path.chmod(0o600)  # a copy of production: the owner's only
        except OSError as err:
            raise SandboxError(f"cannot copy sandbox {src} to {path}: {err}") from None
        sandbox = Sandbox(self.sandbox_name(role), str(path))
        self.sandboxes.append(sandbox)
        return sandbox

    def keep(self) -> list[str]:
        """Every sandbox file of this run: those the workers made too (this process knows only its own)."""
        super().keep()
        pattern = self._path("*").relative_to(self.run_dir)  # every role's file
        return sorted(str(p) for p in self.run_dir.glob(str(pattern))) or [str(self.run_dir)]

    def release(self, sandbox: Sandbox) -> None:
        release_duckdb()  # dbt-duckdb keeps a sandbox's file open between invocations (keep_open)

    def drop(self, sandbox: Sandbox) -> None:
        release_duckdb()
        shutil.rmtree(Path(sandbox.location).parent, ignore_errors=True)
        if sandbox in self.sandboxes:
            self.sandboxes.remove(sandbox)

    def connect(self, sandbox: Sandbox) -> DuckDBConnection:
        self._guard(Path(sandbox.location))
        return DuckDBConnection(sandbox.location)

    def _external_dir(self, sandbox: Sandbox) -> Path:
        """Where the sandbox's external models write (dbt-duckdb `materialized='external'`)."""
        return Path(sandbox.location).parent / "external"

    def profile_output(self, sandbox: Sandbox) -> dict:
        out = dict(self.target_output)
        out["path"] = sandbox.location
        # External models without a `location` write to external_root (default: the working
        # directory, i.e. the user's project): keep those files inside the sandbox.
        root = self._external_dir(sandbox) / "root"
        root.mkdir(parents=True, exist_ok=True)
        out["external_root"] = str(root)
        # opened once per sandbox, not once per connection (see session.release_duckdb)
        out["keep_open"] = True
        # Databases attached by the profile are the user's: dbt may read them, never write.
        if out.get("attach"):
            out["attach"] = [dict(a, read_only=True) for a in out["attach"]]
        # Files: the sandbox's folder, and the attached databases to read (see duckdb_confine).
        from .confine import CONFIG_KEY, EARLY_SETTINGS

        paths = [str(Path(a["path"]).resolve()) for a in out.get("attach") or []
                 if isinstance(a, dict) and a.get("path") and "://" not in str(a["path"])
                 and not str(a["path"]).startswith(":")]
        settings = dict(out.get("settings") or {})
        early = {k: settings.pop(k) for k in list(settings) if k.lower() in EARLY_SETTINGS}
        if "settings" in out:
            out["settings"] = settings
        read_dirs = [f for f in self.files_read if f.endswith("/")]
        read_files = [f for f in self.files_read if not f.endswith("/")]
        confine = {"module": "rerun_safety.warehouse.duckdb.confine",
                   "config": {CONFIG_KEY: {"directories": [str(Path(sandbox.location).parent.resolve()), *read_dirs],
                                           "paths": [*paths, *[f"{p}.wal" for p in paths], *read_files],
                                           "early_settings": early}}}
        if self.statement_guard:
            out["plugins"] = [*(out.get("plugins") or []), confine]
        return out


    def learn_project(self, manifest: Any) -> None:
        import os

        self.files_read = files_read(manifest, os.getcwd())

    def prepare_manifest(self, manifest: Any, sandbox: Sandbox) -> None:
        # An external model with a `location` writes the user's real file (a local path or an
        # object store URL) on every run: point each at a file of the same name inside the sandbox.
        # The manifest is shared by every sandbox of the process, so the user's value is kept.
        for uid, node in manifest.nodes.items():
            config = getattr(node, "config", None)
            if config is None or config.get("materialized") != "external":
                continue
            original = self._original_location.setdefault(uid, config.get("location"))
            if original:
                config["location"] = str(_redirect(str(original), self._external_dir(sandbox) / "location"))
            # After writing the file, `plugin` / `glue_register` hand the relation to a plugin's
            # store(): an AWS Glue catalog, a database through SQLAlchemy, a spreadsheet... outside
            # any sandbox. The sandbox keeps the file and its view only.
            config["plugin"] = None
            config["glue_register"] = False


# A file a model's SQL names: read_csv('data/x.csv'), from 'landing/*.parquet'
_FILE_LITERAL = re.compile(r"'([^'\n]+?\.(?:csv|tsv|txt|parquet|json|jsonl|ndjson|arrow|avro|xlsx)(?:\.gz|\.zst)?)'",
                           re.IGNORECASE)


def files_read(manifest: Any, cwd: str | Path) -> tuple[str, ...]:
    """Local files (and, for a glob, the folder before its first wildcard, ending in /) that models'
    SQL names, and the seeds' CSV files: what a confined sandbox (duckdb_confine) may still read.
    Hooks are not looked at: a hook's file is what confinement is for."""
    found: set[str] = set()
    for node in manifest.nodes.values():
        kind = str(getattr(node, "resource_type", "")).split(".")[-1]
        if kind == "seed":  # dbt-duckdb loads a seed with DuckDB's CSV reader
            found.add(str(Path(node.root_path, node.original_file_path).resolve()))
        if kind != "model":
            continue
        for literal in _FILE_LITERAL.findall(getattr(node, "raw_code", "") or ""):
            if "://" in literal or "{{" in literal:
                continue
            wild = re.search(r"[*?\[{]", literal)
            if wild:
                folder = Path(cwd, literal[:wild.start()]).resolve()
                found.add(str(folder if literal[:wild.start()].endswith("/") else folder.parent) + "/")
            else:
                found.add(str(Path(cwd, literal).resolve()))
    return tuple(sorted(found))


def _redirect(location: str, base: Path) -> Path:
    """`location` (absolute, relative or a URL such as s3://bucket/key) as a path under `base`,
    keeping its folders and file name (the format can come from the extension)."""
    scheme, sep, rest = location.partition("://")
    parts = [scheme, *rest.split("/")] if sep else location.split("/")
    kept = [p for p in parts if p not in ("", ".", "..")]
    if not kept:
        kept = ["external"]
    path = base.joinpath(*kept)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _attach_read_only(path: str) -> str:
    return f"attach {exp.Literal.string(path).sql('duckdb')} as rs_user (read_only)"


