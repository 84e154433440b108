"""Production is only read: the user's DuckDB file is attached read-only and a PostgreSQL connection to
production is a READ ONLY transaction that no setting or statement turns into a writer; a sandbox never
resolves to the user's file or database. Real DuckDB files, a real PostgreSQL server."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import duckdb
import psycopg2
import pytest

from support.gameday import file_sha256, run_cli
from support.reliability import CHEAP, PREFIX, work_root
from rerun_safety.errors import SandboxError
from rerun_safety.warehouse.base import Sandbox
from rerun_safety.warehouse.duckdb.engine import DuckDBConnection, _attach_read_only
from rerun_safety.warehouse.engines import engine_for
from rerun_safety.warehouse.postgres.engine import PgConnection


def test_duckdb_read_only_attach_refuses_writes(duck, tmp_path):
    path = Path(duck.output["path"])
    before = file_sha256(path)
    con = DuckDBConnection(str(tmp_path / "snap.duckdb"))
    try:
        con.execute(_attach_read_only(str(path)))
        assert con.fetchone("select count(*) from rs_user.landing.payments") == (600,)
        for stmt in ("insert into rs_user.landing.payments values (1, 1, 1, now())",
                     "delete from rs_user.landing.payments",
                     "create table rs_user.landing.x (i int)",
                     "drop table rs_user.landing.fx_rates"):
            with pytest.raises(duckdb.Error, match="read-only|read only"):
                con.execute(stmt)
    finally:
        con.close()
    assert file_sha256(path) == before


def test_postgres_read_only_connection_refuses_writes(pg):
    before = pg.fingerprint()
    params = {k: pg.output[k] for k in ("host", "port", "user")}
    con = PgConnection(params, pg.dbname, read_only=True)
    try:
        assert con.fetchone("show default_transaction_read_only") == ("on",)
        for stmt in ("insert into landing.payments values (1, 1, 1, now())",
                     "delete from landing.payments", "create table landing.x (i int)",
                     "drop table landing.fx_rates", "truncate landing.ledger_entries"):
            with pytest.raises(psycopg2.errors.ReadOnlySqlTransaction):
                con.execute(stmt)
    finally:
        con.close()
    assert pg.fingerprint() == before


def test_duckdb_sandbox_never_resolves_to_user_file(duck, tmp_path):
    user = Path(duck.output["path"])
    eng = engine_for(duck.output, tmp_path / "work", "guard1")
    try:
        # a crafted sandbox pointing at the user's file, also through a relative/.. path
        crafted = Sandbox(f"{PREFIX}guard1_x", str(user.parent / ".." / user.parent.name / user.name))
        with pytest.raises(SandboxError, match="refusing"):
            eng.connect(crafted)
        with pytest.raises(SandboxError, match="refusing"):
            eng._guard(user)
        eng._path = lambda role: user  # a run whose sandbox path would be the user's file
        with pytest.raises(SandboxError, match="refusing"):
            eng.clone(Sandbox("s", str(user)), "replay")
        with pytest.raises(SandboxError, match="refusing"):
            eng.create_snapshot([])
    finally:
        eng.cleanup()
        eng.close()
    assert user.exists()


def test_duckdb_file_inside_work_root_is_refused(duck, tmp_path, monkeypatch):
    """A file inside a (dead) run's folder would be swept: the runner refuses to start. Run in-process (the
    refusal comes before any sandbox exists), with the work root where spawn_gameday's TMPDIR puts it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = work_root(tmp_path) / f"{PREFIX}deadrun"
    dead.mkdir(parents=True)
    inside = dead / "warehouse.duckdb"
    shutil.copy(duck.output["path"], inside)
    before = file_sha256(inside)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(
        f"payments:\n  target: local\n  outputs:\n    local:\n      type: duckdb\n      path: '{inside}'\n"
        "      schema: analytics\n")
    code, _, err = run_cli(["gameday", "--project-dir", str(duck.project), "--profiles-dir", str(profiles), *CHEAP])
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "inside the runner's work root" in lines[0] and str(inside) in lines[0]
    assert inside.exists() and file_sha256(inside) == before


def _databases(server) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select datname from pg_database")
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def test_postgres_sandbox_never_resolves_to_user_database(pg, pg_server, tmp_path):
    eng = engine_for(pg.output, tmp_path / "work", "guard2")
    try:
        with pytest.raises(SandboxError, match="refusing"):
            eng._create_database(pg.dbname, None)
        with pytest.raises(SandboxError, match="refusing"):
            eng._create_database(pg.dbname, f"{PREFIX}guard2_snapshot")
        with pytest.raises(SandboxError, match="refusing to drop"):
            eng._drop_database(pg.dbname)
        with pytest.raises(SandboxError, match="refusing to drop"):
            eng._drop_database("postgres")
        with pytest.raises(SandboxError, match="refusing"):
            eng.connect(Sandbox(f"{PREFIX}guard2_x", pg.dbname))
        with pytest.raises(SandboxError, match="refusing"):
            eng.drop(Sandbox(f"{PREFIX}guard2_x", pg.dbname))
    finally:
        eng.cleanup()
        eng.close()
    # a target database that looks like a sandbox would be swept by other runs: refused
    with pytest.raises(SandboxError, match="sandbox prefix"):
        engine_for(dict(pg.output, dbname=f"{PREFIX}dead_snapshot"), tmp_path / "work", "guard3")
    assert pg.dbname in {r for r in _databases(pg_server)}


def test_read_only_connection_stays_read_only_after_set_config(pg_payments):
    """Whatever a statement does to the session's settings, the next one still runs in a READ ONLY
    transaction."""
    import psycopg2


    from rerun_safety.warehouse.postgres.engine import PgConnection


    params = {k: pg_payments.output[k] for k in ("host", "port", "user")}
    con = PgConnection(params, pg_payments.dbname, read_only=True)
    try:
        assert con.fetchone("select set_config('default_transaction_read_only', 'off', false)") == ("off",)
        for stmt in ("create table landing.x (i int)", "select nextval('landing.counter')",
                     "select set_config('transaction_read_only', 'off', false)"):
            with pytest.raises((psycopg2.errors.ReadOnlySqlTransaction, psycopg2.errors.ActiveSqlTransaction)):
                con.execute(stmt)
        assert con.fetchone("select count(*) from landing.payments") == (600,)  # usable after a refusal
    finally:
        con.close()


def test_a_read_only_connection_sends_one_statement_or_none(pg_off):
    from rerun_safety.errors import SandboxError
    from rerun_safety.warehouse.postgres.engine import PgConnection


    params = {k: pg_off.output[k] for k in ("host", "port", "user")}
    con = PgConnection(params, pg_off.dbname, read_only=True)
    try:
        with pytest.raises(SandboxError, match="more than one statement"):
            con.fetchall("select 1; select 2")
        assert con.fetchone("select ';' || 'x', $$;$$") == (";x", ";")  # in literals: one statement
    finally:
        con.close()
