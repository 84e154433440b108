"""`rerun-safety lint` at its edges, on DuckDB and PostgreSQL: a selection that matches nothing and a
broken profiles.yml exit 2 with one line and no secret; the password never lands in a file; SIGTERM
removes the scratch folder and database; what a SIGKILL left is swept by the next run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.common import load_duckdb_with, load_postgres_with, write_profiles
from rerun_safety.cli import main
from test_lint_project import _load, _project

PASSWORD = "pw-Zq8-never-in-a-file"
RERUN_SAFETY = str(Path(sys.executable).parent / "rerun-safety")


@pytest.fixture
def small(engine, tmp_path, request):
    """The new-user project (dbt deps done), a profile with a password, and a private TMPDIR."""
    project = _project(tmp_path, engine)
    profiles = tmp_path / "profiles"
    if engine == "duckdb":
        path = tmp_path / "newshop.duckdb"
        load_duckdb_with(str(path), _load)
        output = {"type": "duckdb", "path": str(path), "schema": "analytics", "threads": 1}
        server = None
    else:
        server = request.getfixturevalue("pg_server")
        dbname = request.getfixturevalue("pg_database")
        load_postgres_with(server.dsn(dbname), _load)
        # the test server trusts local connections: the password is sent and ignored
        output = {"type": "postgres", "host": server.host, "port": server.port, "user": server.user,
                  "password": PASSWORD, "dbname": dbname, "schema": "analytics", "threads": 1}
    write_profiles(profiles, "newshop", output)
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke(["deps", "--project-dir", str(project), "--profiles-dir", str(profiles),
                              "--log-path", str(tmp_path / "deps_logs"), "--quiet"])
    assert res.success, res.exception
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    return project, profiles, tmp, server


def _scratch_databases(server) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select datname from pg_database where starts_with(datname, 'rerun_safety_lint_')")
            return sorted(r[0] for r in cur.fetchall())
    finally:
        conn.close()


def _files_holding(root: Path, needle: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and needle.encode() in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue
    return found


def _start(project: Path, profiles: Path, tmp: Path) -> subprocess.Popen:
    """The lint in a process group of its own (the command and its confined child)."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen([RERUN_SAFETY, "lint", "--project-dir", str(project), "--profiles-dir", str(profiles)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def _left_in(tmp: Path, killed: bool = False) -> list[str]:
    """What a lint left in its TMPDIR: everything but the (empty) work root folder it works in, and
    (`killed`: its process group was SIGKILLed) multiprocessing's own folders of the dead fork server."""
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p != tmp / f"rerun_safety-{os.getuid()}"
                  and not (killed and p.relative_to(tmp).parts[0].startswith("pymp-")))


def _wait_for_scratch(proc: subprocess.Popen, tmp: Path) -> Path:
    """The run folder once its scratch profile is written (the scratch database exists by then)."""
    deadline = time.time() + 120
    while time.time() < deadline:
        for profile in tmp.glob("rerun_safety-*/rerun_safety_lint_*/scratch_profile/profiles.yml"):
            return profile.parent.parent
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the lint never wrote its scratch profile")


def test_selection_matching_nothing_exits_2(small):
    project, profiles, _, _ = small
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                    "--select", "no_such_model"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "matches no model" in lines[0] and "no_such_model" in lines[0]


def test_broken_profiles_exit_2_without_the_secret(small, tmp_path):
    project, _, _, _ = small
    bad = tmp_path / "bad_profiles"
    bad.mkdir()
    (bad / "profiles.yml").write_text("newshop:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
                                      f"      password: {PASSWORD}\n      host: [unclosed\n")
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(bad)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    assert "profiles.yml" in lines[0] and "is not valid YAML at line " in lines[0]
    assert PASSWORD not in res.output and "Traceback" not in res.output
    # a profile whose target is missing: one line too
    (bad / "profiles.yml").write_text(f"newshop:\n  target: prod\n  outputs:\n    dev:\n      password: {PASSWORD}\n")
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(bad)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and PASSWORD not in res.output


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_cleans_up_and_the_password_stays_out_of_files(small, engine, sig, code):
    project, profiles, tmp, server = small
    proc = _start(project, profiles, tmp)
    try:
        run_dir = _wait_for_scratch(proc, tmp)
        if engine == "postgres":
            assert _scratch_databases(server) == [run_dir.name]
        # while the lint runs: its files (scratch profile included) and the project hold no password
        assert _files_holding(tmp, PASSWORD) == []
        assert _files_holding(project, PASSWORD) == []
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, (out, err)
    assert err.strip().splitlines() == [f"rerun-safety: lint interrupted by {sig.name}; scratch catalog removed"]
    assert "Traceback" not in err and PASSWORD not in out + err
    assert _left_in(tmp) == []
    if engine == "postgres":
        assert _scratch_databases(server) == []


