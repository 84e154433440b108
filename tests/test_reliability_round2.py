"""Reliability, round two: no write outside a sandbox (dbt-duckdb external models), literals from data
safe under standard_conforming_strings=off, a CREATEDB-only role (drops that survive autovacuum, two
roles side by side), private work roots, secrets only through the environment, enum/domain/citext
sources, a `diff --where` that stays a filter, and the small things (output directory, a run that cannot
connect, half-made folders). Real DuckDB files, real PostgreSQL servers, real dbt and real signals."""
from __future__ import annotations

import os
import signal
import stat
import time
import uuid
from pathlib import Path

import pytest

from support.gameday import file_sha256, load_report
from support.reliability import (CHEAP, PREFIX, add_external_models, files_with, leftover_databases,
                                      leftover_folders, payments_target, phase, project_files, spawn_gameday,
                                      wait_until, work_root)


# ------------------------------------------------------------------ 1. external models stay in the sandbox

def external_target(tmp: Path):
    """The payments fixture on DuckDB plus two external models (support.reliability.add_external_models)."""
    target = payments_target("duckdb", tmp)
    return target, add_external_models(target)


EXTERNAL_SELECT = ("--select", "payments_merged", "--select", "payments_export", "--select", "payments_export_root")


def test_external_models_write_only_into_sandboxes(tmp_path):
    target, export = external_target(tmp_path / "proj")
    before = project_files(target.project)
    assert str(Path("exports") / "payments.parquet") in before
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", *EXTERNAL_SELECT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert project_files(target.project) == before  # the export byte-identical, no csv in the working directory
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
    before = project_files(target.project)
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2",
                         *EXTERNAL_SELECT)
    assert wait_until(lambda: phase(tmp_path / "run") == "scenario", 240, proc, step=0.01), proc.communicate()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert project_files(target.project) == before
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
    from support.common import start_pg_server

    server = start_pg_server("-c autovacuum_naptime=1 -c autovacuum_vacuum_cost_delay=100 "
                             "-c autovacuum_vacuum_cost_limit=1")
    try:
        yield server
    finally:
        server.stop()


def _role_target(server, tmp: Path):
    from support.common import create_role

    role = create_role(server)  # LOGIN CREATEDB CREATEROLE, no superuser
    return role, payments_target("postgres", tmp, server=server, role=role)


def _databases_of(server, role: str) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            # owned by the role, or by the role of one of its game days (which it was made a member of)
            cur.execute("select datname from pg_database where starts_with(datname, %s) and "
                        "(pg_get_userbyid(datdba) = %s or datdba in (select m.roleid from pg_auth_members m "
                        "join pg_roles r on r.oid = m.member where r.rolname = %s)) order by 1", [PREFIX, role, role])
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


# The game days of this section: the payments fixture's incremental merge model and its view.
ROLE_ARGS = (*CHEAP, "--select", "payments_merged")


@pytest.mark.stress
def test_createdb_role_game_days_finish_and_leave_nothing(vacuum_server, tmp_path):
    """Two pairs here (two at a time, as two CI jobs of one role would run them); benchmarks/kill.py
    --engine postgres --case hardened runs twenty such game days, killed at random points, beside
    the same autovacuum."""
    role, target = _role_target(vacuum_server, tmp_path / "proj")
    outcomes = []
    for pair in range(2):
        runs = [pair * 2, pair * 2 + 1]
        procs = [spawn_gameday(target, tmp_path / f"run{i}", *ROLE_ARGS) for i in runs]
        errs = [proc.communicate(timeout=600)[1] for proc in procs]
        left = _databases_of(vacuum_server, role)
        for i, proc, err in zip(runs, procs, errs):
            report = load_report(proc.out_dir) if (proc.out_dir / "report.json").exists() else None
            outcomes.append((proc.returncode, report and {m["name"]: m["verdict"] for m in report["models"]},
                             left, leftover_folders(tmp_path / f"run{i}"),
                             err.strip().splitlines()[-1:] if proc.returncode else []))
    expected = (0, {"payments_current": "safe", "payments_merged": "safe"}, [], [], [])
    assert outcomes == [expected] * 4


