"""Reliability, round two: no write outside a sandbox (dbt-duckdb external models), literals from data
safe under standard_conforming_strings=off, a CREATEDB-only role, private work roots, secrets only
through the environment. Real DuckDB files, a real PostgreSQL server, real dbt and real signals."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import uuid
from pathlib import Path

import duckdb
import pytest

from gameday_support import file_sha256, load_report
from test_reliability_support import (CHEAP, PREFIX, leftover_databases, leftover_folders, payments_target, phase,
                                      spawn_gameday, wait_until, work_root)


# ------------------------------------------------------------------ 1. external models stay in the sandbox

def _files(root: Path) -> dict[str, str]:
    """Every file under `root` (dbt's own folders left out) with its sha256."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] not in ("target", "logs", "dbt_packages"):
            out[str(rel)] = file_sha256(path)
    return out


def external_target(tmp: Path):
    """The payments fixture on DuckDB plus two external models downstream of its incremental merge model:
    one with a `location` (the user's export, present before the game day), one written to
    `external_root` (the profile's default, the working directory)."""
    target = payments_target("duckdb", tmp)
    export = target.project / "exports" / "payments.parquet"
    export.parent.mkdir()
    with duckdb.connect() as con:  # the user's own export from an earlier dbt run
        con.execute(f"copy (select range as payment_no from range(4800)) to '{export}' (format parquet)")
    models = target.project / "models"
    (models / "payments_export.sql").write_text(
        f"{{{{ config(materialized='external', location='{export}') }}}}\n"
        "select account_id, payment_no, \"Amount EUR\" from {{ ref('payments_merged') }}\n")
    (models / "payments_export_root.sql").write_text(
        "{{ config(materialized='external', format='csv') }}\n"
        "select account_id, count(*) as payments from {{ ref('payments_merged') }} group by 1\n")
    return target, export


EXTERNAL_SELECT = ("--select", "payments_merged", "--select", "payments_export", "--select", "payments_export_root")


def test_external_models_write_only_into_sandboxes(tmp_path):
    target, export = external_target(tmp_path / "proj")
    before = _files(target.project)
    assert str(Path("exports") / "payments.parquet") in before
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", *EXTERNAL_SELECT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert _files(target.project) == before  # the export byte-identical, no csv in the working directory
    assert not (target.project / "payments_export_root.csv").exists()
    models = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    for name in ("payments_export", "payments_export_root"):  # judged like tables
        assert models[name]["verdict"] == "safe", models[name]
        scen = {s["name"]: s for s in models[name]["scenarios"]}
        assert scen["replay"]["rows"] == scen["replay"]["reference_rows"] > 0
        assert set(scen) == {"reference", "replay", "rerun"}
    assert models["payments_export"]["scenarios"][0]["reference_rows"] == 600
    assert leftover_folders(tmp_path / "run") == []


def test_external_model_file_survives_sigkill(tmp_path):
    target, export = external_target(tmp_path / "proj")
    before = _files(target.project)
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2",
                         *EXTERNAL_SELECT)
    assert wait_until(lambda: phase(tmp_path / "run") == "scenario", 240, proc, step=0.01), proc.communicate()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _files(target.project) == before
    assert file_sha256(export) == before[str(Path("exports") / "payments.parquet")]


# ------------------------------------------------------------------ 2. literals from data, any server setting

# A partition value that, pasted into a '...' literal with only its quotes doubled, ends the literal
# when standard_conforming_strings is off (the backslash escapes the first quote), creates a table,
# and turns the delete of the batch's partitions into one that deletes nothing.
CRAFTED = ("\\' as text)) returning 1) select 1; create table public.rs_injected (i int); "
           "with rerun_safety_deleted_1 as (delete from public.po_inject as DBT_INTERNAL_DEST where false --")


@pytest.mark.parametrize("setting", ["off", "on"])
def test_partition_values_from_data_are_safe_without_standard_conforming_strings(tmp_path, pg_server, setting):
    """The user's own `dbt run` of a partition_overwrite model on a database where the setting is off (the
    injection) or on (the same values, backslashes included, replaced exactly)."""
    from collections import Counter
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "strategy"))
    from _po_project import make_project, model_sql

    po = make_project(tmp_path, "postgres", {"po_inject": model_sql("partition_key='p'")}, pg_server=pg_server)
    try:
        conn = pg_server.connect()
        conn.cursor().execute(f'alter database "{po.dbname}" set standard_conforming_strings = {setting}')
        conn.close()
        assert po.sql("show standard_conforming_strings", fetch=True) == [(setting,)]
        po.fill_raw("po_inject", "p text, v int", [("a", 1), ("b", 2), (CRAFTED, 3)])
        po.run("po_inject")  # the first build: no strategy yet
        po.fill_raw("po_inject", "p text, v int", [("b", 20), (CRAFTED, 30), ("it's", 40)])
        po.run("po_inject")  # replaces the partitions 'b', CRAFTED and "it's" through literals
        assert po.sql("select to_regclass('public.rs_injected') is null", fetch=True) == [(True,)]
        assert po.rows("po_inject") == Counter([("a", 1), ("b", 20), (CRAFTED, 30), ("it's", 40)])
        po.fill_raw("po_inject", "p text, v int", [(CRAFTED, 31), ("it's", 41)])
        po.run("po_inject")
        assert po.rows("po_inject") == Counter([("a", 1), ("b", 20), (CRAFTED, 31), ("it's", 41)])
    finally:
        po.drop_warehouse()


