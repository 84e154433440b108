"""Scratch catalogs where the lint compiles (one per engine: `duckdb/scratch.py`, `postgres/scratch.py`):
an empty DuckDB file in the run's folder, or a throwaway PostgreSQL database on the target's server. The user's target is only ever read.

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

import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import yaml
from sqlglot import exp

from ..secrets import secrets_through_env
from .base import lock_is_free, make_locked_dir
from .dialect import Dialect

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


def quoted_ident(text: str) -> exp.Identifier:
    return exp.to_identifier(text, quoted=True)


def _table(database: str | None, schema: str, name: str) -> exp.Table:
    return exp.Table(this=quoted_ident(name), db=quoted_ident(schema), catalog=quoted_ident(database) if database else None)


def _datatype(type_text: str, dialect: str) -> exp.DataType:
    try:
        return exp.DataType.build(type_text, dialect=dialect)
    except Exception:  # a type sqlglot cannot read (an extension's, a user-defined enum): text
        return exp.DataType.build("text")


def create_statements(spec: RelationSpec, dialect: str, with_database: bool) -> list[str]:
    """`create schema` plus the empty relation, as SQL in `dialect`; names quoted."""
    database = spec.database if with_database else None
    schema = exp.Create(this=exp.Table(this=quoted_ident(spec.schema), db=quoted_ident(database) if database else None),
                        kind="SCHEMA", exists=True).sql(dialect=dialect)
    table = _table(database, spec.schema, spec.name).sql(dialect=dialect)
    if spec.select is not None:
        # the model's own compiled SQL, run with no rows; it replaces a placeholder table
        query = f"select * from ({spec.select}\n) as _rerun_safety_lint_q limit 0"
        drop = f"drop table if exists {table}" if spec.kind == "table" else None
        return [s for s in (schema, drop, f"create {spec.kind} {table} as {query}") if s]
    columns = spec.columns or ((PLACEHOLDER_COLUMN, "int"),)
    ddl = exp.Create(this=exp.Schema(this=_table(database, spec.schema, spec.name), expressions=[
        exp.ColumnDef(this=quoted_ident(name), kind=_datatype(kind, dialect)) for name, kind in columns]),
        kind="TABLE", exists=True).sql(dialect=dialect)
    return [schema, ddl]


def create_batch(specs: list[RelationSpec], dialect: str, with_database: bool) -> list[str]:
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
        self._lock = make_locked_dir(self.path)

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
        if not (folder / "lock").exists():
            continue  # not ours (or a run from before run folders were locked)
        if lock_is_free(folder):  # else a live run holds it
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


# ---------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------

class Scratch:
    """Where compiles run. `profiles_dir()` for dbt; `create(specs)` makes relations exist empty;
    `columns(keys)` reads back their columns; `close()` removes everything."""

    mode = ""
    dialect: Dialect = Dialect("")
    extra_flags: tuple[str, ...] = ()
    incremental_possible = True
    # the database dbt compiles in when it is not the target's (a scratch database): what the manifest
    # then says of every relation that the profile's database would hold
    compile_database: str | None = None
    # the target's database and the scratch database (where they differ: PostgreSQL), which a second
    # compiling process points its manifest from and to (None: one catalog)
    user_db: str | None = None
    dbname: str | None = None

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


def first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__
