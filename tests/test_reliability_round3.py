"""Reliability, round three: what a filter, a password spelling, the CI environment or a hostile name can
still do. Real PostgreSQL servers, real DuckDB files, real dbt."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.common import write_profiles
from support.gameday import pg_fingerprint, run_cli
from support.reliability import payments_target

# A --where that, read with standard_conforming_strings off, ends its first literal at `\'`: the server
# then sees `)) l; commit; begin read write; create table ...; commit;` and a comment. On a read-only
# connection that sends the query in one piece, that committed a table.
INJECTED = ("account_id::text = 'A\\' or account_id::text = ')) l; commit; begin read write; "
            "create table public.pwned_diff (i int); commit; --'")


@pytest.fixture(scope="module")
def pg_off(tmp_path_factory, pg_server):
    """The payments fixture on PostgreSQL, in a database whose standard_conforming_strings is off."""
    target = payments_target("postgres", tmp_path_factory.mktemp("round3_pg"), server=pg_server)
    conn = pg_server.connect()
    with conn.cursor() as cur:
        cur.execute(f'alter database "{target.dbname}" set standard_conforming_strings = off')
    conn.close()
    return target


def _diff(target, *args: str, profiles=None) -> tuple[int, str, str]:
    return run_cli(["diff", "landing.payments", "landing.payments", "--project-dir", str(target.project),
                    "--profiles-dir", str(profiles or target.profiles), "--format", "json", *args])


def _exists(server, dbname: str, name: str) -> bool:
    conn = server.connect(dbname)
    with conn.cursor() as cur:
        cur.execute("select to_regclass(%s) is not null", [name])
        found = cur.fetchone()[0]
    conn.close()
    return found


def test_diff_where_cannot_end_a_literal_early_when_the_database_reads_backslashes_as_escapes(pg_off):
    conn = pg_off.server.connect(pg_off.dbname)
    with conn.cursor() as cur:
        cur.execute("show standard_conforming_strings")
        assert cur.fetchone() == ("off",)
    conn.close()
    before = pg_fingerprint(pg_off.server, pg_off.dbname)
    code, out, err = _diff(pg_off, "--where", INJECTED)
    assert code == 0, err
    result = json.loads(out)
    # the whole text is a filter: two literals no account id equals
    assert (result["identical"], result["left_rows"], result["right_rows"]) == (True, 0, 0)
    assert not _exists(pg_off.server, pg_off.dbname, "public.pwned_diff")
    assert pg_fingerprint(pg_off.server, pg_off.dbname) == before


def test_diff_where_reads_a_backslash_as_itself_whatever_the_database_setting(pg_off):
    code, out, err = _diff(pg_off, "--where", "account_id::text || '\\' = '4\\'")
    assert code == 0, err
    result = json.loads(out)
    conn = pg_off.server.connect(pg_off.dbname)
    with conn.cursor() as cur:
        cur.execute("select count(*) from landing.payments where account_id = 4")
        fours = cur.fetchone()[0]
    conn.close()
    assert fours > 0 and (result["left_rows"], result["right_rows"]) == (fours, fours)


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


@pytest.fixture(scope="module")
def password_role(pg_server):
    pg_server.password_role("rs_pw_user", "s3cret-pw")
    return "rs_pw_user"


@pytest.mark.parametrize("spelling", ["password", "pass"])
def test_diff_uses_the_password_under_either_spelling(pg_off, password_role, tmp_path, spelling):
    output = {k: v for k, v in pg_off.output.items() if k != "password"}
    output.update({"user": password_role, spelling: "s3cret-pw"})
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    code, out, err = _diff(pg_off, profiles=profiles)
    assert code == 0, err
    assert json.loads(out)["left_rows"] == 600


def test_diff_with_a_wrong_password_is_one_line_and_exit_2(pg_off, password_role, tmp_path):
    output = {k: v for k, v in pg_off.output.items() if k != "password"}
    output.update({"user": password_role, "pass": "wrong"})
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    code, out, err = _diff(pg_off, profiles=profiles)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, out) == (2, "")
    assert len(lines) == 1 and "password authentication failed" in lines[0], err
    assert "wrong" not in err


# ------------------------------------------------------------------ secrets at any depth stay off disk

def _cloud_profile(base: dict) -> tuple[dict, dict]:
    """A dbt-duckdb output with secrets where users put them: settings (a key, a proxy URL with a
    password), secrets entries, filesystems (fsspec credentials), and a token in a query string."""
    import uuid

    keys = {n: f"{n}-{uuid.uuid4().hex}" for n in ("s3_secret", "proxy_pw", "entry_secret", "fs_key", "fs_secret",
                                                   "azure", "md_token")}
    user = dict(base,
                settings={"s3_secret_access_key": keys["s3_secret"], "s3_region": "eu-west-1", "threads": 2,
                          "http_proxy": f"http://alice:{keys['proxy_pw']}@proxy.internal:3128"},
                secrets=[{"type": "s3", "key_id": "AKIA-PUBLIC-ID", "secret": keys["entry_secret"],
                          "region": "eu-west-1"}],
                filesystems=[{"fs": "s3", "anon": False, "key": keys["fs_key"], "secret": keys["fs_secret"]},
                             {"fs": "abfs", "account_name": "acct", "connection_string": keys["azure"]}],
                plugins=[{"module": "custom", "config": {"url": f"https://host/api?access_token={keys['md_token']}"}}])
    return user, keys


def _render_back(project, folder) -> dict:
    from rerun_safety.project import load_target_output

    return load_target_output(project, folder, None, {})[2]


def test_secrets_at_any_depth_never_reach_a_sandbox_profile(tmp_path):
    import types

    from rerun_safety.gameday import Gameday, GamedayOptions
    from rerun_safety.warehouse.engines import engine_for

    target = payments_target("duckdb", tmp_path / "proj")
    user, keys = _cloud_profile(target.output)
    write_profiles(target.profiles, "payments", user, target="local")
    rendered = _render_back(target.project, target.profiles)
    gd = Gameday(GamedayOptions.build(project_dir=target.project, output_dir=tmp_path / "out",
                                      work_root=tmp_path / "work"))
    gd.engine = engine_for(rendered, tmp_path / "work", "secrets3")
    gd.project = types.SimpleNamespace(profile_name="payments", target_name="local")
    try:
        sandbox = gd.engine.create_snapshot([])
        folder = Path(gd._profiles_dir(sandbox))
        text = (folder / "profiles.yml").read_text()
        assert [k for k, v in keys.items() if v in text] == []
        # every string of the user's, whatever its key is called, through the environment (rendered back below)
        assert "eu-west-1" not in text and "proxy.internal" not in text
        back = _render_back(target.project, folder)
        for key in ("settings", "secrets", "filesystems"):
            assert back[key] == user[key], key
        # the user's plugins, then the sandbox's own (warehouse/duckdb/confine)
        assert back["plugins"][:-1] == user["plugins"]
        assert back["plugins"][-1]["module"] == "rerun_safety.warehouse.duckdb.confine"
    finally:
        gd.engine.cleanup()
        gd.engine.close()


def test_secrets_at_any_depth_never_reach_the_lint_scratch_profile(tmp_path):
    from rerun_safety.warehouse.scratch import TargetProfile, write_profile

    target = payments_target("duckdb", tmp_path / "proj")
    user, keys = _cloud_profile(target.output)
    folder = write_profile(tmp_path / "scratch", TargetProfile("payments", "local", user), user)
    text = (folder / "profiles.yml").read_text()
    assert [k for k, v in keys.items() if v in text] == []
    assert "DBT_ENV_SECRET_" in text  # masked in dbt's logs too
    back = _render_back(target.project, folder)
    for key in ("settings", "secrets", "filesystems", "plugins"):
        assert back[key] == user[key], key


# ------------------------------------------------------------------ CI's dbt variables stay out of sandboxes

def test_ci_deferral_variables_never_reach_sandbox_runs(tmp_path, pg_server, monkeypatch):
    """A CI job that defers to production (DBT_DEFER, DBT_STATE, DBT_FAVOR_STATE) and builds empty
    (DBT_EMPTY): the game day ignores them, says so, and its verdicts are those of a plain run."""
    import subprocess
    import sys

    from support.gameday import load_report
    from support.reliability import CHEAP, spawn_gameday

    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    state = tmp_path / "prod_manifest"
    dbt = str(Path(sys.executable).with_name("dbt"))
    subprocess.run([dbt, "run", "--project-dir", str(target.project), "--profiles-dir", str(target.profiles),
                    "--target-path", str(state), "--log-path", str(tmp_path / "logs")],
                   check=True, capture_output=True)
    assert (state / "manifest.json").exists()
    for name, value in {"DBT_DEFER": "true", "DBT_STATE": str(state), "DBT_FAVOR_STATE": "true",
                        "DBT_EMPTY": "true", "DBT_TARGET_PATH": str(tmp_path / "ci_target")}.items():
        monkeypatch.setenv(name, value)
    proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    report = load_report(proc.out_dir)
    models = {m["name"]: m for m in report["models"]}
    assert {n: m["verdict"] for n, m in models.items()} == {"payments_current": "safe", "payments_merged": "safe"}
    assert all(s["rows"] > 0 for m in models.values() for s in m["scenarios"])  # not an empty build
    assert ("ignored dbt's environment variables DBT_DEFER, DBT_FAVOR_STATE, DBT_STATE, DBT_TARGET_PATH, DBT_EMPTY: "
            "sandbox runs build everything they read and defer to nothing (--state is the runner's way to compare "
            "with a previous manifest)") in report["summary"]["notes"]
    assert not (tmp_path / "ci_target").exists()


# ------------------------------------------------------------------ a Ctrl-C at any moment: one line, 130

def _diff_command(path: Path) -> list[str]:
    import sys

    return [str(Path(sys.executable).with_name("rerun-safety")), "diff", f"{path}:main.a", f"{path}:main.b",
            "--key", "id"]


@pytest.fixture(scope="module")
def big_duckdb(tmp_path_factory):
    """Two 4M-row tables that differ in 40 rows, and how long a whole diff of them takes here."""
    import subprocess
    import time

    import duckdb

    path = tmp_path_factory.mktemp("interrupt") / "big.duckdb"
    con = duckdb.connect(str(path))
    con.execute("set enable_progress_bar = false")
    con.execute("create table a as select i as id, i % 97 as v, md5(i::varchar) as s from range(4000000) t(i)")
    con.execute("create table b as select * from a")
    con.execute("update b set v = v + 1 where id % 100000 = 0")
    con.close()
    assert subprocess.run(_diff_command(path), capture_output=True).returncode == 1  # warm the caches first:
    started = time.monotonic()  # a cold first run is slower, and 0.7 of it could outlast a warm diff
    assert subprocess.run(_diff_command(path), capture_output=True).returncode == 1
    return path, time.monotonic() - started


def _wait_until_caught(pid: int, sig: int, limit: float = 30.0) -> bool:
    """Poll /proc until the process catches `sig` (its SigCgt mask), at once after the handler goes in."""
    import time

    stop = time.monotonic() + limit
    while time.monotonic() < stop:
        with open(f"/proc/{pid}/status") as status:
            caught = next(int(ln.split()[1], 16) for ln in status if ln.startswith("SigCgt:"))
        if caught >> (sig - 1) & 1:
            return True
    return False


@pytest.mark.parametrize("share", [0.0, 0.2, 0.45, 0.7])
def test_ctrl_c_during_diff_is_one_line_and_exit_130(big_duckdb, share):
    """From the console script's first line (before the runner is imported, before any command runs) to
    the last query, at shares of a whole diff's measured time: never click's `Aborted!` with exit 1 (the
    code of "different"), never a traceback. Share 0 sends the signal the moment the script's handlers are
    in (SIGTERM caught, which Python's own start never does): the interpreter's start before that keeps
    Python's default, and a fixed sleep would land there or not depending on the machine's load."""
    import signal
    import subprocess
    import time

    path, whole = big_duckdb
    delay = share * whole
    for _ in range(4):
        proc = subprocess.Popen(_diff_command(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        if share == 0.0:
            assert _wait_until_caught(proc.pid, signal.SIGTERM), "the script never installed its handlers"
        else:
            time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        # On a machine whose load fell since the diff was timed, the diff may end first, or print its
        # result and take the signal while the interpreter shuts down (its handlers gone): not a run
        # the signal interrupted, so again, earlier.
        if share and out and proc.returncode in (1, -signal.SIGINT):
            delay /= 2
            continue
        break
    else:
        raise AssertionError("the diff ended before the signal four times")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert len(lines) == 1 and lines[0].startswith("rerun-safety: ") and "interrupted by SIGINT" in lines[0], err
    assert out == ""


# ------------------------------------------------------------------ control characters never reach a terminal

ESCAPES = "\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[1A\r"


def test_the_terminal_summary_shows_control_characters_instead_of_sending_them():
    import io

    from rich.console import Console

    from rerun_safety.report.terminal import print_summary
    from rerun_safety.results import GamedayReport, ModelVerdict, ScenarioResult

    broken = ModelVerdict(
        f"evil{ESCAPES}model", "model.p.evil", "error", True, (), "incremental", "merge", ("id",), (),
        (ScenarioResult("replay", "error", message=f"Conversion Error: could not convert '{ESCAPES}' to INT32"),))
    report = GamedayReport("p", "duckdb", "dev", ("reference", "replay"), 2, (), (broken,), 1.0, 3, 0.5,
                           "2026-12-03T00:00:00+00:00", notes=(f"a note naming {ESCAPES}",))
    for tty in (False, True):
        buf = io.StringIO()
        print_summary(report, {}, console=Console(file=buf, width=200, force_terminal=tty, color_system=None))
        text = buf.getvalue()
        assert "\x1b]" not in text and "\x07" not in text and "\r" not in text and "\x1b[2J" not in text
        assert text.count("evil\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1b[1A\\x0dmodel") == 3  # table, headline, error
        assert "could not convert '\\x1b]0;PWNED-TITLE" in text


def test_cli_error_lines_show_control_characters_instead_of_sending_them(tmp_path):
    code, out, err = run_cli(["diff", f"{tmp_path}/no{ESCAPES}.duckdb:main.a", f"{tmp_path}/x.duckdb:main.b"])
    assert code == 2 and "\x1b" not in err and "\\x1b]0;PWNED-TITLE" in err, err


@pytest.fixture(scope="module")
def hostile_tables(tmp_path_factory):
    import duckdb

    path = tmp_path_factory.mktemp("hostile") / "h.duckdb"
    con = duckdb.connect(str(path))
    con.execute('create table a (id int, "note<b>|x" varchar)')
    con.execute('create table b (id int, "note<b>|x" varchar)')
    con.execute("insert into a values (1, 'fine'), (2, 'fine')")
    con.execute("insert into b values (1, 'fine'), (2, ?)", [f"<script>alert(1)</script>|`{ESCAPES}"])
    con.close()
    return path


def test_diff_markdown_escapes_names_and_values_like_the_game_days(hostile_tables):
    code, out, err = run_cli(["diff", f"{hostile_tables}:main.a", f"{hostile_tables}:main.b", "--key", "id",
                              "--format", "md"])
    assert code == 1, err
    assert "<script>" not in out and "<b>" not in out and "\x1b" not in out and "\x07" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\`\\\\x1b" in out
    # every table row keeps its column count: an escaped | does not split a cell (the changed key's
    # table: key, column, left, right; with --all-columns the whole rows: side, id, note)
    rows = [ln for ln in out.splitlines() if ln.startswith("| key") or ln.startswith("| id=")]
    assert len(rows) == 2 and {len(ln.replace("\\|", "").split("|")) for ln in rows} == {6}, out
    code, out, err = run_cli(["diff", f"{hostile_tables}:main.a", f"{hostile_tables}:main.b", "--key", "id",
                              "--format", "md", "--all-columns"])
    assert "<script>" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\`\\\\x1b" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| side")] + \
        [ln for ln in out.splitlines() if ln.startswith("| only_")]
    assert len(rows) == 3 and {len([c for c in ln.replace("\\|", "").split("|")]) for ln in rows} == {5}


def test_diff_text_shows_control_characters_instead_of_sending_them(hostile_tables):
    code, out, err = run_cli(["diff", f"{hostile_tables}:main.a", f"{hostile_tables}:main.b", "--key", "id"])
    assert code == 1, err
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;PWNED-TITLE" in out


# ------------------------------------------------------------------ kept sandboxes stay kept for a day

@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_kept_sandboxes_survive_other_game_days_for_a_day(tmp_path, request, engine):
    import time

    from support.gameday import load_report
    from rerun_safety.warehouse.engines import engine_for
    from rerun_safety.warehouse.base import KEPT_MARKER
    from support.reliability import CHEAP, PREFIX, leftover_databases, spawn_gameday, work_root

    server = request.getfixturevalue("pg_server") if engine == "postgres" else None
    target = payments_target(engine, tmp_path / "proj", server=server)
    proc = spawn_gameday(target, tmp_path, *CHEAP, "--select", "payments_merged", "--keep-sandboxes")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    note = next(n for n in load_report(proc.out_dir)["summary"]["notes"] if n.startswith("--keep-sandboxes"))
    kept = note.split("after that): ", 1)[1].split(", ")
    run_dirs = list(work_root(tmp_path).glob(f"{PREFIX}*"))
    assert len(run_dirs) == 1 and (run_dirs[0] / KEPT_MARKER).exists()
    run_id = run_dirs[0].name[len(PREFIX):]

    def present() -> list[str]:
        if engine == "postgres":
            return [d for d in leftover_databases(server) if d.startswith(f"{PREFIX}{run_id}_")]
        return sorted(str(p) for p in run_dirs[0].rglob("*.duckdb"))

    before = present()
    assert len(before) >= 2 and (engine == "duckdb" or sorted(kept) == before), (note, before)
    # the game day of another job: its sweep leaves them
    other = engine_for(target.output, work_root(tmp_path), "otherjob01")
    try:
        assert other.sweep() == 0
    finally:
        other.cleanup()
        other.close()
    assert present() == before
    # a day later the next sweep removes them
    marker = run_dirs[0] / KEPT_MARKER
    marker.write_text(marker.read_text().replace('"until": ', '"until": -'))
    if engine == "postgres":
        conn = server.connect()
        with conn.cursor() as cur:
            for name in before:
                cur.execute(f'comment on database "{name}" is %s',
                            [f"rerun_safety: kept (--keep-sandboxes) until unix time {int(time.time()) - 1}"])
        conn.close()
    later = engine_for(target.output, work_root(tmp_path), "nextday01")
    try:
        assert later.sweep() >= 1
    finally:
        later.cleanup()
        later.close()
    assert present() == [] and not run_dirs[0].exists()


# ------------------------------------------------------------------ hooks cannot write outside a DuckDB sandbox

def test_duckdb_hooks_cannot_write_the_users_files(tmp_path):
    """Post-hooks that export the model to the user's file (absolute and relative paths) and that
    attach another DuckDB file to write into it: refused inside every sandbox (the files stay byte for
    byte, mode included), judged `side_effect` naming the hook, never a crash."""
    import os
    import stat

    import duckdb

    from support.gameday import file_sha256, load_report
    from support.reliability import CHEAP, spawn_gameday

    target = payments_target("duckdb", tmp_path / "proj")
    exports = tmp_path / "exports"
    exports.mkdir()
    absolute = exports / "payments.csv"
    absolute.write_text("account_id,payment_no\n" + "".join(f"{i},{i}\n" for i in range(4800)))
    absolute.chmod(0o644)
    relative = target.project / "local_export.csv"
    relative.write_text("kept\n")
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("create table log (n bigint)")
        con.execute("insert into log values (1)")
    models = target.project / "models"
    (models / "payments_exported.sql").write_text(
        "{{ config(materialized='incremental', incremental_strategy='merge', unique_key=['account_id', 'payment_no'],\n"
        f"          post_hook=\"copy (select account_id, payment_no from {{{{ this }}}}) to '{absolute}' (header)\") }}}}\n"
        "select account_id, payment_no from {{ ref('payments_merged') }}\n")
    (models / "payments_exported_here.sql").write_text(
        "{{ config(materialized='table', post_hook=\"copy (select 1 as n) to 'local_export.csv'\") }}\n"
        "select account_id from {{ ref('payments_merged') }}\n")
    (models / "payments_logged.sql").write_text(
        "{{ config(materialized='table', post_hook=[\n"
        f"     \"attach if not exists '{other}' as rs_other_db\",\n"
        "     \"insert into rs_other_db.log select count(*) from {{ this }}\"]) }}\n"
        "select account_id from {{ ref('payments_merged') }}\n")
    # files the models' own SQL reads stay readable (a glob's folder, and a file by a relative path)
    rates = tmp_path / "rates"
    rates.mkdir()
    (rates / "fx_2025.csv").write_text("currency,rate\nEUR,1.0\nUSD,0.9\n")
    (target.project / "limits.csv").write_text("account_id,cap\n1,100\n")
    (models / "fx_from_files.sql").write_text(
        f"select r.currency, r.rate, l.cap from read_csv('{rates}/*.csv') r cross join read_csv('limits.csv') l\n"
        "cross join (select count(*) from {{ ref('payments_merged') }}) m\n")
    # a path built in Jinja is not found in the SQL: that model is not judged (never an error)
    more = tmp_path / "more_rates"
    more.mkdir()
    (more / "fx_2026.csv").write_text("currency,rate\nEUR,1.0\n")
    (models / "fx_from_var.sql").write_text(
        "select * from read_csv('{{ var(\"rates_dir\", \"" + str(more) + "\") }}/fx_2026.csv')\n"
        "cross join (select count(*) from {{ ref('payments_merged') }}) m\n")
    # a hook that installs an extension (DuckDB's own folder, not the user's data): not judged, not unsafe
    (models / "with_extension.sql").write_text(
        "{{ config(materialized='table', pre_hook='install json') }}\n"
        "select count(*) as n from {{ ref('payments_merged') }}\n")
    files = {p: (file_sha256(p), stat.S_IMODE(os.stat(p).st_mode)) for p in (absolute, relative, other)}
    proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged+")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert {p: (file_sha256(p), stat.S_IMODE(os.stat(p).st_mode)) for p in files} == files
    models = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    for name, hook in (("payments_exported", f"copy (select account_id, payment_no from {{{{ this }}}}) to '{absolute}'"),
                       ("payments_exported_here", "copy (select 1 as n) to 'local_export.csv'"),
                       ("payments_logged", f"attach if not exists '{other}' as rs_other_db")):
        m = models[name]
        assert (m["verdict"], m["root_cause"]) == ("side_effect", True), (name, m)
        message = m["scenarios"][0]["message"]
        assert message.startswith("a hook writes or reads a file outside the sandbox (refused there): "), message
        assert f"hook: {hook}" in message, message
    assert models["payments_merged"]["verdict"] == "safe"
    assert models["fx_from_files"]["verdict"] == "safe" and models["fx_from_files"]["scenarios"][0]["rows"] == 2
    ext = models["with_extension"]
    assert (ext["verdict"], ext["root_cause"]) == ("untested", False), ext
    assert ext["scenarios"][0]["message"].startswith("not judged: a hook installs a DuckDB extension")
    by_var = models["fx_from_var"]
    assert (by_var["verdict"], by_var["root_cause"]) == ("untested", False), by_var
    assert by_var["scenarios"][0]["message"].startswith("not judged: the model reads a file outside the sandbox")


def test_postgres_hooks_cannot_write_server_files(tmp_path, pg_server):
    """As a superuser (who may write any file the server can): a post-hook's COPY ... TO a server file
    and one's lo_export are refused in every sandbox statement, judged side_effect naming the hook;
    the server's file stays byte for byte."""
    import os

    from support.gameday import file_sha256, load_report
    from support.reliability import CHEAP, spawn_gameday

    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    export = Path(pg_server.base) / f"export_{os.getpid()}.csv"
    export.write_text("account_id\n" + "".join(f"{i}\n" for i in range(4800)))
    export.chmod(0o666)
    before = file_sha256(export)
    models = target.project / "models"
    (models / "payments_exported.sql").write_text(
        "{{ config(materialized='table',\n"
        f"          post_hook=\"copy (select account_id from {{{{ this }}}}) to '{export}' with csv header\") }}}}\n"
        "select account_id, payment_no from {{ ref('payments_merged') }}\n")
    (models / "payments_lo.sql").write_text(
        "{{ config(materialized='table', post_hook=\"select lo_export(lo_from_bytea(0, 'x'), '" + str(export) + "')\") }}\n"
        "select account_id from {{ ref('payments_merged') }}\n")
    proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged+")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert file_sha256(export) == before
    report = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    exported, lo = report["payments_exported"], report["payments_lo"]
    assert (exported["verdict"], lo["verdict"]) == ("side_effect", "side_effect"), (exported, lo)
    assert exported["scenarios"][0]["message"] == (
        "a hook writes or reads a file outside the sandbox (refused there): the statement writes the server file "
        f"\"{export}\" (COPY ... TO a file); hook: copy (select account_id from {{{{ this }}}}) to '{export}' with csv header")
    assert "lo_export()" in lo["scenarios"][0]["message"] and "hook: select lo_export(" in lo["scenarios"][0]["message"]
    assert report["payments_merged"]["verdict"] == "safe"


def test_lint_with_a_wrong_password_is_one_line_and_exit_2(pg_off, password_role, tmp_path):
    """A misconfigured CI secret must not turn the lint green (it exited 0 with warnings only)."""
    output = {k: v for k, v in pg_off.output.items() if k != "password"}
    output.update({"user": password_role, "password": "wrong"})
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    code, out, err = run_cli(["lint", "--project-dir", str(pg_off.project), "--profiles-dir", str(profiles)])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, out) == (2, ""), (code, out, err)
    assert len(lines) == 1 and "password authentication failed" in lines[0] and "wrong" not in err, err
