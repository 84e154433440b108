"""What every engine provides: a read-only snapshot of the sources, clones, SQL, cleanup."""
from __future__ import annotations

import abc
import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import sqlglot
from sqlglot import exp

from ..errors import ConfigError, SandboxError
from .dialect import Dialect

# Every sandbox (file, folder or database) starts with this, so a later run can find leftovers.
PREFIX = "rerun_safety_sbx_"
# dbt's parse output of a run, before its sandboxes exist; swept like run folders.
PARSE_PREFIX = "rerun_safety_parse_"
# A run folder being made (make_locked_dir), before it gets its name.
NEW_PREFIX = ".rerun_safety_new_"
SNAPSHOT_SCHEMA = "rerun_safety_snapshot"
REFERENCE_SCHEMA = "rerun_safety_reference"
# The simulated clock's schema and table in every sandbox (clock.py writes its SQL through the dialect).
CLOCK_SCHEMA = "rerun_safety_clock"
CLOCK_TABLE = "clock"


@dataclass(frozen=True)
class SourceTable:
    """An input of the project (a dbt source, or a timed seed) that a snapshot copies."""

    unique_id: str
    name: str  # "source_name.table_name"
    database: str | None
    schema: str
    identifier: str
    time_column: str | None
    time_origin: str | None  # event_time | loaded_at_field | meta | rerun_safety.yml | vars
    seed: bool = False  # a timed seed: loaded by `dbt seed`, then replayed like a source
    external: str | None = None  # dbt-duckdb `external_location`, as dbt renders it (a file read)
    load_column: str | None = None  # when rows were loaded, beside the event time: drives `late`
    kind: str | None = None  # as rerun_safety.yml declares it (INPUT_KINDS); None: found from config and data


@dataclass(frozen=True)
class Sandbox:
    name: str
    location: str  # a DuckDB file path, or a PostgreSQL database name


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def table(schema: str | None, name: str) -> exp.Table:
    return exp.Table(this=ident(name), db=ident(schema) if schema else None)


def ts_literal(value: dt.datetime) -> exp.Expression:
    return exp.cast(exp.Literal.string(value.strftime("%Y-%m-%d %H:%M:%S.%f")), exp.DataType.build("timestamp"))


# Relations of the connected database only: on DuckDB, information_schema also lists the tables of
# the databases a profile attaches (`attach:`), which are inputs, never the sandbox's own.
_THIS_CATALOG = exp.column("table_catalog").eq(exp.func("current_database"))


