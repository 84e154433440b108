"""PostgreSQL as users run it: a CREATEDB-only role (drops that survive autovacuum, two roles side by
side), literals from data safe under standard_conforming_strings=off, enum/domain/citext/composite sources
judged, and types the snapshot cannot copy read as text. Real PostgreSQL servers, real dbt."""
from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from support.gameday import load_report
from support.reliability import (ROLE_ARGS, databases_of, leftover_databases, leftover_folders, payments_target,
                                 phase, role_target, spawn_gameday, wait_until)


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


@pytest.mark.stress
def test_createdb_role_game_days_finish_and_leave_nothing(vacuum_server, tmp_path):
    """Two pairs here (two at a time, as two CI jobs of one role would run them); benchmarks/kill.py
    --engine postgres --case hardened runs twenty such game days, killed at random points, beside
    the same autovacuum."""
    role, target = role_target(vacuum_server, tmp_path / "proj")
    outcomes = []
    for pair in range(2):
        runs = [pair * 2, pair * 2 + 1]
        procs = [spawn_gameday(target, tmp_path / f"run{i}", *ROLE_ARGS) for i in runs]
        errs = [proc.communicate(timeout=600)[1] for proc in procs]
        left = databases_of(vacuum_server, role)
        for i, proc, err in zip(runs, procs, errs):
            report = load_report(proc.out_dir) if (proc.out_dir / "report.json").exists() else None
            outcomes.append((proc.returncode, report and {m["name"]: m["verdict"] for m in report["models"]},
                             left, leftover_folders(tmp_path / f"run{i}"),
                             err.strip().splitlines()[-1:] if proc.returncode else []))
    expected = (0, {"payments_current": "safe", "payments_merged": "safe"}, [], [], [])
    assert outcomes == [expected] * 4


def test_two_roles_on_one_server_never_break_each_other(vacuum_server, tmp_path):
    from support import reliability as support


    role_a, a = role_target(vacuum_server, tmp_path / "a")
    role_b, b = role_target(vacuum_server, tmp_path / "b")
    # A is killed mid-run, every process of it (the confined child's session too): its sandboxes stay (its
    # next run sweeps them)
    proc = spawn_gameday(a, tmp_path / "run_a", *ROLE_ARGS)
    assert wait_until(lambda: phase(tmp_path / "run_a", vacuum_server) in ("reference", "scenario"), 240, proc)
    support.kill(proc, signal.SIGKILL, group=True)
    proc.communicate(timeout=60)
    stale_a = databases_of(vacuum_server, role_a)
    assert stale_a
    # B's game day (whose sweep sees A's dead sandboxes) finishes, and leaves A's alone
    proc = spawn_gameday(b, tmp_path / "run_b", *ROLE_ARGS)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert {m["name"]: m["verdict"] for m in load_report(proc.out_dir)["models"]} == {
        "payments_current": "safe", "payments_merged": "safe"}
    assert databases_of(vacuum_server, role_b) == []
    assert databases_of(vacuum_server, role_a) == stale_a
    # A's own sweep removes them
    assert support.next_run_sweep(a, tmp_path / "run_a") >= len(stale_a)  # + its run and parse folders
    assert leftover_databases(vacuum_server) == [] and leftover_folders(tmp_path / "run_a") == []


def test_enum_domain_citext_and_composite_sources_are_judged(tmp_path, pg_server):
    """A CREATEDB role's source with an enum, a domain (with a check), an extension type (citext) and an
    array of the enum: the snapshot has the same types; a composite type, which it does not copy, is read
    as text with a note. Every model is judged as without them."""
    from support.common import create_role


    role = create_role(pg_server)
    target = payments_target("postgres", tmp_path / "proj", server=pg_server, role=role)
    conn = pg_server.connect(target.dbname)
    with conn.cursor() as cur:
        cur.execute("create extension citext")  # by the superuser, as a DBA would
        cur.execute(f'set role "{role}"')
        cur.execute("create schema types")
        cur.execute("create type types.mood as enum ('sad', 'ok', 'happy')")
        cur.execute("create domain types.positive as numeric(12,2) not null check (value > 0)")
        cur.execute("create type types.pair as (a int, b text)")
        cur.execute("alter table landing.payments add column mood types.mood, add column code citext, "
                    "add column moods types.mood[], add column amount types.positive default 1, "
                    "add column pair types.pair")
        cur.execute("update landing.payments set mood = (array['sad','ok','happy'])[1 + payment_no % 3]::types.mood, "
                    "code = 'AbC' || (payment_no % 5), moods = array['ok', 'happy']::types.mood[], "
                    "amount = \"Amount EUR\", pair = row(payment_no, 'x')::types.pair")
    conn.close()
    proc = spawn_gameday(target, tmp_path / "run", *ROLE_ARGS)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    models = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    assert {n: m["verdict"] for n, m in models.items()} == {"payments_current": "safe", "payments_merged": "safe"}
    assert models["payments_current"]["scenarios"][0]["reference_rows"] == 600
    assert leftover_databases(pg_server) == []


def test_snapshot_copies_types_and_reads_the_rest_as_text(tmp_path, pg_server):
    """The snapshot itself: same type names for enum, domain and citext (citext compares case-insensitively
    there too), the composite as text, and one note naming it."""
    from rerun_safety.project import SourceTable
    from rerun_safety.warehouse.engines import engine_for


    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    conn = pg_server.connect(target.dbname)
    with conn.cursor() as cur:
        cur.execute("create extension if not exists citext")
        cur.execute("create type mood as enum ('sad', 'ok', 'happy')")
        cur.execute("create domain positive as int check (value > 0)")
        cur.execute("create type pair as (a int, b text)")
        cur.execute("create table landing.typed (m mood, c citext, p positive, ms mood[], pr pair)")
        cur.execute("insert into landing.typed values ('happy', 'AbC', 3, '{sad,ok}', row(1, 'x'))")
    conn.close()
    engine = engine_for(target.output, tmp_path / "work", f"types{uuid.uuid4().hex[:6]}")
    try:
        snap = engine.create_snapshot([SourceTable("s.typed", "landing.typed", None, "landing", "typed", None, None)])
        with engine.connect(snap) as con:
            types = dict(con.fetchall("select attname, format_type(atttypid, atttypmod) from pg_attribute "
                                      "where attrelid = 'landing.typed'::regclass and attnum > 0"))
            assert types == {"m": "mood", "c": "citext", "p": "positive", "ms": "mood[]", "pr": "text"}
            assert con.fetchall("select m > 'ok', c = 'abc', p, ms, pr from landing.typed") == [
                (True, True, 3, "{sad,ok}", "(1,x)")]
        assert engine.notes == ["source landing.typed: column pr has type pair, which cannot be created in a "
                                "sandbox; the game day reads it as text"]
    finally:
        engine.cleanup()
        engine.close()
