"""Confinement by privilege (python_runner/rerun_safety/confine/): the game day runs the project's code in a
process that the kernel (Linux Landlock) lets write only beneath the runner's work root. Hostile hooks and a
Python model try to write the user's files; with the statement guard switched off (the second line), the
kernel alone keeps every file byte-identical, and the verdict names what was refused."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import duckdb
import pytest

from support.gameday import hostile_project, run_cli, sha256_of
from support.reliability import payments_target

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux's")


def _gameday(p: dict, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["gameday", "--project-dir", str(p["project"]), "--profiles-dir", str(p["project"]),
                    "--output-dir", str(out), "--steps", "2", "--threads", "1", *extra])


def _unchanged(p: dict) -> None:
    assert {str(f): sha256_of(f) for f in p["files"]} == p["before"]
    assert sorted(x.name for x in p["landing"].iterdir()) == p["listing"]


@pytest.fixture(scope="module")
def hostile_unguarded(tmp_path_factory):
    """The game day with the statement guard switched off: only the kernel stands between the hooks and
    the user's files."""
    tmp = tmp_path_factory.mktemp("hostile")
    p = hostile_project(tmp)
    os.environ["RERUN_SAFETY_STATEMENT_GUARD"] = "off"
    try:
        code, out, err = _gameday(p, tmp / "out")
    finally:
        del os.environ["RERUN_SAFETY_STATEMENT_GUARD"]
    return {**p, "code": code, "stdout": out, "stderr": err,
            "report": json.loads((tmp / "out" / "report.json").read_text())}


def test_without_the_statement_guard_the_kernel_keeps_every_user_file(hostile_unguarded):
    p = hostile_unguarded
    assert p["code"] == 1, p["stderr"]
    _unchanged(p)
    models = {m["name"]: m for m in p["report"]["models"]}
    assert {n: m["verdict"] for n, m in models.items()} == {"events_exported": "side_effect",
                                                           "events_to_csv": "side_effect"}
    exported = models["events_exported"]["reason"]
    assert exported.startswith("writes a file outside the sandbox (refused there by the kernel): ")
    assert str(p["user"] / "exports") in exported and "hook: copy (select * from {{ this }})" in exported
    py = models["events_to_csv"]["reason"]
    assert py == (f"writes a file outside the sandbox (refused there by the kernel): "
                  f"{p['user'] / 'exports' / 'from_python.csv'}; the model's own code")
    confinement = p["report"]["confinement"]
    assert confinement["confined"] is True and len(confinement["writable"]) == 1
    assert p["report"]["summary"]["notes"][-1].startswith("confined by the kernel (Linux Landlock ABI ")


def test_with_the_guard_the_verdicts_are_the_same_and_unconfined_says_so_first(hostile_unguarded, tmp_path):
    p = hostile_project(tmp_path)
    code, out, err = _gameday(p, tmp_path / "out", "--unconfined", "--scenarios", "rerun")
    assert code == 1, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    # the statement guard (DuckDB's own file settings) refused the hooks' files; the Python model's file is
    # beyond any statement guard: unconfined, it was written, which is what the kernel's confinement stops
    py_export = str(p["user"] / "exports" / "from_python.csv")
    assert {f: h for f, h in p["before"].items() if f != py_export} == {
        str(f): sha256_of(f) for f in p["files"] if str(f) != py_export}
    assert sorted(x.name for x in p["landing"].iterdir()) == p["listing"]
    assert sha256_of(Path(py_export)) != p["before"][py_export]
    verdicts = {m["name"]: m["verdict"] for m in report["models"]}
    assert verdicts["events_exported"] == "side_effect", verdicts
    notes = report["summary"]["notes"]
    assert notes[0].startswith("UNCONFINED (--unconfined): the project's code ran with this user's full rights")
    assert report["confinement"] == {"confined": False, "writable": []}
    assert out.lstrip().startswith("UNCONFINED (--unconfined)")
    assert "UNCONFINED (--unconfined)" in (tmp_path / "out" / "report.md").read_text()
    assert "UNCONFINED (--unconfined)" in (tmp_path / "out" / "report.html").read_text()