class Connection(abc.ABC):
    """A minimal DB-API style connection to one sandbox."""

    dialect: Dialect

    @abc.abstractmethod
    def execute(self, sql: str | exp.Expression, params: Sequence[Any] | None = None) -> None: ...

    @abc.abstractmethod
    def fetchall(self, sql: str | exp.Expression) -> list[tuple]: ...

    def fetchone(self, sql: str | exp.Expression) -> tuple | None:
        rows = self.fetchall(sql)
        return rows[0] if rows else None

    def fetch_dicts(self, sql: str | exp.Expression) -> list[dict]:
        raise NotImplementedError

    @abc.abstractmethod
    def close(self) -> None: ...

    def sql(self, expression: str | exp.Expression) -> str:
        if isinstance(expression, str):
            return expression
        return expression.sql(dialect=self.dialect)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # While `catalog_cached()` is open, relation_kind() and columns() answer from one read of the
    # catalog (information_schema costs a few milliseconds a question on DuckDB and PostgreSQL, and
    # judging a scenario asks hundreds); a create, drop or alter through this connection forgets it.
    _caching = False
    _cache: dict | None = None

    @contextlib.contextmanager
    def catalog_cached(self):
        self._caching, self._cache = self.dialect.cached_catalog, None
        try:
            yield self
        finally:
            self._caching, self._cache = False, None

    def _touched(self, sql: str | exp.Expression) -> None:
        """Called by execute(): DDL makes the cached catalog stale."""
        if self._cache is not None and (isinstance(sql, (exp.Create, exp.Drop, exp.Alter)) or (
                isinstance(sql, str) and sql.lstrip().split(None, 1)[:1] and
                sql.lstrip().split(None, 1)[0].lower() in ("create", "drop", "alter"))):
            self._cache = None

    def _cached_catalog(self) -> dict[tuple[str, str], tuple[str, list[tuple[str, str]]]]:
        if self._cache is None:
            kinds = self.fetchall(exp.select("table_schema", "table_name", "table_type")
                                  .from_(table("information_schema", "tables")).where(_THIS_CATALOG))
            cache: dict[tuple[str, str], tuple[str, list[tuple[str, str]]]] = {
                (str(s), str(n)): ("view" if "VIEW" in str(t).upper() else "table", []) for s, n, t in kinds}
            for s, n, c, t in self.fetchall(
                    exp.select("table_schema", "table_name", "column_name", "data_type")
                    .from_(table("information_schema", "columns")).where(_THIS_CATALOG)
                    .order_by("table_schema", "table_name", "ordinal_position")):
                if (str(s), str(n)) in cache:
                    cache[(str(s), str(n))][1].append((c, str(t)))
            self._cache = cache
        return self._cache

    def columns(self, schema: str, name: str) -> list[tuple[str, str]]:
        if self._caching:
            return list(self._cached_catalog().get((schema, name), ("", []))[1])
        q = (exp.select("column_name", "data_type").from_(table("information_schema", "columns"))
             .where(exp.and_(exp.column("table_schema").eq(exp.Literal.string(schema)),
                             exp.column("table_name").eq(exp.Literal.string(name)), _THIS_CATALOG))
             .order_by("ordinal_position"))
        return [(r[0], str(r[1])) for r in self.fetchall(q)]

    def relation_kind(self, schema: str, name: str) -> str | None:
        if self._caching:
            found = self._cached_catalog().get((schema, name))
            return found[0] if found else None
        q = (exp.select("table_type").from_(table("information_schema", "tables"))
             .where(exp.and_(exp.column("table_schema").eq(exp.Literal.string(schema)),
                             exp.column("table_name").eq(exp.Literal.string(name)), _THIS_CATALOG)))
        row = self.fetchone(q)
        if not row:
            return None
        return "view" if "VIEW" in str(row[0]).upper() else "table"

    def drop_relation(self, schema: str, name: str, kind: str | None = None) -> None:
        kind = kind or self.relation_kind(schema, name)
        if kind:
            self.execute(f"drop {kind} if exists {table(schema, name).sql(dialect=self.dialect)}{self.dialect.drop_cascade}")

    def drop_relations(self, relations: Iterable[tuple[str, str]]) -> None:
        """Drop each (schema, name) that exists, in the order given; the catalog is read once."""
        with self.catalog_cached():
            kinds = [(s, n, self.relation_kind(s, n)) for s, n in relations]
        for s, n, kind in kinds:
            if kind:
                self.drop_relation(s, n, kind)

    def delete_rows(self, target: exp.Table, where: exp.Expression | None = None) -> None:
        """Delete the rows of `target` matching `where` (all without)."""
        self.execute(exp.delete(target, where=where))

    def base_tables(self) -> set[tuple[str, str]]:
        """(schema, name) of every table (not view) of the database."""
        # only the sandbox's own catalog: a DuckDB profile's `attach:` databases are inputs
        q = exp.select("table_schema", "table_name").from_(table("information_schema", "tables")).where(
            exp.and_(exp.column("table_type").eq(exp.Literal.string("BASE TABLE")), _THIS_CATALOG))
        return {(str(s), str(n)) for s, n in self.fetchall(q)}

    def create_schema(self, schema: str) -> None:
        self.execute(exp.Create(this=exp.Table(db=ident(schema)), kind="SCHEMA", exists=True))

    def copy_table(self, src_schema: str, src: str, dst_schema: str, dst: str) -> None:
        self.create_schema(dst_schema)
        self.execute(exp.Create(this=table(dst_schema, dst), kind="TABLE",
                                expression=exp.select("*").from_(table(src_schema, src))))


