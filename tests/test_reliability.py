"""Reliability of the game day: production is read through engine-level read-only connections,
sandboxes never resolve to the user's database, signals and SIGKILL leave nothing behind (or
nothing the next run does not sweep), two runs side by side do not see each other, and profile
passwords never reach a file. Real DuckDB files, a real PostgreSQL server, real signals."""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path

import duckdb
import psycopg2
import pytest

from support.gameday import file_sha256, load_report, run_cli
from support.reliability import (CHEAP, PREFIX, alive, children, files_with, kill, leftover_databases,
                                      leftover_folders, next_run_sweep, payments_target, phase, spawn_gameday,
                                      wait_until, work_root)
from rerun_safety.errors import SandboxError
from rerun_safety.warehouse.base import Sandbox
from rerun_safety.warehouse.engines import engine_for
from rerun_safety.warehouse.duckdb.engine import DuckDBConnection, _attach_read_only
from rerun_safety.warehouse.postgres.engine import PgConnection

PHASES = ("start", "snapshot", "reference", "scenario")
# Verdicts of a game day of the payments fixture alone with CHEAP settings (see test_side_by_side).
CHEAP_VERDICTS = {"breaks_when_incremental": "error", "payments_appended": "duplicates",
                  "balance_by_account": "drift", "ledger_daily": "safe", "payments_audited": "safe",
                  "payments_current": "safe", "payments_merged": "safe"}


@pytest.fixture(scope="module")
def duck(tmp_path_factory):
    return payments_target("duckdb", tmp_path_factory.mktemp("rel_duck"))


@pytest.fixture(scope="module")
def pg(tmp_path_factory, pg_server):
    return payments_target("postgres", tmp_path_factory.mktemp("rel_pg"), server=pg_server)


# ------------------------------------------------------------------ 1. read-only production

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


def _databases(server) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select datname from pg_database")
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


# ------------------------------------------------------------------ 2+3. signals and SIGKILL

def _interrupt(target, tmp, sig, at_phase, *args, group: bool = False):
    before = target.fingerprint()
    proc = spawn_gameday(target, tmp, *CHEAP, *args)
    # at this phase, or (on a slow machine that skipped past a short phase) a later one
    reached = wait_until(lambda: PHASES.index(phase(tmp, target.server)) >= PHASES.index(at_phase), 240, proc,
                         step=0.01)
    workers = children(proc.pid)
    assert reached, proc.communicate()[1]
    kill(proc, sig, group=group)
    started = time.time()
    _, err = proc.communicate(timeout=120)
    return {"code": proc.returncode, "err": err, "exit_s": time.time() - started, "workers": workers,
            "before": before}


# Interrupt tests need only one incremental model (plus its upstream view) and two scenarios.
SMALL = ("--select", "payments_merged", "--scenarios", "replay,rerun")


@pytest.mark.parametrize("sig,threads,at_phase,code,name", [(signal.SIGTERM, "2", "scenario", 143, "SIGTERM"),
                                                              (signal.SIGINT, "1", "reference", 130, "SIGINT")])
def test_signal_cleans_up_at_once_duckdb(duck, tmp_path, sig, threads, at_phase, code, name):
    r = _interrupt(duck, tmp_path, sig, at_phase, "--threads", threads, *SMALL)
    assert r["code"] == code, r["err"]
    lines = [ln for ln in r["err"].splitlines() if ln.strip().startswith("rerun-safety: interrupted")]
    assert lines == [f"rerun-safety: interrupted by {name}; sandboxes removed"], r["err"]
    assert "Traceback" not in r["err"]
    assert r["exit_s"] < 30
    assert leftover_folders(tmp_path) == []
    if threads == "2":
        assert len(r["workers"]) >= 2, r["workers"]  # two workers (+ the resource tracker)
    # (multiprocessing's resource tracker may outlive the runner by a moment, cleaning up)
    assert wait_until(lambda: not any(alive(p) for p in r["workers"]), 10)
    assert duck.fingerprint() == r["before"]


def test_sigterm_cleans_up_at_once_postgres(pg, pg_server, tmp_path):
    r = _interrupt(pg, tmp_path, signal.SIGTERM, "reference", "--threads", "1", *SMALL)
    assert r["code"] == 143, r["err"]
    assert "interrupted by SIGTERM; sandboxes removed" in r["err"] and "Traceback" not in r["err"]
    assert wait_until(lambda: not any(alive(p) for p in r["workers"]), 10)
    assert leftover_folders(tmp_path) == []
    assert leftover_databases(pg_server) == []
    assert pg.fingerprint() == r["before"]


@pytest.mark.parametrize("engine,at_phase", [("duckdb", "snapshot"), ("duckdb", "scenario"),
                                             ("postgres", "reference")])