def test_a_kernel_without_landlock_is_refused_in_one_line(tmp_path, monkeypatch):
    from rerun_safety.confine import landlock

    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    p = hostile_project(tmp_path)
    code, out, err = _gameday(p, tmp_path / "out")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rerun-safety: error: cannot confine the project's code: this "
                                                   "Linux kernel does not offer Landlock"), err
    assert lines[0].endswith("pass --unconfined to run without that protection (the reports will say so)")
    assert not (tmp_path / "out").exists()
    _unchanged(p)


_PROBE = """
import os, subprocess, sys
from pathlib import Path
from rerun_safety.confine.landlock import restrict_writes
inside, outside = Path(sys.argv[1]), Path(sys.argv[2])
abi = restrict_writes([inside])
(inside / "ok.txt").write_text("ok")
results = [abi]
for action in (lambda: outside.write_text("x"), lambda: os.truncate(outside, 0), lambda: outside.unlink(),
               lambda: (outside.parent / "new.txt").write_text("x"), lambda: os.rename(inside / "ok.txt", outside)):
    try:
        action()
        results.append("allowed")
    except PermissionError as err:
        results.append(err.errno)
shell = subprocess.run(["sh", "-c", f"echo x > {outside}"], capture_output=True, text=True)
results.append(shell.returncode)
results.append(outside.read_text())
print(results)
"""


def test_the_kernel_refuses_writes_outside_for_the_process_and_its_children(tmp_path):
    inside, outside = tmp_path / "run", tmp_path / "user" / "export.csv"
    inside.mkdir()
    outside.parent.mkdir()
    outside.write_text("kept\n")
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(inside), str(outside)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    abi, *refused, shell, text = eval(proc.stdout.strip())  # noqa: S307 - our own probe's list
    assert abi >= 1
    assert refused == [13, 13, 13, 13, 13]  # write, truncate, remove, create, rename over: EACCES each
    assert shell == 2 and text == "kept\n"  # a shell the process starts is refused too
    assert (inside / "ok.txt").read_text() == "ok"
    assert sorted(p.name for p in outside.parent.iterdir()) == ["export.csv"]


_WARM_PROBE = """
import os
from rerun_safety.confine import warm
print([warm.WARMED, len(os.listdir('/proc/self/task'))])
"""