class Engine(abc.ABC):
    """One warehouse kind. The user's target is only ever read."""

    dialect: Dialect

    def __init__(self, target_output: dict, work_root: Path, run_id: str, attach: bool = False,
                 statement_guard: bool = True):
        """`attach`: a worker process joining a run that its parent owns (and holds the lock of).
        `statement_guard`: the engine's own refusals of statements that reach files or the server (the
        second line of confinement; off only in tests that prove the kernel's line holds alone)."""
        self.statement_guard = statement_guard
        self.notes: list[str] = []  # what the snapshot could not copy as it is, one line each (a run note)
        self.target_output = dict(target_output)
        self.work_root = Path(work_root)
        self.run_id = run_id
        self.attached = attach
        self.sandboxes: list[Sandbox] = []
        self.run_dir = self.work_root / f"{PREFIX}{run_id}"
        self._lock = None
        self._umask: int | None = None
        if not attach:
            # Sandboxes are copies of production: files this process (and the workers it starts)
            # creates from now on are readable by the owner only, until close().
            self._umask = os.umask(0o077)
            # The lock tells a later sweep that this run is alive; the OS drops it when we die.
            # Created and locked in one step, so a sweep never sees the folder unlocked.
            self.work_root.mkdir(parents=True, exist_ok=True)
            self._lock = make_locked_dir(self.run_dir)

    @abc.abstractmethod
    def create_snapshot(self, sources: Iterable[SourceTable]) -> Sandbox:
        """Copy the sources' tables from the user's target (read-only) into a new sandbox."""

    @abc.abstractmethod
    def add_to_snapshot(self, sandbox: Sandbox, sources: Iterable[SourceTable], empty: bool = False) -> None:
        """Copy more sources into a snapshot made already (`empty`: their columns only, no rows)."""

    @property
    def database_names(self) -> set[str]:
        """The names (lower case) of the databases a source may name and a sandbox reads: the target's
        own, and those its profile attaches."""
        return set()

    def user_relations(self) -> dict[tuple[str, str], tuple[str, str]]:
        """Every table and view of the user's target, read-only: (schema, name) lower case -> as stored
        ({} where none can be listed)."""
        return {}

    @abc.abstractmethod
    def clone(self, source: Sandbox, role: str, read_only: tuple[str, ...] = ()) -> Sandbox:
        """A copy of `source`. `read_only`: schemas the clone only reads while `source` lives on
        (an engine without cheap copies may share their tables instead of copying them)."""

    @abc.abstractmethod
    def drop(self, sandbox: Sandbox) -> None: ...

    def release(self, sandbox: Sandbox) -> None:
        """Let go of what this process holds open in `sandbox`, so that other processes can copy it."""

    @abc.abstractmethod
    def connect(self, sandbox: Sandbox) -> Connection: ...

    @abc.abstractmethod
    def profile_output(self, sandbox: Sandbox) -> dict:
        """The dbt profile output that points dbt at this sandbox."""

    def budget_tripped(self) -> str | None:
        """Why the run's disk budget stopped it (PostgreSQL: budget.py), or None."""
        return None

    def learn_project(self, manifest: Any) -> None:
        """What the engine needs to know of the parsed project before its sandboxes run (nothing by
        default; DuckDB: the files models read, which a confined sandbox may still open)."""

    def prepare_manifest(self, manifest: Any, sandbox: Sandbox) -> None:
        """Point a parsed manifest at the sandbox where dbt needs that (no-op by default)."""

    # scenarios may run in worker processes at the same time
    parallel_ok = True
    # why a confined run cannot use this engine (None: it can); and a part of it that runs elsewhere,
    # outside this machine's confinement (None: there is none)
    confinement_gap: str | None = None
    unconfined_part: str | None = None

    def invocation_context(self, sandbox: Sandbox):
        """A context manager that dbt invocations in this sandbox run inside (none by default)."""
        import contextlib

        return contextlib.nullcontext()

    def overlap(self, sandbox: Sandbox, index: dict[str, int], timeout: float):
        """The two runs of the concurrent scenario in `sandbox`: (the runner's coordinator, a context
        manager; what the first run's statements wait for; what the second's wait for). Only where
        Dialect.overlapping_runs is None."""
        raise NotImplementedError(self.dialect.overlapping_runs)

    def sql_rewriter(self, sandbox: Sandbox):
        """A function dbt's statements go through in this sandbox (None: sent as they are)."""
        return None

    def user_columns(self, relations: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """The columns (name, type) of relations in the user's target, read-only, (schema, name) as given ->
        columns; relations it cannot read are left out. For hints only: an engine without it gives {}."""
        return {}

    def user_schema(self, schema: str) -> str:
        """The user's name of a schema that compiled SQL names in a sandbox (the same name where a sandbox
        is a database of its own; Spark's sandbox schemas carry the sandbox's prefix)."""
        return schema

    def sandbox_name(self, role: str) -> str:
        return f"{PREFIX}{self.run_id}_{role}"

    def keep(self) -> list[str]:
        """--keep-sandboxes: mark this run's sandboxes kept for KEEP_SECONDS after the run (a later
        run's sweep leaves them alone until then); returns where they are."""
        marker = {"pid": os.getpid(), "run": self.run_id, "kept_at": time.time(),
                  "until": time.time() + KEEP_SECONDS}
        (self.run_dir / KEPT_MARKER).write_text(json.dumps(marker))
        return [s.location for s in self.sandboxes] or [str(self.run_dir)]

    def sweep(self) -> int:
        """Remove run folders left by runs that are no longer alive (and not kept); returns how many."""
        removed = 0
        # a run killed inside make_locked_dir leaves its half-made folder under a temporary name;
        # a young one may still be being made (its lock not yet taken), so only old ones are swept
        half_made = [f for f in self.work_root.glob(f"{NEW_PREFIX}*") if _age(f) > 60]
        for folder in [*self.work_root.glob(f"{PREFIX}*"), *self.work_root.glob(f"{PARSE_PREFIX}*"), *half_made]:
            if folder == self.run_dir or not folder.is_dir() or is_kept(folder):
                continue
            try:
                with open(folder / "lock", "a") as fh:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
            except BlockingIOError:
                continue  # a live run holds it
            except OSError:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed

    def cleanup(self) -> None:
        """Remove every sandbox of this run; raises SandboxError naming one that stays (after
        trying all of them), so that nobody is told that sandboxes were removed when one was not."""
        failed: list[str] = []
        for sandbox in list(self.sandboxes):
            try:
                self.drop(sandbox)
            except Exception as err:  # keep removing the others; sweep() catches what is left
                text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                failed.append(text if sandbox.location in text else f"could not remove sandbox {sandbox.location}: {text}")
        if not self.attached:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if failed:
            raise SandboxError(failed[0] + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))

    def close(self) -> None:
        """Release run-level resources (locks, the file mode mask)."""
        try:
            if self._lock is not None:
                self._lock.close()
        except OSError:
            pass
        if self._umask is not None:
            os.umask(self._umask)
            self._umask = None

    def _abandon(self) -> None:
        """Undo __init__ when a subclass cannot start (e.g. cannot connect): no run folder stays."""
        self.close()
        if not self.attached:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def default_work_root() -> Path:
    """Where the runner works unless told otherwise: `$TMPDIR/rerun_safety-<uid>`, one per user."""
    import tempfile

    return Path(tempfile.gettempdir()) / f"rerun_safety-{os.getuid()}"


