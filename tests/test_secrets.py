"""Secrets never reach a file: profile passwords (either spelling, PGPASSWORD), DuckDB settings and secrets,
values at any depth of a profile, and CI deferral variables travel to sandbox runs and the lint's scratch
profile only through the environment; a wrong password is one line, exit 2. Real dbt, a real PostgreSQL."""
from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from support.common import write_profiles
from support.gameday import load_report, run_cli
from support.reliability import ROLE_ARGS, SMALL, diff_cli, files_with, payments_target, spawn_gameday


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


    from rerun_safety.dbt_invoke import StatementWatch
    from rerun_safety.gameday import GamedayOptions
    from rerun_safety.gameday.replay import NoProgress, Replay
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
    gd = Replay(engine_for(rendered, tmp_path / "work", "secrets1"),
                types.SimpleNamespace(profile_name="payments", target_name="local"),
                GamedayOptions.build(project_dir=target.project, output_dir=tmp_path / "out",
                                     work_root=tmp_path / "work"), NoProgress(), StatementWatch())
    try:
        sandbox = gd.engine.create_snapshot([])
        folder = Path(gd.profiles_dir(sandbox))
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
    code, out, err = diff_cli(pg_off, profiles=profiles)
    assert code == 0, err
    assert json.loads(out)["left_rows"] == 600


def test_diff_with_a_wrong_password_is_one_line_and_exit_2(pg_off, password_role, tmp_path):
    output = {k: v for k, v in pg_off.output.items() if k != "password"}
    output.update({"user": password_role, "pass": "wrong"})
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    code, out, err = diff_cli(pg_off, profiles=profiles)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, out) == (2, "")
    assert len(lines) == 1 and "password authentication failed" in lines[0], err
    assert "wrong" not in err


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


    from rerun_safety.dbt_invoke import StatementWatch
    from rerun_safety.gameday import GamedayOptions
    from rerun_safety.gameday.replay import NoProgress, Replay
    from rerun_safety.warehouse.engines import engine_for


    target = payments_target("duckdb", tmp_path / "proj")
    user, keys = _cloud_profile(target.output)
    write_profiles(target.profiles, "payments", user, target="local")
    rendered = _render_back(target.project, target.profiles)
    gd = Replay(engine_for(rendered, tmp_path / "work", "secrets3"),
                types.SimpleNamespace(profile_name="payments", target_name="local"),
                GamedayOptions.build(project_dir=target.project, output_dir=tmp_path / "out",
                                     work_root=tmp_path / "work"), NoProgress(), StatementWatch())
    try:
        sandbox = gd.engine.create_snapshot([])
        folder = Path(gd.profiles_dir(sandbox))
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