def test_the_warm_up_parses_every_installed_adapter_and_starts_no_thread():
    """The confined child (before its job) parses a one-model project per adapter (a child's parse then
    costs a tenth). The warm-up fails silently by design (a child warms up itself), so this test is what
    sees it fail: it must warm DuckDB and PostgreSQL, and leave the process with one thread (Landlock and
    seccomp confine the calling thread and what it starts: a thread started before would stay unconfined)."""
    proc = subprocess.run([sys.executable, "-c", _WARM_PROBE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    warmed, threads = eval(proc.stdout.strip())  # noqa: S307 - our own probe's list
    assert warmed == ["duckdb", "postgres"]
    assert threads == 1


_STOP_PROBE = """
import os
from rerun_safety import confine
confine.prestart()
child = confine._SERVERS[0].proc
print(os.getsid(child.pid) == child.pid, os.getsid(child.pid) != os.getsid(0))
"""


def test_the_prestarted_server_is_exec_d_in_a_session_of_its_own_and_ends_with_the_command():
    """prestart() exec's the confined fork server at once (its imports overlap the command's own): a
    session of its own (no terminal reaches it), and a command that ends without giving it a job leaves
    nothing running (it ends when the command's end of its socket closes)."""
    proc = subprocess.run([sys.executable, "-c", _STOP_PROBE + "print(child.pid)"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    own_session, other_session, pid = proc.stdout.split()
    assert (own_session, other_session) == ("True", "True")
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


_JOB_PROBE_MODULE = """
import errno, os, socket, stat
from pathlib import Path


def describe(tag, other, port=None, confinement=None, progress=None):
    def attempt(fn):
        try:
            fn()
            return "allowed"
        except OSError as err:
            return err.errno

    fds = [int(n) for n in os.listdir("/proc/self/fd")]
    sockets = sum(1 for fd in fds if _is_socket(fd))
    shm = sorted(os.listdir("/dev/shm"))
    Path("/dev/shm", "job_" + tag).write_text("x")
    return {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "sockets": sockets, "shm": shm,
            "parent_fds": sorted({attempt(lambda: os.close(os.open(f"/proc/{os.getppid()}/fd/{n}", os.O_RDONLY)))
                                  for n in os.listdir(f"/proc/{os.getppid()}/fd")}),
            "parent_mem": attempt(lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1)),
            "other": attempt(lambda: Path(other, "planted_" + tag).write_text("x")),
            "udp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
            "udp6": attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()),
            "tcp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
            "host_port": attempt(lambda: socket.create_connection(("127.0.0.1", port), 2).close()) if port else None,
            "own_port": attempt(_own_port) if port else None}


def _own_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        socket.create_connection(server.getsockname(), 2).close()


def _is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
"""

_JOBS_SCRIPT = """
import json, os, sys
from rerun_safety import confine
import job_probe
work, other, elsewhere = sys.argv[1:4]
rules = confine.Rules((work,), (), False, False)
out = [confine.run_confined(job_probe.describe, (tag, other), rules, dict(os.environ))[0] for tag in "ab"]
out.append(confine.run_confined(job_probe.describe, ("c", other), confine.Rules((elsewhere,), (), False, False),
                                dict(os.environ))[0])
for tag, udp in (("d", False), ("e", True)):  # a warehouse's TCP port kept; UDP only where a name is resolved
    value, how = confine.run_confined(job_probe.describe, (tag, other), confine.Rules((work,), (5432,), True, False,
                                                                                     udp), dict(os.environ))
    out.append({**value, "open": list(how.open)})
import socket
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
value, how = confine.run_confined(job_probe.describe, ("f", other, listener.getsockname()[1]),  # a Spark session's
                                  confine.Rules((work,), None, False, False, loopback=True), dict(os.environ))
out.append({**value, "open": list(how.open)})
print(json.dumps({"jobs": out, "servers": [[s.proc.pid, list(s.roots)] for s in confine._SERVERS]}))
"""


def test_jobs_fork_from_one_confined_server_each_in_a_session_and_namespace_of_its_own(tmp_path):
    """The fork server (exec'd once, confined before it forks) forks one process per job: each in a session
    of its own, with no socket (the server's end is closed before the job is read), unable to open the
    server's descriptors or read its memory (Landlock's ptrace rule: the server is outside its domain), with a
    /dev/shm of its own, and unable to write beneath the server's roots outside its own folder. A job
    whose folder lies outside the server's roots gets a server of its own. UDP is refused where the rules say
    the command resolved the warehouse's name; a loopback of its own reaches none of the machine's ports."""
    tmp, work, other, elsewhere = (tmp_path / n for n in ("tmp", "tmp/work", "tmp/other", "elsewhere"))
    for folder in (work, other, elsewhere):
        folder.mkdir(parents=True)
    (tmp_path / "job_probe.py").write_text(_JOB_PROBE_MODULE)
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", _JOBS_SCRIPT, str(work), str(other), str(elsewhere)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    a, b, c, d, e, f = facts["jobs"]
    servers = {roots[0]: pid for pid, roots in facts["servers"]}
    assert servers == {str(elsewhere): c["ppid"], str(tmp.resolve()): a["ppid"]}
    assert a["ppid"] == b["ppid"] != c["ppid"] and len({a["pid"], b["pid"], c["pid"]}) == 3
    for job in (a, b, c):
        assert job["sid"] == job["pid"]
        assert job["sockets"] == 0
        assert (job["parent_fds"], job["parent_mem"]) == ([errno.EACCES], errno.EACCES)
        assert job["other"] in (errno.EACCES, errno.EROFS)
    assert (a["shm"], b["shm"]) == ([], [])  # the first job's file is not in the second's /dev/shm
    # seccomp: no IPv4/IPv6 datagram socket where the command resolved the warehouse's name; TCP kept
    assert (d["udp"], d["udp6"], d["tcp"]) == (errno.EACCES, errno.EACCES, "allowed")
    assert (e["udp"], e["udp6"], e["tcp"]) == ("allowed", "allowed", "allowed")
    assert "UDP" not in d["open"] and "UDP" in e["open"]
    # a loopback of its own (a Spark session's JVM and gateway): its own ports, never the machine's
    assert (f["own_port"], f["host_port"], f["open"]) == ("allowed", errno.ECONNREFUSED, [])
    assert not list(other.iterdir())


def test_the_warm_up_keeps_its_parse_state_in_the_cache_folder_out_of_the_work_root(tmp_path):
    """The warm-up's project and dbt's partial-parse state of it are kept in $XDG_CACHE_HOME/rerun_safety
    (0700): the next fork server's parse reuses the state (dbt leaves it byte-identical; a parse in full
    writes another), a damaged state is parsed over and replaced, and a cache folder inside the work root
    (which the confined children may write) is not used at all."""
    def warm(cache: Path, tmpdir: Path) -> list:
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "TMPDIR": str(tmpdir)}
        proc = subprocess.run([sys.executable, "-c", _WARM_PROBE], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        return eval(proc.stdout.strip())  # noqa: S307 - our own probe's list

    cache, tmpdir = tmp_path / "cache", tmp_path / "tmp"
    tmpdir.mkdir()
    assert warm(cache, tmpdir) == [["duckdb", "postgres"], 1]
    root = cache / "rerun_safety"
    assert oct(root.stat().st_mode & 0o777) == "0o700"
    states = sorted(root.glob("warm_*/target/partial_parse.msgpack"))
    assert [p.parts[-3].split("_")[1] for p in states] == ["duckdb", "postgres"]
    first = {p: p.read_bytes() for p in states}
    assert warm(cache, tmpdir) == [["duckdb", "postgres"], 1]
    assert {p: p.read_bytes() for p in states} == first  # reused as it was
    states[0].write_bytes(b"not a parse state")
    assert warm(cache, tmpdir) == [["duckdb", "postgres"], 1]
    assert states[0].read_bytes() not in (b"not a parse state", first[states[0]])  # parsed over, replaced
    assert not list(tmpdir.iterdir())  # its temporary folders removed
    # the work root is $TMPDIR/rerun_safety-<uid>: a cache folder there is left alone
    inside = tmpdir / f"rerun_safety-{os.getuid()}"
    assert warm(inside, tmpdir) == [["duckdb", "postgres"], 1]
    assert not (inside / "rerun_safety").exists()



# ------------------------------------------------------------------ PostgreSQL: the run's own role

def _pg_hostile_models(models: Path, export: Path, prod: str) -> dict[str, str]:
    """One model per hostile hook (a failing hook stops the ones after it), each over payments_merged."""
    quoted = prod.replace("'", "''")
    hooks = {
        "copy_e_string": f"copy (select 1) to E'{export}'",
        "copy_dollar": f"copy (select 2) to $f${export}$f$",
        "copy_in_do": f"do $d$ begin execute format('copy (select 3) to %L', '{export}'); end $d$",
        "copy_program": "do $d$ begin execute 'copy (select 4) to program ''touch /tmp/rerun_safety_pwned'''; end $d$",
        "alter_prod": f"do $d$ begin execute format('alter database %I set work_mem = %L', '{quoted}', '1MB'); end $d$",
        "comment_prod": f"do $d$ begin execute format('comment on database %I is %L', '{quoted}', 'x'); end $d$",
        "alter_role": "do $d$ begin execute format('alter role %I set work_mem = %L', session_user, '2MB'); "
                      "execute format('alter role %I set work_mem = %L', 'postgres', '2MB'); end $d$",
        "kill_prod": f"select pg_terminate_backend(pid) from pg_stat_activity where datname = '{quoted}'",
        "dblink": "create extension if not exists dblink",
    }
    for name, hook in hooks.items():
        (models / f"hostile_{name}.sql").write_text(
            "{{ config(materialized='table', post_hook=" + json.dumps(hook) + ") }}\n"
            "select account_id from {{ ref('payments_merged') }}\n")
    return hooks


def test_postgres_hostile_hooks_change_nothing_as_the_runs_own_role(tmp_path, pg_server):
    """The profile's role is a superuser, the statement guard is off: the database still refuses the run's
    role every server file, program, other database, role and session; production is unchanged and each
    model is side_effect naming the refusal. The role is gone afterwards."""
    from support.gameday import file_sha256, load_report, pg_fingerprint
    from support.reliability import CHEAP, payments_target, spawn_gameday

    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    export = Path(pg_server.base) / f"export_{os.getpid()}.csv"
    export.write_text("the server's export\n")
    export.chmod(0o666)
    before_file = file_sha256(export)
    hooks = _pg_hostile_models(target.project / "models", export, target.dbname)
    live = pg_server.connect(target.dbname)  # a live session on production: nobody may end it
    settings_sql = ("select coalesce(shobj_description(d.oid, 'pg_database'), ''), "
                    "coalesce((select array_agg(s.setconfig::text order by s.setrole) from pg_db_role_setting s "
                    "where s.setdatabase = d.oid or s.setdatabase = 0), '{}') from pg_database d where d.datname = %s")
    with live.cursor() as cur:
        cur.execute(settings_sql, [target.dbname])
        before_settings = cur.fetchone()
    before = pg_fingerprint(pg_server, target.dbname)
    roles_sql = "select coalesce(array_agg(rolname order by rolname), '{}') from pg_roles where rolname like 'rerun\\_safety\\_role\\_%'"
    with live.cursor() as cur:
        cur.execute(roles_sql)
        roles_before = set(cur.fetchone()[0])
    os.environ["RERUN_SAFETY_STATEMENT_GUARD"] = "off"
    try:
        proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged+")
    finally:
        del os.environ["RERUN_SAFETY_STATEMENT_GUARD"]
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    with live.cursor() as cur:  # still alive, and production's settings and comment as they were
        cur.execute(settings_sql, [target.dbname])
        assert cur.fetchone() == before_settings
        cur.execute(roles_sql)
        assert set(cur.fetchone()[0]) <= roles_before  # the run's role was dropped at its end
        cur.execute("select count(*) from pg_extension where extname = 'dblink'")
        assert cur.fetchone()[0] == 0
    live.close()
    assert pg_fingerprint(pg_server, target.dbname) == before
    assert file_sha256(export) == before_file
    assert not Path("/tmp/rerun_safety_pwned").exists()
    report = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    for name, hook in hooks.items():
        m = report[f"hostile_{name}"]
        assert m["verdict"] == "side_effect", (name, m)
        assert m["reason"].startswith("a hook does what the game day's database role may not (refused there by "
                                      "the database): "), (name, m["reason"])
        assert m["reason"].endswith(f"; hook: {hook}"), (name, m["reason"])
    assert report["payments_merged"]["verdict"] == "safe"


def test_postgres_sandboxes_inherit_nothing_a_dba_put_into_template1(tmp_path, pg_server):
    """dblink in template1 (and in production) with the guard off: the sandboxes are made from template0
    and get the production database's extensions again as their own role, which may create pgcrypto (a
    model using digest() is safe) but not dblink, so a hook's dblink_exec into production fails in the
    sandbox, production gets nothing, and the notes name the extension left out."""
    from support.gameday import load_report
    from support.reliability import CHEAP, payments_target, spawn_gameday

    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    admin, prod = pg_server.connect("template1"), pg_server.connect(target.dbname)
    for con in (admin, prod):
        con.autocommit = True
        with con.cursor() as cur:
            cur.execute("create extension if not exists dblink")
    with prod.cursor() as cur:
        cur.execute("create extension if not exists pgcrypto")
    models = target.project / "models"
    (models / "uses_pgcrypto.sql").write_text(
        "{{ config(materialized='table') }}\nselect account_id, encode(digest(account_id::text, 'sha256'), 'hex') "
        "as h from {{ ref('payments_merged') }}\n")
    dsn = f"host={pg_server.host} port={pg_server.port} user={pg_server.user} dbname={target.dbname}"
    hook = f"select dblink_exec('{dsn}', 'create table public.pwned_by_dblink (x int)')"
    (models / "hostile_dblink.sql").write_text(
        "{{ config(materialized='table', post_hook=" + json.dumps(hook) + ") }}\n"
        "select account_id from {{ ref('payments_merged') }}\n")
    os.environ["RERUN_SAFETY_STATEMENT_GUARD"] = "off"
    try:
        proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged+")
        _, err = proc.communicate(timeout=600)
    finally:
        del os.environ["RERUN_SAFETY_STATEMENT_GUARD"]
        with admin.cursor() as cur:
            cur.execute("drop extension if exists dblink")
        admin.close()
    with prod.cursor() as cur:
        cur.execute("select count(*) from pg_tables where tablename = 'pwned_by_dblink'")
        assert cur.fetchone()[0] == 0
    prod.close()
    assert proc.returncode == 1, err
    report = load_report(proc.out_dir)
    models = {m["name"]: m for m in report["models"]}
    assert models["uses_pgcrypto"]["verdict"] == "safe"
    assert models["hostile_dblink"]["verdict"] != "safe"
    assert "dblink_exec" in json.dumps(models["hostile_dblink"]) and "does not exist" in json.dumps(
        models["hostile_dblink"])
    assert any(n.startswith("extensions of the target database not in the sandboxes") and "dblink" in n
               for n in report["summary"]["notes"]), report["summary"]["notes"]


def test_postgres_a_hook_that_fills_the_disk_is_stopped_at_the_sandbox_budget(tmp_path, pg_server):
    """A hook writes ~400 MB into its sandbox (the guard off): at --max-sandbox-size 40MB the watchdog ends
    the run's sessions, the game day stops in one line naming the sandbox and its size (exit 2), and the
    server, production, and the cluster (no sandbox, no role left) are as they were. Without the hook the
    run's notes say the budget and the free space it watched (the test's role is a superuser)."""
    from support.gameday import load_report, pg_fingerprint
    from support.reliability import CHEAP, payments_target, spawn_gameday

    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    models = target.project / "models"
    # ~450 MB of rows (two small series joined: nothing spills to a temporary file)
    hook = ("create table {{ this.schema }}.filler as select a, b, repeat(md5((a * b)::text), 4) as pad "
            "from generate_series(1, 3000) a, generate_series(1, 1000) b")
    (models / "fills_the_disk.sql").write_text(
        "{{ config(materialized='table', post_hook=" + json.dumps(hook) + ") }}\n"
        "select account_id from {{ ref('payments_merged') }}\n")
    before = pg_fingerprint(pg_server, target.dbname)
    os.environ["RERUN_SAFETY_STATEMENT_GUARD"] = "off"
    try:
        started = time.monotonic()
        proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged+",
                             "--max-sandbox-size", "40MB")
        _, err = proc.communicate(timeout=600)
        took = time.monotonic() - started
    finally:
        del os.environ["RERUN_SAFETY_STATEMENT_GUARD"]
    assert proc.returncode == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("rerun-safety: error:")]
    assert len(lines) == 1 and "past --max-sandbox-size 40.0 MB" in lines[0], err
    assert "the sandbox database rerun_safety_" in lines[0], lines[0]
    size = float(lines[0].split(" grew to ")[1].split(" MB")[0])
    assert 40.0 < size < 300.0, lines[0]  # stopped well before the hook's ~400 MB
    assert not (proc.out_dir / "report.json").exists()
    assert pg_fingerprint(pg_server, target.dbname) == before
    con = pg_server.connect("postgres")  # the server is up
    with con.cursor() as cur:
        cur.execute("select count(*) from pg_database where datname like 'rerun\\_safety\\_%'")
        assert cur.fetchone()[0] == 0
        cur.execute("select count(*) from pg_roles where rolname like 'rerun\\_safety\\_role\\_%'")
        assert cur.fetchone()[0] == 0
    con.close()
    assert took < 300, took
    (models / "fills_the_disk.sql").unlink()
    proc = spawn_gameday(target, tmp_path / "run2", *CHEAP, "--select", "payments_merged")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    notes = [n for n in load_report(proc.out_dir)["summary"]["notes"] if n.startswith("disk budget:")]
    assert notes == ["disk budget: each sandbox at most 10.0 GB (--max-sandbox-size), all of them together at most "
                     "the server's free space less a margin (10 %, at least 1 GB)"], notes


def test_postgres_profile_role_without_createrole_is_told_what_to_grant(tmp_path, pg_server):
    from support.common import create_role
    from support.reliability import CHEAP, payments_target, spawn_gameday

    role = create_role(pg_server, attributes="login createdb")
    target = payments_target("postgres", tmp_path / "proj", server=pg_server, role=role)
    proc = spawn_gameday(target, tmp_path / "run", *CHEAP)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("rerun-safety: game day")]
    assert lines == [f"rerun-safety: error: the profile's PostgreSQL role {role} cannot create roles: a confined game "
                     "day reaches its sandboxes as a role of its own, which it creates and drops; grant it with "
                     f"ALTER ROLE {role} CREATEROLE, or have a DBA create a game-day role once (`rerun-safety init "
                     "--postgres-role NAME` prints the SQL) and set RERUN_SAFETY_PG_GAMEDAY_ROLE, or pass --unconfined "
                     "to run without that protection"], err
    assert not proc.out_dir.exists()


def test_postgres_a_game_day_role_a_dba_created_once_serves_a_profile_role_without_createrole(tmp_path, pg_server):
    """The way in for a team without CREATEROLE: a DBA runs what `init --postgres-role` prints (the profile's
    role filled in from the project's profile), the team names the role and its password in the environment;
    the game day's sandboxes are then the role's, the run is safe, nothing of it stays, the role does (it is
    the team's), its password reaches no report. A role that could do more (CREATEDB) is refused in one line."""
    from support.common import create_role
    from support.gameday import load_report
    from support.reliability import CHEAP, payments_target, spawn_gameday

    role = create_role(pg_server, attributes="login createdb")
    target = payments_target("postgres", tmp_path / "proj", server=pg_server, role=role)
    name, password = f"gameday_{uuid.uuid4().hex[:6]}", "pw-" + uuid.uuid4().hex
    cli = str(Path(sys.executable).with_name("rerun-safety"))
    before = sorted(p.relative_to(target.project) for p in target.project.rglob("*"))
    printed = subprocess.run([cli, "init", "--postgres-role", name, "--project-dir", str(target.project),
                              "--profiles-dir", str(target.profiles)], capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert f"GRANT {name} TO {role};" in printed.stdout and "PASSWORD 'choose-a-password'" in printed.stdout
    assert sorted(p.relative_to(target.project) for p in target.project.rglob("*")) == before  # nothing written
    admin = pg_server.connect()
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(printed.stdout.replace("choose-a-password", password))
    env = {"RERUN_SAFETY_PG_GAMEDAY_ROLE": name, "RERUN_SAFETY_PG_GAMEDAY_PASSWORD": password}
    os.environ.update(env)
    try:
        proc = spawn_gameday(target, tmp_path / "run", *CHEAP, "--select", "payments_merged")
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        report = load_report(proc.out_dir)
        verdicts = {m["name"]: m["verdict"] for m in report["models"]}
        assert verdicts["payments_merged"] == "safe" and set(verdicts.values()) == {"safe"}, verdicts
        written = "".join(p.read_text(errors="replace") for p in proc.out_dir.iterdir() if p.is_file())
        assert password not in written + err
        with admin.cursor() as cur:
            cur.execute("select count(*) from pg_roles where rolname = %s", [name])
            assert cur.fetchone()[0] == 1  # the team's role stays
            cur.execute("select count(*) from pg_database where datname like 'rerun\\_safety\\_%'")
            assert cur.fetchone()[0] == 0
            cur.execute(f'alter role "{name}" createdb')
        proc = spawn_gameday(target, tmp_path / "run2", *CHEAP, "--select", "payments_merged")
        _, err = proc.communicate(timeout=300)
    finally:
        for key in env:
            os.environ.pop(key, None)
    assert proc.returncode == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("rerun-safety: error:")]
    assert lines == [f"rerun-safety: error: refusing the game-day role {name}: it is CREATEDB, so the project's SQL "
                     f"could do more than its sandboxes need; create it as `rerun-safety init --postgres-role {name}` "
                     "prints"], err
    admin.close()


# ------------------------------------------------------------------ secrets: every value through the environment

def test_no_value_of_the_users_profile_reaches_a_file_whatever_its_key(tmp_path):
    """A secret under a key that does not say so (a plugin's `opaque`) and in the path of an attached
    database: no file the game day writes holds it, while it runs or after."""
    import threading
    import uuid

    import yaml

    from support.reliability import CHEAP, files_with, payments_target, spawn_gameday

    secret = f"opaque-{uuid.uuid4().hex}"
    target = payments_target("duckdb", tmp_path / "proj")
    attached = tmp_path / f"vault_{secret}" / "refdata.duckdb"
    attached.parent.mkdir()
    duckdb.connect(str(attached)).close()
    path = target.profiles / "profiles.yml"
    doc = yaml.safe_load(path.read_text())
    output = doc["payments"]["outputs"]["local"]
    output["plugins"] = [{"module": "rerun_safety.warehouse.duckdb.confine", "alias": "user_plugin",
                          "config": {"opaque": secret}}]
    output["attach"] = [{"path": str(attached), "alias": "refdata"}]
    path.write_text(yaml.safe_dump(doc))
    run, out = tmp_path / "run", tmp_path / "out"
    roots = [run, target.project, out]
    seen: list[str] = []
    profiles_seen: set[str] = set()
    stop = threading.Event()

    def scan() -> None:
        while not stop.is_set():
            seen.extend(files_with(secret.encode(), roots))
            try:
                profiles_seen.update(str(p) for p in run.rglob("profiles.yml"))
            except OSError:  # a folder removed while walked
                pass
            time.sleep(0.05)

    scanner = threading.Thread(target=scan)
    scanner.start()
    try:
        proc = spawn_gameday(target, run, *CHEAP, "--select", "payments_merged", out=out)
        _, err = proc.communicate(timeout=600)
    finally:
        stop.set()
        scanner.join()
    assert proc.returncode == 0, (err, (out / "report.md").read_text() if (out / "report.md").exists() else "")
    assert seen == [] and files_with(secret.encode(), roots) == []
    assert len(profiles_seen) >= 2, profiles_seen  # the scan saw the sandbox profiles
    assert secret not in err


def test_the_lint_compiles_the_projects_code_confined_too(tmp_path):
    """The lint compiles the project (its Jinja runs queries in the scratch catalog): a compile-time
    query that writes a file outside is refused by the kernel; --unconfined lets it through (and says so)."""
    p = hostile_project(tmp_path)
    outside = p["landing"] / "from_lint.csv"
    (p["project"] / "models" / "introspects.sql").write_text(
        "{% if execute %}{% do run_query(\"copy (select 1 as x) to '" + str(outside) + "'\") %}{% endif %}\n"
        "select 1 as id\n")
    args = ["lint", "--project-dir", str(p["project"]), "--profiles-dir", str(p["project"]), "--format", "json"]
    code, out, err = run_cli(args)
    assert not outside.exists(), (code, out, err)
    _unchanged(p)
    summary = json.loads(out)["summary"]
    assert summary["confinement"].startswith("confined by the kernel"), summary
    assert str(Path(tempfile.gettempdir()) / f"rerun_safety-{os.getuid()}") in summary["confinement"]
    code, out, err = run_cli([*args, "--unconfined"])
    assert outside.read_text().strip().splitlines() == ["x", "1"], (code, out, err)
    assert json.loads(out)["summary"]["confinement"].startswith("UNCONFINED (--unconfined)")


def test_the_postgres_lint_compiles_as_a_role_of_its_own(tmp_path, pg_server, pg_database):
    """The profile's role is a superuser: a compile-time query of the project that writes a file on the
    server is refused to the lint's own role (the scratch database is that role's); --unconfined compiles
    as the profile's role, and the file is written. No role or scratch database stays."""
    from support.common import postgres_profile, write_profiles

    outside = Path(pg_server.base) / f"from_lint_{os.getpid()}.csv"
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: hostile_pg\nversion: '1.0'\nprofile: hostile_pg\n")
    write_profiles(project, "hostile_pg", postgres_profile(pg_server, pg_database))
    (project / "models" / "introspects.sql").write_text(
        "{{ config(materialized='incremental', unique_key='id') }}\n"
        "{% if execute %}{% do run_query(\"copy (select 1 as x) to '" + str(outside) + "'\") %}{% endif %}\n"
        "select 1 as id\n")
    args = ["lint", "--project-dir", str(project), "--profiles-dir", str(project), "--format", "json"]
    leftovers = ("select (select count(*) from pg_roles where rolname like 'rerun\\_safety\\_role\\_%'), "
                 "(select count(*) from pg_database where datname like 'rerun\\_safety\\_lint\\_%')")
    conn = pg_server.connect(pg_database)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(leftovers)
            before = cur.fetchone()
        code, out, err = run_cli(args)
        assert not outside.exists(), (code, out, err)
        assert json.loads(out)["summary"]["confinement"].startswith("confined by the kernel"), out
        with conn.cursor() as cur:
            cur.execute(leftovers)
            assert cur.fetchone() == before
        code, out, err = run_cli([*args, "--unconfined"])
        assert outside.read_text().splitlines() == ["1"], (code, out, err)
        with conn.cursor() as cur:
            cur.execute(leftovers)
            assert cur.fetchone() == before
    finally:
        conn.close()
        outside.unlink(missing_ok=True)


# ------------------------------------------------------------------ hooks that write files, with the guard on

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