def private_work_root(path: Path) -> Path:
    """The runner's work root, created 0700 if missing. Refused (ConfigError) if it is a symlink, not
    a folder, or owned by another user (who could read or plant sandboxes there); tightened to 0700
    if it is ours but open to others. Sandboxes inside are copies of production data."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise ConfigError(f"cannot create the work root {path}: {err.strerror}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"refusing to use the work root {path}: it is not a folder (a symlink or a file); "
                          "remove it or set TMPDIR to a folder of your own")
    if info.st_uid != os.getuid():
        raise ConfigError(f"refusing to use the work root {path}: it belongs to another user (uid {info.st_uid}); "
                          "remove it or set TMPDIR to a folder of your own")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def check_writable_dir(path: Path, what: str) -> None:
    """Fail now (ConfigError) if `path` could not be created or written into later; leaves nothing
    behind (a missing folder is not created: its nearest existing parent is tried instead)."""
    import tempfile

    path = Path(path).absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, f"{probe} is not a folder")
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        raise ConfigError(f"cannot write into {what} {path}: {err.strerror or err}") from None


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def make_locked_dir(path: Path):
    """Create `path` holding a locked `lock` file, atomically (a sweep never sees it unlocked);
    returns the open lock file: the folder counts as alive until it is closed or the process dies."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=NEW_PREFIX))
    lock = open(tmp / "lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    tmp.rename(path)
    return lock


KEPT_MARKER = "kept"
KEEP_SECONDS = 24 * 3600  # what --keep-sandboxes promises: a day, then the next sweep removes them


def is_kept(folder: Path) -> bool:
    """Whether a run folder was kept (--keep-sandboxes) less than KEEP_SECONDS ago."""
    try:
        until = float(json.loads((folder / KEPT_MARKER).read_text())["until"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return time.time() < until


def lock_is_free(folder: Path) -> bool:
    """Whether no live run holds the lock of a run folder made by make_locked_dir."""
    try:
        with open(folder / "lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def snapshot_table(src: SourceTable) -> str:
    """Name of the full copy of a timed source, from which rows 'arrive' step by step."""
    return f"{src.schema}__{src.identifier}"


def parse_sql(sql: str, dialect: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read=dialect)