def test_sigkill_then_next_run_sweeps(request, tmp_path, engine, at_phase):
    """A small version of benchmarks/kill.py: kill points chosen by phase instead of random delays."""
    target = request.getfixturevalue("duck" if engine == "duckdb" else "pg")
    # the whole process group: the command, its confined game day and the workers die at once
    r = _interrupt(target, tmp_path, signal.SIGKILL, at_phase, "--threads", "2", *SMALL, group=True)
    assert r["code"] == -signal.SIGKILL
    assert target.fingerprint() == r["before"]
    # workers die with their parent, so nothing creates sandboxes after the sweep
    assert wait_until(lambda: not any(alive(p) for p in r["workers"]), 30)
    before = len(leftover_folders(tmp_path)) + len(leftover_databases(target.server))
    assert before >= 1  # killed mid-run: its sandboxes are still there
    next_run_sweep(target, tmp_path)
    assert leftover_folders(tmp_path) == []
    assert leftover_databases(target.server) == []


def test_sigkill_of_the_command_alone_lets_the_confined_game_day_clean_up(duck, tmp_path):
    """The command's process killed -9 (its confined game day and workers live on): the game day sees its
    command gone, ends as on SIGTERM and removes its sandboxes; nothing is left for a sweep."""
    r = _interrupt(duck, tmp_path, signal.SIGKILL, "scenario", "--threads", "2", *SMALL)
    assert r["code"] == -signal.SIGKILL
    assert len(r["workers"]) >= 3, r["workers"]  # the fork server, the game day, its workers
    assert wait_until(lambda: not any(alive(p) for p in r["workers"] if not _is_fork_server(p)), 60)
    assert wait_until(lambda: leftover_folders(tmp_path) == [], 30), leftover_folders(tmp_path)
    assert duck.fingerprint() == r["before"]


def _is_fork_server(pid: int) -> bool:
    try:
        return b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# ------------------------------------------------------------------ 5. side by side

def test_side_by_side(duck, tmp_path):
    """Two game days on one project and one work root: the second starts (and sweeps) while the
    first has live sandboxes; both give the verdicts of a run alone."""
    before = duck.fingerprint()
    first = spawn_gameday(duck, tmp_path, *CHEAP)
    assert wait_until(lambda: phase(tmp_path) in ("reference", "scenario"), 240, first), first.communicate()[1]
    second = spawn_gameday(duck, tmp_path, *CHEAP)
    both_live = wait_until(lambda: len(leftover_folders(tmp_path)) >= 2, 240, second)
    results = [(p, p.communicate(timeout=600)[1]) for p in (first, second)]
    for proc, err in results:
        assert proc.returncode == 1, err
    assert both_live
    reports = [load_report(p.out_dir) for p, _ in results]
    for report in reports:
        assert {m["name"]: m["verdict"] for m in report["models"]} == CHEAP_VERDICTS

    def numbers(report):
        return {m["name"]: [(s["name"], s["rows"], s["extra_rows"], s["missing_rows"], s["duplicate_keys"])
                            for s in m["scenarios"]] for m in report["models"]}

    assert numbers(reports[0]) == numbers(reports[1])
    assert leftover_folders(tmp_path) == []
    assert duck.fingerprint() == before


# ------------------------------------------------------------------ 7. secrets

def test_password_never_written(tmp_path, pg_server):
    password = f"pw-{uuid.uuid4().hex}"
    role = f"rs_secret_{uuid.uuid4().hex[:6]}"
    conn = pg_server.connect()
    with conn.cursor() as cur:
        cur.execute(f"create role {role} login superuser password %s", [password])
    conn.close()
    target = payments_target("postgres", tmp_path / "proj", server=pg_server,
                             output_extra={"user": role, "password": password})
    seen: list[str] = []
    with_role: set[str] = set()  # files naming the role: proves the scan saw the generated profiles
    stop = threading.Event()

    def scan() -> None:  # while the run lives: every file in the work root, the project, the output
        while not stop.is_set():
            seen.extend(files_with(password.encode(), [tmp_path / "run", target.project]))
            # the generated profiles name the run's own role, where the user's named this one
            with_role.update(files_with(b"rerun_safety_role_", [tmp_path / "run"]))
            time.sleep(0.1)

    scanner = threading.Thread(target=scan)
    scanner.start()
    try:
        proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--threads", "2", *SMALL)
        _, err = proc.communicate(timeout=600)
    finally:
        stop.set()
        scanner.join()
    assert proc.returncode == 0, err
    verdicts = {m["name"]: m["verdict"] for m in load_report(proc.out_dir)["models"]}
    assert verdicts == {"payments_current": "safe", "payments_merged": "safe"}  # it ran, with the password
    assert password not in err
    scanned = list((tmp_path / "run").rglob("*")) + list(target.project.rglob("*"))
    assert sum(1 for p in scanned if p.is_file()) >= 5  # reports, stdout and the project were scanned
    assert any(p.endswith("profiles.yml") for p in with_role), with_role
    assert seen == [] and files_with(password.encode(), [tmp_path / "run", target.project]) == []

