"""Scratch catalogs where the lint compiles: an empty DuckDB file in a temp dir, or a throwaway
PostgreSQL database on the target's server. The user's target is only ever read.

What the compiled SQL introspects is created here with its real columns and no rows: sources,
seeds and snapshots (columns read from the user's target, else from their YAML or CSV), and the
models themselves (created from their compiled SQL, `limit 0`), so that `get_columns_in_relation`,
`deduplicate`, `dbt_utils.star` and `run_query` on the catalog see what `dbt compile` would see.

Every run works in a folder `<tmp>/rerun_safety_lint_<id>` that holds a locked `lock` file while
the run lives, and (PostgreSQL) a database of the same name guarded by an advisory lock: a later
run removes both when their owner died (SIGKILL). Secrets from the profile reach dbt through the
environment, never through a file.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import yaml
from sqlglot import exp

from ..errors import ConfigError
from ..secrets import password_of, secrets_through_env

SCRATCH_PREFIX = "rerun_safety_lint_"
SECRET_ENV_PREFIX = "DBT_ENV_SECRET_RERUN_SAFETY_LINT_"
PLACEHOLDER_COLUMN = "_rerun_safety_lint"


@dataclass(frozen=True)
class TargetProfile:
    profile_name: str
    target_name: str
    output: dict

    @property
    def adapter_type(self) -> str:
        return str(self.output.get("type", ""))


@dataclass(frozen=True)
class RelationSpec:
    """A relation to create empty: from columns [(name, type)], or from a query (`select`)."""

    database: str | None
    schema: str
    name: str
    columns: tuple[tuple[str, str], ...] = ()
    select: str | None = None
    kind: str = "table"  # table | view

    @property
    def key(self) -> tuple[str, str]:
        return (self.schema.lower(), self.name.lower())


def _ident(text: str) -> exp.Identifier:
    return exp.to_identifier(text, quoted=True)


def _table(database: str | None, schema: str, name: str) -> exp.Table:
    return exp.Table(this=_ident(name), db=_ident(schema), catalog=_ident(database) if database else None)


def _datatype(type_text: str, dialect: str) -> exp.DataType:
    try:
        return exp.DataType.build(type_text, dialect=dialect)
    except Exception:  # a type sqlglot cannot read (an extension's, a user-defined enum): text
        return exp.DataType.build("text")


def create_statements(spec: RelationSpec, dialect: str, with_database: bool) -> list[str]:
    """`create schema` plus the empty relation, as SQL in `dialect`; names quoted."""
    database = spec.database if with_database else None
    schema = exp.Create(this=exp.Table(this=_ident(spec.schema), db=_ident(database) if database else None),
                        kind="SCHEMA", exists=True).sql(dialect=dialect)
    table = _table(database, spec.schema, spec.name).sql(dialect=dialect)
    if spec.select is not None:
        # the model's own compiled SQL, run with no rows; it replaces a placeholder table
        query = f"select * from ({spec.select}\n) as _rerun_safety_lint_q limit 0"
        drop = f"drop table if exists {table}" if spec.kind == "table" else None
        return [s for s in (schema, drop, f"create {spec.kind} {table} as {query}") if s]
    columns = spec.columns or ((PLACEHOLDER_COLUMN, "int"),)
    ddl = exp.Create(this=exp.Schema(this=_table(database, spec.schema, spec.name), expressions=[
        exp.ColumnDef(this=_ident(name), kind=_datatype(kind, dialect)) for name, kind in columns]),
        kind="TABLE", exists=True).sql(dialect=dialect)
    return [schema, ddl]


def _batch(specs: list[RelationSpec], dialect: str, with_database: bool) -> list[str]:
    """The statements of all specs, each schema created once."""
    out, schemas = [], set()
    for spec in specs:
        schema, *rest = create_statements(spec, dialect, with_database)
        if schema not in schemas:
            schemas.add(schema)
            out.append(schema)
        out += rest
    return out


# ---------------------------------------------------------------------------------------------
# Secrets and profiles
# ---------------------------------------------------------------------------------------------

def env_profile_output(output: dict) -> dict:
    """The output with every secret, at any depth, replaced by `{{ env_var(...) }}`; the values go to
    this process's environment (inherited by a worker process), as the game day does."""
    return secrets_through_env(output, prefix=SECRET_ENV_PREFIX)


