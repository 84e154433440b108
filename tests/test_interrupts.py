"""Interrupted runs clean up: SIGINT and SIGTERM at any phase remove every sandbox at once (one line, exit
130/143), SIGKILL leaves what the next run sweeps, a killed command lets its confined game day clean up, two
runs side by side never see each other, and Ctrl-C during a diff is one line. Real signals, real dbt."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from support.gameday import load_report
from support.reliability import (CHEAP, ROLE_ARGS, SMALL, alive, children, databases_of, in_sessions, kill, leftover_databases,
                                 leftover_folders, next_run_sweep, phase, role_target, spawn_gameday, wait_until)


PHASES = ("start", "snapshot", "reference", "scenario")


def _interrupt(target, tmp, sig, at_phase, *args, group: bool = False):
    before = target.fingerprint()
    proc = spawn_gameday(target, tmp, *CHEAP, *args)
    # at this phase, or (on a slow machine that skipped past a short phase) a later one
    reached = wait_until(lambda: PHASES.index(phase(tmp, target.server)) >= PHASES.index(at_phase), 240, proc,
                         step=0.01)
    workers = children(proc.pid)
    sessions = set()
    for pid in workers:
        try:
            sessions.add(os.getsid(pid))
        except ProcessLookupError:
            pass
    assert reached, proc.communicate()[1]
    kill(proc, sig, group=group)
    started = time.time()
    _, err = proc.communicate(timeout=120)
    return {"code": proc.returncode, "err": err, "exit_s": time.time() - started, "workers": workers,
            "before": before, "sessions": sessions - {os.getsid(proc.pid) if proc.poll() is None else -1, os.getsid(0)}}




@pytest.mark.parametrize("sig,threads,at_phase,code,name", [(signal.SIGTERM, "2", "scenario", 143, "SIGTERM"),
                                                              (signal.SIGINT, "1", "reference", 130, "SIGINT"),
                                                              (signal.SIGHUP, "1", "reference", 129, "SIGHUP")])
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
    # workers die with their parent, so nothing creates sandboxes after the sweep (a worker being started
    # at the kill is in the confined child's session)
    assert wait_until(lambda: not any(alive(p) for p in r["workers"] + in_sessions(r["sessions"])), 30)
    before = len(leftover_folders(tmp_path)) + len(leftover_databases(target.server))
    assert before >= 1  # killed mid-run: its sandboxes are still there
    # (a process SIGKILLed between fork and exec may hold the run's lock a moment longer: the next run's
    # sweep skips a locked folder, and the one after it takes it)
    assert wait_until(lambda: next_run_sweep(target, tmp_path) >= 0 and leftover_folders(tmp_path) == [], 10)
    assert leftover_databases(target.server) == []


def test_sigkill_of_the_command_alone_lets_the_confined_game_day_clean_up(duck, tmp_path):
    """The command's process killed -9 (its confined game day and workers live on): the game day sees its
    command gone, ends as on SIGTERM and removes its sandboxes; nothing is left for a sweep."""
    r = _interrupt(duck, tmp_path, signal.SIGKILL, "scenario", "--threads", "2", *SMALL)
    assert r["code"] == -signal.SIGKILL
    assert len(r["workers"]) >= 3, r["workers"]  # the fork server, the game day, its workers
    assert wait_until(lambda: not any(alive(p) for p in r["workers"]), 60)  # the server too: its command is gone
    assert wait_until(lambda: leftover_folders(tmp_path) == [], 30), leftover_folders(tmp_path)
    assert duck.fingerprint() == r["before"]


# Verdicts of a game day of the payments fixture alone with CHEAP settings (see test_side_by_side).
CHEAP_VERDICTS = {"breaks_when_incremental": "error", "payments_appended": "duplicates",
                  "balance_by_account": "drift", "ledger_daily": "safe", "payments_audited": "safe",
                  "payments_current": "safe", "payments_merged": "safe"}


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


def test_interrupt_never_claims_removed_while_a_sandbox_stays(vacuum_server, tmp_path):
    """A session the role may not end (a superuser's) holds a sandbox open during Ctrl-C: the run says
    which sandbox stayed instead of "sandboxes removed", and the next run removes it."""
    from support import reliability as support


    role, target = role_target(vacuum_server, tmp_path / "proj")
    proc = spawn_gameday(target, tmp_path / "run", *ROLE_ARGS)
    assert wait_until(lambda: any(n.endswith("_reference") for n in databases_of(vacuum_server, role)), 240, proc)
    held = next(n for n in databases_of(vacuum_server, role) if n.endswith("_reference"))
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
    assert held in databases_of(vacuum_server, role)
    support.next_run_sweep(target, tmp_path / "run")
    assert databases_of(vacuum_server, role) == [] and leftover_folders(tmp_path / "run") == []


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


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _started(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def test_a_sigterm_to_make_test_leaves_no_session_no_game_day_and_no_jvm(tmp_path):
    """`make test` (tests/_shards.py) stopped by a CI timeout's SIGTERM while its second session runs a
    confined Spark game day (a JVM below the fork server's job) and its first has ended: it exits 143 and,
    within a minute, no process it started is left (the sessions, the command, the fork server, the job, the
    JVM)."""
    import subprocess
    import sys

    from support.spark import require_spark

    require_spark()
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "tests/_shards.py", "-q", "-k",
                             "test_a_confined_session_game_day_runs_on_its_own_catalog"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})

    def jvm() -> bool:  # the game day's: a JVM below the fork server (the fixture's own Spark comes first)
        servers = [p for p in children(proc.pid) if "rerun_safety.confine.child --serve" in _cmdline(p)]
        return any(_cmdline(p).split(" ")[0].endswith("java") for s in servers for p in children(s))

    try:
        assert wait_until(jvm, 240), "no JVM started below the game day's fork server"
        below = {pid: _started(pid) for pid in children(proc.pid)}
        kinds = " ".join(_cmdline(p) for p in below)
        # the second session (the first matched nothing and ended), the command, its fork server, the job, the JVM
        assert len(below) >= 5 and "pytest" in kinds and "--serve" in kinds and "java" in kinds, kinds
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=120) == 143
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    left = lambda: [p for p, t in below.items() if t is not None and _started(p) == t and alive(p)]  # noqa: E731
    assert wait_until(lambda: not left(), 60), left()