def test_two_roles_on_one_server_never_break_each_other(vacuum_server, tmp_path):
    from support import reliability as support

    role_a, a = _role_target(vacuum_server, tmp_path / "a")
    role_b, b = _role_target(vacuum_server, tmp_path / "b")
    # A is killed mid-run, its whole process group: its sandboxes stay (its next run sweeps them)
    proc = spawn_gameday(a, tmp_path / "run_a", *ROLE_ARGS)
    assert wait_until(lambda: phase(tmp_path / "run_a", vacuum_server) in ("reference", "scenario"), 240, proc)
    os.killpg(proc.pid, signal.SIGKILL)
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
    from support import reliability as support

    role, target = _role_target(vacuum_server, tmp_path / "proj")
    proc = spawn_gameday(target, tmp_path / "run", *ROLE_ARGS)
    assert wait_until(lambda: any(n.endswith("_reference") for n in _databases_of(vacuum_server, role)), 240, proc)
    held = next(n for n in _databases_of(vacuum_server, role) if n.endswith("_reference"))
    holder = vacuum_server.connect(held)
    try:
        os.kill(proc.pid, signal.SIGINT)
        # the cleanup waits for PostgreSQL (up to 5 s per try) before it gives up on the held database
        _, err = proc.communicate(timeout=300)
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


# ------------------------------------------------------------------ 4. private by default