# ------------------------------------------------------------------ 3. a role without superuser

@pytest.fixture(scope="module")
def vacuum_server():
    """A server whose autovacuum visits every database each second and works slowly there (cost delay
    100 ms, limit 1), so that a worker is inside a fresh sandbox whenever it is dropped: the race a
    CREATEDB role lost 1 run in 3 with a short naptime happens on nearly every drop here."""
    from _support import start_pg_server

    server = start_pg_server("-c autovacuum_naptime=1 -c autovacuum_vacuum_cost_delay=100 "
                             "-c autovacuum_vacuum_cost_limit=1")
    try:
        yield server
    finally:
        server.stop()


def _role_target(server, tmp: Path):
    from _support import create_role

    role = create_role(server)  # LOGIN CREATEDB, no superuser
    return role, payments_target("postgres", tmp, server=server, role=role)


def _databases_of(server, role: str) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select datname from pg_database where starts_with(datname, %s) and "
                        "pg_get_userbyid(datdba) = %s order by 1", [PREFIX, role])
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


# The game days of this section: the payments fixture's incremental merge model and its view.
ROLE_ARGS = (*CHEAP, "--select", "payments_merged")


def test_createdb_role_ten_game_days_finish_and_leave_nothing(vacuum_server, tmp_path):
    role, target = _role_target(vacuum_server, tmp_path / "proj")
    outcomes = []
    for i in range(10):
        proc = spawn_gameday(target, tmp_path / f"run{i}", *ROLE_ARGS)
        _, err = proc.communicate(timeout=600)
        report = load_report(proc.out_dir) if (proc.out_dir / "report.json").exists() else None
        outcomes.append((proc.returncode, report and {m["name"]: m["verdict"] for m in report["models"]},
                         _databases_of(vacuum_server, role), leftover_folders(tmp_path / f"run{i}"),
                         err.strip().splitlines()[-1:] if proc.returncode else []))
    expected = (0, {"payments_current": "safe", "payments_merged": "safe"}, [], [], [])
    assert outcomes == [expected] * 10


def test_two_roles_on_one_server_never_break_each_other(vacuum_server, tmp_path):
    import test_reliability_support as support

    role_a, a = _role_target(vacuum_server, tmp_path / "a")
    role_b, b = _role_target(vacuum_server, tmp_path / "b")
    # A is killed mid-run: its sandboxes stay (its next run sweeps them)
    proc = spawn_gameday(a, tmp_path / "run_a", *ROLE_ARGS)
    assert wait_until(lambda: phase(tmp_path / "run_a", vacuum_server) in ("reference", "scenario"), 240, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    stale_a = _databases_of(vacuum_server, role_a)
    assert stale_a
    # B's game day (whose sweep sees A's dead sandboxes) finishes, and leaves A's alone
    proc = spawn_gameday(b, tmp_path / "run_b", *ROLE_ARGS)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert {m["name"]: m["verdict"] for m in load_report(proc.out_dir)["models"]} == {
        "payments_current": "safe", "payments_merged": "safe"}
    assert _databases_of(vacuum_server, role_b) == []
    assert _databases_of(vacuum_server, role_a) == stale_a
    # A's own sweep removes them
    assert support.next_run_sweep(a, tmp_path / "run_a") >= len(stale_a)  # + its run and parse folders
    assert leftover_databases(vacuum_server) == [] and leftover_folders(tmp_path / "run_a") == []


def test_interrupt_never_claims_removed_while_a_sandbox_stays(vacuum_server, tmp_path):
    """A session the role may not end (a superuser's) holds a sandbox open during Ctrl-C: the run says
    which sandbox stayed instead of "sandboxes removed", and the next run removes it."""
    import test_reliability_support as support

    role, target = _role_target(vacuum_server, tmp_path / "proj")
    proc = spawn_gameday(target, tmp_path / "run", *ROLE_ARGS)
    assert wait_until(lambda: any(n.endswith("_reference") for n in _databases_of(vacuum_server, role)), 240, proc)
    held = next(n for n in _databases_of(vacuum_server, role) if n.endswith("_reference"))
    holder = vacuum_server.connect(held)
    try:
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        holder.close()
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("rerun-safety: game day",
                                                                              "rerun-safety: scenario"))]
    assert proc.returncode == 2, err
    assert "sandboxes removed" not in err and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("rerun-safety: error: cannot drop sandbox database"), err
    assert held in lines[0] and "being accessed by other users" in lines[0], err
    assert lines[0].endswith("the next game day removes what is left"), err
    assert held in _databases_of(vacuum_server, role)
    support.next_run_sweep(target, tmp_path / "run")
    assert _databases_of(vacuum_server, role) == [] and leftover_folders(tmp_path / "run") == []