def write_profile(directory: Path, tp: TargetProfile, output: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "profiles.yml"
    doc = {tp.profile_name: {"target": tp.target_name, "outputs": {tp.target_name: env_profile_output(output)}}}
    path.write_text(yaml.safe_dump(doc))
    os.chmod(path, 0o600)
    return directory


# ---------------------------------------------------------------------------------------------
# Run folders: locked while alive, swept when their owner died
# ---------------------------------------------------------------------------------------------

class RunDir:
    """`<tmp>/rerun_safety_lint_<id>`, created with a locked `lock` file (atomically, so that a
    sweep never sees it unlocked)."""

    def __init__(self, root: Path | None = None):
        root = Path(root or tempfile.gettempdir())
        self.run_id = uuid.uuid4().hex[:12]
        self.path = root / f"{SCRATCH_PREFIX}{self.run_id}"
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".rerun_safety_lint_new_"))
        self._lock = open(tmp / "lock", "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        tmp.rename(self.path)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            self._lock.close()
        except OSError:
            pass


def sweep_run_dirs(root: Path | None = None, keep: Path | None = None) -> int:
    """Remove run folders whose run is dead (their lock is free); returns how many."""
    root = Path(root or tempfile.gettempdir())
    removed = 0
    for folder in root.glob(f"{SCRATCH_PREFIX}*"):
        if folder == keep or not folder.is_dir():
            continue
        lock_path = folder / "lock"
        if not lock_path.exists():
            continue  # not ours (or a run from before run folders were locked)
        try:
            with open(lock_path, "a") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        except BlockingIOError:
            continue  # a live run holds it
        except OSError:
            continue
    return removed


def pg_lock_key(run_id: str) -> int:
    return zlib.crc32(f"rerun_safety_lint:{run_id}".encode()) - 2**31


def point_manifest(manifest, user_db: str, scratch_db: str) -> None:
    """Move every node and source of the user's database to the scratch database (in memory)."""
    for collection in (manifest.nodes, manifest.sources):
        for node in collection.values():
            if (getattr(node, "database", None) or "") != user_db:
                continue
            node.database = scratch_db
            if getattr(node, "relation_name", None):
                ident = getattr(node, "alias", None) or getattr(node, "identifier", None) or node.name
                node.relation_name = ".".join(
                    '"{}"'.format(str(p).replace('"', '""')) for p in (scratch_db, node.schema, ident))


# ---------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------

class Scratch:
    """Where compiles run. `profiles_dir()` for dbt; `create(specs)` makes relations exist empty;
    `columns(keys)` reads back their columns; `close()` removes everything."""

    mode = ""
    dialect = ""
    extra_flags: tuple[str, ...] = ()
    incremental_possible = True

    def profiles_dir(self) -> str:
        raise NotImplementedError

    def worker_profiles_dir(self, work: Path) -> str:
        """Profiles for a second process compiling at the same time."""
        return self.profiles_dir()

    def create(self, specs: Iterable[RelationSpec]) -> dict[tuple[str, str], str]:
        """Create each relation (in order); returns {key: error} for those that failed."""
        raise NotImplementedError

    def columns(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """(schema, name) -> [(column, type)] of every relation in the scratch catalog, lowercased."""
        raise NotImplementedError

    def close(self) -> None:
        pass


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


class DuckDBScratch(Scratch):
    mode = "scratch duckdb file"
    dialect = "duckdb"

    def __init__(self, tp: TargetProfile, work: Path, catalogs: list[str]):
        self.dir = work / "scratch_duckdb"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.catalogs = [c for c in dict.fromkeys(catalogs) if c] or ["scratch"]
        main, *others = self.catalogs
        output = {"type": "duckdb", "path": str(self.dir / f"{main}.duckdb"),
                  "schema": tp.output.get("schema", "main"), "threads": 1, "keep_open": False}
        for key in ("extensions", "settings"):
            if tp.output.get(key):
                output[key] = tp.output[key]
        if others:
            output["attach"] = [{"path": str(self.dir / f"{c}.duckdb"), "alias": c} for c in others]
        self.tp = tp
        self._profiles = write_profile(work / "scratch_profile", tp, output)

    def profiles_dir(self) -> str:
        return str(self._profiles)

    def worker_profiles_dir(self, work: Path) -> str:
        # a DuckDB file is locked by the process that opens it: the worker gets its own copy
        copy = work / "scratch_duckdb_pass2"
        shutil.copytree(self.dir, copy, dirs_exist_ok=True)
        profile = yaml.safe_load((self._profiles / "profiles.yml").read_text())
        for prof in profile.values():
            for out in prof["outputs"].values():
                out["path"] = str(copy / Path(out["path"]).name)
                for att in out.get("attach", []):
                    att["path"] = str(copy / Path(att["path"]).name)
        target = work / "scratch_profile_pass2"
        target.mkdir(parents=True, exist_ok=True)
        (target / "profiles.yml").write_text(yaml.safe_dump(profile))
        os.chmod(target / "profiles.yml", 0o600)
        return str(target)

    def _connect(self):
        import duckdb

        main, *others = self.catalogs
        con = duckdb.connect(str(self.dir / f"{main}.duckdb"))
        for c in others:
            path = exp.Literal.string(str(self.dir / f"{c}.duckdb")).sql("duckdb")
            con.execute(f"attach if not exists {path} as {_ident(c).sql('duckdb')}")
        return con

    def create(self, specs):
        failed: dict[tuple[str, str], str] = {}
        specs = list(specs)
        if not specs:
            return failed
        con = self._connect()
        try:
            try:  # all in one transaction first: one commit instead of one per relation
                con.execute("begin")
                for stmt in _batch(specs, "duckdb", with_database=True):
                    con.execute(stmt)
                con.execute("commit")
                specs = []
            except Exception:  # then one at a time, to keep those that work and say why the others fail
                con.execute("rollback")
            for spec in specs:
                # one transaction each: a query that fails here leaves the placeholder in place
                con.execute("begin")
                try:
                    for stmt in create_statements(spec, "duckdb", with_database=True):
                        con.execute(stmt)
                    con.execute("commit")
                except Exception as err:  # the model's SQL does not run here: no relation, a reason
                    con.execute("rollback")
                    failed[spec.key] = _first_line(err)
            con.execute("checkpoint")
        finally:
            con.close()
        return failed

    def columns(self):
        con = self._connect()
        try:
            rows = con.execute("select table_schema, table_name, column_name, data_type "
                               "from information_schema.columns order by table_catalog, table_schema, "
                               "table_name, ordinal_position").fetchall()
        finally:
            con.close()
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for schema, name, column, kind in rows:
            out.setdefault((schema.lower(), name.lower()), []).append((column.lower(), str(kind).lower()))
        return out


class PostgresScratch(Scratch):
    """A database `rerun_safety_lint_<run id>` on the target's server. An admin connection holds an
    advisory lock for the run's life, so that a later run's sweep drops it only once we died."""

    mode = "scratch postgres database"
    dialect = "postgres"
    extra_flags = ("--no-populate-cache",)

    def __init__(self, tp: TargetProfile, work: Path, run_id: str):
        import psycopg2

        self.tp = tp
        self.user_db = str(tp.output.get("dbname") or tp.output.get("database") or "")
        self.dbname = f"{SCRATCH_PREFIX}{run_id}"
        self.run_id = run_id
        self.created = False
        self.refusal = ""
        self.admin = None
        try:
            self.admin = self._admin()
            with self.admin.cursor() as cur:
                cur.execute("select pg_advisory_lock(%s)", [pg_lock_key(run_id)])
            self.swept = self._sweep()
            with self.admin.cursor() as cur:
                cur.execute(f"create database {self._quoted(self.dbname)}")
            self.created = True
        except psycopg2.Error as err:
            self.refusal = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if self.admin is None:  # not a missing privilege: the target cannot be reached at all
                raise ConfigError(f"cannot connect to the PostgreSQL server of target '{tp.target_name}': "
                                  f"{self.refusal}") from None
        self.incremental_possible = self.created
        output = dict(tp.output)
        if self.created:
            output["dbname"] = self.dbname
            output.pop("database", None)
            self._profiles = write_profile(work / "scratch_profile", tp, output)
        else:
            self.mode = f"not checked (no scratch database: {self.refusal})"
            self._profiles = write_profile(work / "target_profile", tp, output)

    def _admin(self):
        import psycopg2

        last = None
        for db in ("postgres", "template1", self.user_db):
            try:
                conn = psycopg2.connect(**self._dsn(db))
                conn.autocommit = True
                return conn
            except psycopg2.Error as err:
                last = err
        raise last  # type: ignore[misc]

    @staticmethod
    def _quoted(name: str) -> str:
        return _ident(name).sql("postgres")

    def _dsn(self, dbname: str) -> dict:
        out = self.tp.output
        dsn = {"host": out.get("host"), "port": out.get("port", 5432), "user": out.get("user"),
               "password": password_of(out) or None, "dbname": dbname}
        for key in ("sslmode", "sslcert", "sslkey", "sslrootcert", "connect_timeout"):
            if out.get(key) is not None:
                dsn[key] = out[key]
        return {k: v for k, v in dsn.items() if v is not None}

    def _sweep(self) -> int:
        """Drop scratch databases whose run died (their advisory lock is free); one this user may
        not drop (another user's) stays for its owner's next run."""
        import psycopg2

        removed = 0
        with self.admin.cursor() as cur:
            cur.execute("select datname from pg_database where starts_with(datname, %s)", [SCRATCH_PREFIX])
            names = [r[0] for r in cur.fetchall()]
        for name in names:
            run = name[len(SCRATCH_PREFIX):]
            if run == self.run_id or name == self.user_db:
                continue
            key = pg_lock_key(run)
            with self.admin.cursor() as cur:
                cur.execute("select pg_try_advisory_lock(%s)", [key])
                if not cur.fetchone()[0]:
                    continue  # its run is alive
                try:
                    cur.execute(f"drop database if exists {self._quoted(name)} with (force)")
                    removed += 1
                except psycopg2.Error:
                    pass
                finally:
                    cur.execute("select pg_advisory_unlock(%s)", [key])
        return removed

    def profiles_dir(self) -> str:
        return str(self._profiles)

    def prepare_manifest(self, manifest) -> None:
        """dbt-postgres bakes the database into each node at parse time and refuses cross-database
        references (`information_schema.columns` of the user's database, from the scratch one):
        point what lives in the user's database at the scratch database."""
        if self.created:
            point_manifest(manifest, self.user_db, self.dbname)

    def _connect(self):
        import psycopg2

        conn = psycopg2.connect(**self._dsn(self.dbname))
        conn.autocommit = True
        return conn

    def create(self, specs):
        failed: dict[tuple[str, str], str] = {}
        specs = list(specs)
        if not specs or not self.created:
            return failed
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                try:  # all in one transaction first: one commit instead of one per relation
                    cur.execute("begin")
                    for stmt in _batch(specs, "postgres", with_database=False):
                        cur.execute(stmt)
                    cur.execute("commit")
                    specs = []
                except Exception:  # then one at a time, to keep those that work and say why the others fail
                    cur.execute("rollback")
                for spec in specs:
                    cur.execute("begin")  # a query that fails here leaves the placeholder in place
                    try:
                        for stmt in create_statements(spec, "postgres", with_database=False):
                            cur.execute(stmt)
                        cur.execute("commit")
                    except Exception as err:
                        cur.execute("rollback")
                        failed[spec.key] = _first_line(err)
        finally:
            conn.close()
        return failed

    def columns(self):
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        if not self.created:
            return out
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("select n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod) "
                            "from pg_attribute a join pg_class c on c.oid = a.attrelid "
                            "join pg_namespace n on n.oid = c.relnamespace "
                            "where a.attnum > 0 and not a.attisdropped and c.relkind in ('r', 'v', 'm', 'p', 'f') "
                            "and n.nspname not in ('pg_catalog', 'information_schema') "
                            "and n.nspname not like 'pg\\_toast%%' order by 1, 2, a.attnum")
                for schema, name, column, kind in cur.fetchall():
                    out.setdefault((schema.lower(), name.lower()), []).append((column.lower(), kind.lower()))
        finally:
            conn.close()
        return out

    def close(self):
        if self.admin is None:
            return
        try:
            if self.created:
                with self.admin.cursor() as cur:
                    cur.execute(f"drop database if exists {self._quoted(self.dbname)} with (force)")
        finally:
            try:
                self.admin.close()
            except Exception:
                pass