def _modes(root: Path) -> dict[str, str]:
    """Permission bits of every entry under `root`, as 'dir 0700' / 'file 0600'."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue  # removed while we looked
            kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
            out[str(path.relative_to(root))] = f"{kind} {stat.S_IMODE(info.st_mode):04o}"
    return out


def test_work_root_and_sandbox_copies_are_private(tmp_path):
    target = payments_target("duckdb", tmp_path / "proj")
    run = tmp_path / "run"
    root = work_root(run)
    root.mkdir(parents=True, mode=0o755)
    root.chmod(0o755)  # ours, but open to others: tightened
    proc = spawn_gameday(target, run, "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2")
    seen: dict[str, str] = {}
    while proc.poll() is None:  # sample the tree while the run lives
        if phase(run) in ("snapshot", "reference", "scenario"):
            seen.update({k: v for k, v in _modes(root).items() if k.startswith(PREFIX)})
        time.sleep(0.02)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    copies = {k: v for k, v in seen.items() if k.endswith(".duckdb")}
    assert any("_snapshot" in k or "/snapshot/" in k for k in copies) and any("/replay/" in k for k in copies), copies
    assert set(copies.values()) == {"file 0600"}, copies
    wrong = {k: v for k, v in seen.items() if v not in ("dir 0700", "file 0600")}
    assert wrong == {}, wrong
    assert len(seen) >= 10


def test_work_root_owned_by_someone_else_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    target = payments_target("duckdb", tmp_path / "proj")
    run = tmp_path / "run"
    root = work_root(run)
    root.mkdir(parents=True)
    os.chown(root, 65534, 65534)
    proc = spawn_gameday(target, run, *CHEAP)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"refusing to use the work root {root}: it belongs to another user (uid 65534)" in lines[0]
    assert list(root.iterdir()) == [] and not proc.out_dir.exists()


# ------------------------------------------------------------------ 8. small

def _made(tmp: Path) -> list[str]:
    """What a game day with TMPDIR=tmp left there, besides its stdout files and an empty work root."""
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")
                  if not p.name.startswith("stdout_") and p != work_root(tmp))


def test_unwritable_output_dir_is_found_before_any_work(tmp_path):
    target = payments_target("duckdb", tmp_path / "proj")
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    run = tmp_path / "run"
    proc = spawn_gameday(target, run, *CHEAP, out=blocker / "reports")
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2, err
    assert len(lines) == 1 and f"cannot write into the output directory {blocker / 'reports'}" in lines[0], err
    assert _made(run) == []  # no parse, no snapshot: nothing was done


def test_run_that_cannot_connect_leaves_no_folder(tmp_path, pg_server):
    from support.common import free_port

    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    from support.common import write_profiles
    write_profiles(target.profiles, "payments", dict(target.output, port=free_port()), target="local")
    run = tmp_path / "run"
    proc = spawn_gameday(target, run, *CHEAP)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2, err
    assert len(lines) == 1 and "cannot open a maintenance connection" in lines[0], err
    assert _made(run) == []


# ------------------------------------------------------------------ 7. secrets only through the environment

def test_pass_spelling_and_pgpassword_never_reach_a_file(tmp_path, pg_server, monkeypatch):
    """The profile spells the password `pass:` (dbt-postgres accepts it) and PGPASSWORD holds it too:
    no file under the work root, the project or the output holds it, during or after the run."""
    import threading

    from support.common import create_role, write_profiles

    password = f"pw-{uuid.uuid4().hex}"
    role = create_role(pg_server, password=password)
    target = payments_target("postgres", tmp_path / "proj", server=pg_server, role=role)
    output = {k: v for k, v in target.output.items() if k != "password"}
    write_profiles(target.profiles, "payments", dict(output, **{"pass": password}), target="local")
    monkeypatch.setenv("PGPASSWORD", password)
    run = tmp_path / "run"
    roots = [run, target.project]
    seen: list[str] = []
    profiles_seen: set[str] = set()
    stop = threading.Event()

    def scan() -> None:
        while not stop.is_set():
            seen.extend(files_with(password.encode(), roots))
            # a sandbox profile names the run's own role (rerun_safety_role_<run>) where the user's was
            profiles_seen.update(p for p in files_with(b"rerun_safety_role_", [run]) if p.endswith("profiles.yml"))
            time.sleep(0.05)

    scanner = threading.Thread(target=scan)
    scanner.start()
    try:
        proc = spawn_gameday(target, run, *ROLE_ARGS)
        _, err = proc.communicate(timeout=600)
    finally:
        stop.set()
        scanner.join()
    assert proc.returncode == 0, err
    assert {m["name"]: m["verdict"] for m in load_report(proc.out_dir)["models"]} == {
        "payments_current": "safe", "payments_merged": "safe"}
    assert len(profiles_seen) >= 2, profiles_seen  # the scan saw the generated sandbox profiles
    assert seen == [] and files_with(password.encode(), roots) == []
    assert password not in err


def test_duckdb_settings_and_secrets_reach_sandbox_profiles_through_the_environment(tmp_path):
    """dbt-duckdb `settings:` and `secrets:` holding cloud keys: the sandbox profile that the game day writes
    holds none of them, and dbt renders it back to the user's values (httpfs cannot be installed here,
    so this checks the generated profile through dbt's own profile renderer instead of a full run)."""
    import types

    from rerun_safety.gameday import Gameday, GamedayOptions
    from rerun_safety.project import load_target_output
    from rerun_safety.warehouse.engines import engine_for

    from support.common import write_profiles

    target = payments_target("duckdb", tmp_path / "proj")
    keys = {name: f"{name}-{uuid.uuid4().hex}" for name in ("s3_key_id", "s3_secret", "token", "entry_key", "entry_secret")}
    user = dict(target.output,
                settings={"s3_access_key_id": keys["s3_key_id"], "s3_secret_access_key": keys["s3_secret"],
                          "motherduck_token": keys["token"], "threads": 2, "s3_region": "eu-west-1"},
                secrets=[{"type": "s3", "key_id": keys["entry_key"], "secret": keys["entry_secret"],
                          "region": "eu-west-1"}])
    write_profiles(target.profiles, "payments", user, target="local")
    _, _, rendered = load_target_output(target.project, target.profiles, None, {})
    gd = Gameday(GamedayOptions.build(project_dir=target.project, output_dir=tmp_path / "out",
                                      work_root=tmp_path / "work"))
    gd.engine = engine_for(rendered, tmp_path / "work", "secrets1")
    gd.project = types.SimpleNamespace(profile_name="payments", target_name="local")
    try:
        sandbox = gd.engine.create_snapshot([])
        folder = Path(gd._profiles_dir(sandbox))
        text = (folder / "profiles.yml").read_text()
        assert [k for k, v in keys.items() if v in text] == []
        assert files_with(keys["s3_secret"].encode(), [tmp_path / "work"]) == []
        _, _, back = load_target_output(target.project, folder, None, {})
        assert back["settings"] == user["settings"] | {"threads": 2}
        assert back["secrets"] == user["secrets"]
        assert back["path"] == sandbox.location
    finally:
        gd.engine.cleanup()
        gd.engine.close()


# ------------------------------------------------------------------ 5. any column type

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


# ------------------------------------------------------------------ 6. diff --where stays a filter

@pytest.fixture(scope="module")
def pg_payments(tmp_path_factory, pg_server):
    target = payments_target("postgres", tmp_path_factory.mktemp("where_pg"), server=pg_server)
    conn = pg_server.connect(target.dbname)
    with conn.cursor() as cur:
        cur.execute("create sequence landing.counter")
        cur.execute("create function landing.bump() returns bigint language sql volatile "
                    "as 'select nextval(''landing.counter'')'")
    conn.close()
    return target