def test_sigkill_leftovers_are_swept_by_the_next_run(small, engine):
    project, profiles, tmp, server = small
    proc = _start(project, profiles, tmp)
    try:
        run_dir = _wait_for_scratch(proc, tmp)
        os.killpg(proc.pid, signal.SIGKILL)  # the command and its confined child: nothing cleans up
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert run_dir.exists()
    if engine == "postgres":
        # the scratch database stays (nothing of the killed command cleaned up), unless the confined child,
        # told of its parent's death (PR_SET_PDEATHSIG), dropped it on its way out first: either way the next
        # run leaves none
        assert _scratch_databases(server) in ([run_dir.name], [])
    env = {**os.environ, "TMPDIR": str(tmp)}
    res = subprocess.run([RERUN_SAFETY, "lint", "--project-dir", str(project), "--profiles-dir", str(profiles),
                          "--select", "stg_orders"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.strip() == ""
    assert _left_in(tmp, killed=True) == []
    if engine == "postgres":
        assert _scratch_databases(server) == []


def test_game_day_profile_reader_names_file_and_line_without_the_secret(tmp_path):
    """project.load_target_output (the game day's reader) on the same broken profile."""
    from rerun_safety.errors import ConfigError
    from rerun_safety.project import load_target_output

    project = tmp_path / "p"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: p\nprofile: newshop\n")
    (tmp_path / "profiles.yml").write_text("newshop:\n  target: dev\n  outputs:\n    dev:\n      type: postgres\n"
                                           f"      password: {PASSWORD}\n      host: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_target_output(project, tmp_path, None, {})
    assert str(err.value).startswith(f"{tmp_path / 'profiles.yml'} is not valid YAML at line ")
    assert PASSWORD not in str(err.value) and "\n" not in str(err.value)


# A confined game day or lint runs in a child process, which this test's patches do not reach: --unconfined
# runs it here, under the same stop-signal handlers that the confined child installs (cli._gameday_child,
# cli._lint_child).
_IN_THIS_PROCESS = {"lint": ["--unconfined"], "gameday": ["--unconfined"]}


@pytest.mark.parametrize("command, line", [
    ("lint", "rerun-safety: lint interrupted by SIGINT; scratch catalog removed"),
    ("gameday", "rerun-safety: interrupted by SIGINT; sandboxes removed"),
])
def test_ctrl_c_that_a_library_turned_into_another_error_still_exits_130(command, line, monkeypatch, tmp_path):
    """Ctrl-C while a C extension is being imported surfaces as ImportError (DuckDB's module init
    says "Encountered an error while initializing the extension"): still the interrupt, not exit 2."""
    def interrupted_import(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises KeyboardInterrupt here
        except KeyboardInterrupt:
            raise ImportError("Encountered an error while initializing the extension.") from None
        raise AssertionError("no SIGINT arrived")

    import rerun_safety.gameday
    import rerun_safety.lint

    monkeypatch.setattr(rerun_safety.lint, "run_lint", interrupted_import)
    monkeypatch.setattr(rerun_safety.gameday, "run_gameday", interrupted_import)
    args = [command, "--project-dir", str(tmp_path), *_IN_THIS_PROCESS[command]]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 130, res.output
    assert [ln for ln in res.output.splitlines() if ln.strip()] == [line]
    # without a stop signal the same error is a crash: exit 2, one line naming it
    monkeypatch.setattr(rerun_safety.lint, "run_lint", lambda **kw: (_ for _ in ()).throw(ImportError("boom")))
    monkeypatch.setattr(rerun_safety.gameday, "run_gameday", lambda *a, **kw: (_ for _ in ()).throw(ImportError("boom")))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and "ImportError: boom" in res.output and "interrupted" not in res.output


@pytest.mark.parametrize("command, line", [
    ("lint", "rerun-safety: lint interrupted by SIGINT; scratch catalog removed"),
    ("gameday", "rerun-safety: interrupted by SIGINT; sandboxes removed"),
])
def test_ctrl_c_inside_a_finalizer_is_not_lost(command, line, monkeypatch, tmp_path):
    """An exception raised inside `__del__` is printed and dropped by Python: a Ctrl-C landing in a
    finalizer (dbt's pools have them) is delivered again once it returns, and said in one line."""
    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)  # the signal arrives in here

    interrupted = []

    def run(*args, **kwargs):
        Finalized()  # collected at once: its __del__ runs
        try:
            time.sleep(5)  # the re-delivered signal interrupts this
        except KeyboardInterrupt:
            interrupted.append(True)
            raise
        raise AssertionError("the interrupt was lost")

    import rerun_safety.gameday
    import rerun_safety.lint

    monkeypatch.setattr(rerun_safety.lint, "run_lint", run)
    monkeypatch.setattr(rerun_safety.gameday, "run_gameday", run)
    res = CliRunner().invoke(main, [command, "--project-dir", str(tmp_path), *_IN_THIS_PROCESS[command]])
    assert interrupted == [True]
    assert res.exit_code == 130, res.output
    assert [ln for ln in res.output.splitlines() if ln.strip()] == [line]