def _diff(target, where: str) -> tuple[int, str, str]:
    from support.gameday import run_cli

    return run_cli(["diff", "landing.payments", "landing.payments", "--project-dir", str(target.project),
                    "--profiles-dir", str(target.profiles), "--format", "json", "--where", where])


@pytest.mark.parametrize("where,named", [
    ("set_config('default_transaction_read_only', 'off', false) is not null", "set_config"),
    ("pg_catalog.set_config('transaction_read_only', 'off', true) = 'off'", "set_config"),
    ("account_id > 3 and landing.bump() > 0", "bump"),  # a user-defined volatile function: PostgreSQL says so
    ("random() < 0.5", "random"),
])
def test_diff_where_refuses_what_a_filter_does_not_need(pg_payments, where, named):
    from support.gameday import pg_fingerprint

    before = pg_fingerprint(pg_payments.server, pg_payments.dbname)
    code, out, err = _diff(pg_payments, where)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (out, err)
    assert len(lines) == 1 and f"--where may not call {named}()" in lines[0], err
    assert out == ""
    conn = pg_payments.server.connect(pg_payments.dbname)
    with conn.cursor() as cur:
        cur.execute("select last_value, is_called from landing.counter")
        assert cur.fetchone() == (1, False)  # never called
    conn.close()
    assert pg_fingerprint(pg_payments.server, pg_payments.dbname) == before


def test_diff_where_still_filters(pg_payments):
    import json

    code, out, err = _diff(pg_payments, "account_id > 3 and lower('A') = 'a' and ingested_at >= date '2025-11-03'")
    assert code == 0, err
    result = json.loads(out)
    assert result["identical"] is True and 0 < result["left_rows"] == result["right_rows"] < 600


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


def test_sweep_removes_half_made_run_folders_of_dead_runs(tmp_path):
    """A run killed between creating its run folder and naming it leaves `.rerun_safety_new_*`: the next
    sweep removes an old one, and leaves a young one (a live run may still be making it)."""
    from rerun_safety.warehouse.engines import engine_for
    from rerun_safety.warehouse.base import NEW_PREFIX

    target = payments_target("duckdb", tmp_path / "proj")
    root = tmp_path / "work"
    old, young = root / f"{NEW_PREFIX}dead", root / f"{NEW_PREFIX}alive"
    for folder in (old, young):
        folder.mkdir(parents=True)
        (folder / "lock").write_text("")
    os.utime(old, (time.time() - 300, time.time() - 300))
    engine = engine_for(target.output, root, "sweep_half")
    try:
        assert engine.sweep() == 1
    finally:
        engine.cleanup()
        engine.close()
    assert not old.exists() and young.exists()


PLUGIN = '''"""A dbt-duckdb plugin whose store() writes outside the warehouse (as Glue, SQLAlchemy or Excel ones do)."""
from pathlib import Path

from dbt.adapters.duckdb.plugins import BasePlugin


class Plugin(BasePlugin):
    def store(self, target_config):
        with open(Path(__file__).with_name("registered.txt"), "a") as fh:
            fh.write(f"{target_config.relation} {target_config.location.path}\\n")
'''


def test_external_model_plugin_store_is_not_called_in_sandboxes(tmp_path):
    """An external model with `plugin=` hands its relation to the plugin's store() after the write (e.g.
    registering it in a catalog): the game day keeps the file and its view in the sandbox, and never
    calls the store."""
    from support.common import write_profiles

    target = payments_target("duckdb", tmp_path / "proj")
    (target.project / "prod_store.py").write_text(PLUGIN)
    write_profiles(target.profiles, "payments",
                   dict(target.output, module_paths=[str(target.project)],
                        plugins=[{"module": "prod_store", "alias": "catalog"}]), target="local")
    (target.project / "models" / "payments_registered.sql").write_text(
        "{{ config(materialized='external', plugin='catalog') }}\n"
        "select account_id, payment_no from {{ ref('payments_merged') }}\n")
    before = project_files(target.project)
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay",
                         "--select", "payments_merged", "--select", "payments_registered")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert not (target.project / "registered.txt").exists()
    assert project_files(target.project) == before
    models = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    assert models["payments_registered"]["verdict"] == "safe"
    assert models["payments_registered"]["scenarios"][0]["reference_rows"] == 600
