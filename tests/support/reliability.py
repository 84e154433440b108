"""Helpers for the reliability tests and benchmarks (no tests here): the payments fixture loaded
into a DuckDB file or a PostgreSQL database, game days as real subprocesses in a private work
root, and counts of leftover sandboxes (folders and databases with the sandbox prefix)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

from support.common import FIXTURES, REPO_ROOT, duckdb_profile, postgres_profile, write_profiles
from support.gameday import copy_project, dbt_deps

sys.path.insert(0, str(FIXTURES / "payments"))
import load_data  # noqa: E402

PREFIX = "rerun_safety_sbx_"
PARSE_PREFIX = "rerun_safety_parse_"
CLI = str(Path(sys.executable).with_name("rerun-safety"))
# The cheapest realistic game day: 7 models, one replay over 2 steps.
CHEAP = ("--steps", "2", "--scenarios", "replay")
# One incremental model (plus its upstream view) and two scenarios: enough to interrupt, or to look for a secret.
SMALL = ("--select", "payments_merged", "--scenarios", "replay,rerun")


class Target:
    """A loaded payments project: where its data lives and how to fingerprint it."""

    def __init__(self, engine: str, project: Path, profiles: Path, output: dict, server=None, dbname=None):
        self.engine, self.project, self.profiles, self.output = engine, project, profiles, output
        self.server, self.dbname = server, dbname

    def fingerprint(self):
        if self.engine == "duckdb":
            from support.gameday import file_sha256

            return file_sha256(Path(self.output["path"]))
        from support.gameday import pg_fingerprint

        return pg_fingerprint(self.server, self.dbname)


def payments_target(engine: str, dest: Path, server=None, output_extra: dict | None = None,
                    role: str | None = None) -> Target:
    """`role` (PostgreSQL): the database is owned and loaded by that role, and the profile uses it."""
    dest.mkdir(parents=True, exist_ok=True)
    project = copy_project(FIXTURES / "payments", dest / "payments")
    if engine == "duckdb":
        path = project / "payments.duckdb"
        load_data.load_duckdb(str(path))
        output = duckdb_profile(path, schema="analytics", **(output_extra or {}))
        profiles = dest / "profiles"
        write_profiles(profiles, "payments", output, target="local")
        dbt_deps(project, profiles)
        return Target(engine, project, profiles, output)
    dbname = server.create_database("payments")
    dsn = server.dsn(dbname)
    if role:
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute(f'alter database "{dbname}" owner to "{role}"')
        conn.close()
        dsn = f"{dsn} user={role}"
        output_extra = {"user": role, **(output_extra or {})}
    load_data.load_postgres(dsn)
    output = postgres_profile(server, dbname, schema="analytics", **(output_extra or {}))
    profiles = dest / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    dbt_deps(project, profiles)
    return Target(engine, project, profiles, output, server, dbname)


def add_external_models(target: Target) -> Path:
    """Two dbt-duckdb external models downstream of the payments fixture's incremental merge model:
    `payments_export` with a `location` (the user's export, written here as an earlier run would have),
    `payments_export_root` written to `external_root` (the profile's default: the working directory).
    Returns the export's path."""
    import duckdb

    export = target.project / "exports" / "payments.parquet"
    export.parent.mkdir(exist_ok=True)
    with duckdb.connect() as con:
        con.execute(f"copy (select range as payment_no from range(4800)) to '{export}' (format parquet)")
    models = target.project / "models"
    (models / "payments_export.sql").write_text(
        f"{{{{ config(materialized='external', location='{export}') }}}}\n"
        "select account_id, payment_no, \"Amount EUR\" from {{ ref('payments_merged') }}\n")
    (models / "payments_export_root.sql").write_text(
        "{{ config(materialized='external', format='csv') }}\n"
        "select account_id, count(*) as payments from {{ ref('payments_merged') }} group by 1\n")
    return export


def project_files(project: Path) -> dict[str, str]:
    """Every file of a project folder (dbt's own target/, logs/, dbt_packages/ left out) with its sha256."""
    import hashlib

    out = {}
    for path in sorted(project.rglob("*")):
        rel = path.relative_to(project)
        if path.is_file() and rel.parts[0] not in ("target", "logs", "dbt_packages"):
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def spawn_gameday(target: Target, tmp: Path, *args: str, out: Path | None = None) -> subprocess.Popen:
    """A game day as its own process (own session, so a signal reaches only it), with the work root
    in `tmp/rerun_safety-<uid>` (TMPDIR), stdout/stderr in files next to it."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp), NO_COLOR="1", COLUMNS="120")
    out = out or tmp / f"out_{uuid.uuid4().hex[:6]}"
    cmd = [CLI, "gameday", "--project-dir", str(target.project), "--profiles-dir", str(target.profiles),
           "--output-dir", str(out), *args]
    proc = subprocess.Popen(cmd, cwd=target.project, env=env, start_new_session=True,
                            stdout=open(tmp / f"stdout_{len(list(tmp.glob('stdout_*')))}", "w"),
                            stderr=subprocess.PIPE, text=True)
    proc.out_dir = out  # type: ignore[attr-defined]
    return proc


def work_root(tmp: Path) -> Path:
    """The runner's default work root with TMPDIR=tmp: one per user."""
    return tmp / f"rerun_safety-{os.getuid()}"


def leftover_folders(tmp: Path) -> list[str]:
    """Run folders (sandboxes, profiles, lock) and parse folders left in the work root."""
    root = work_root(tmp)
    if not root.exists():
        return []
    return sorted(p.name for pattern in (f"{PREFIX}*", f"{PARSE_PREFIX}*") for p in root.glob(pattern))


def leftover_databases(server) -> list[str]:
    if server is None:
        return []
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select datname from pg_database where starts_with(datname, %s) order by 1", [PREFIX])
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def leftover_roles(server) -> list[str]:
    """The game day's and the lint's own roles still on the server (rerun_safety_role_*)."""
    if server is None:
        return []
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select rolname from pg_roles where starts_with(rolname, 'rerun_safety_role_') order by 1")
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def phase(tmp: Path, server=None) -> str:
    """How far a running game day got, from its sandboxes: start, snapshot, reference, scenario."""
    names = set(leftover_databases(server))
    for run in work_root(tmp).glob(f"{PREFIX}*") if work_root(tmp).exists() else ():
        try:
            names |= {f"{run.name}_{p.name}" for p in run.iterdir() if p.is_dir()}
        except FileNotFoundError:  # removed meanwhile (its run's cleanup, or a sweep)
            continue
    if any(n.endswith(("_replay", "_rerun", "_partial", "_backfill", "_determinism")) or "_worker_" in n
           for n in names):  # a scenario sandbox, or a scenario worker's folder
        return "scenario"
    if any(n.endswith("_reference") for n in names):
        return "reference"
    if any(n.endswith("_snapshot") for n in names):
        return "snapshot"
    return "start"


def wait_until(predicate, timeout: float, proc: subprocess.Popen | None = None, step: float = 0.02) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(step)
    return False


def children(pid: int) -> list[int]:
    """Every descendant process: the confined game day's process, the scenario workers of a --threads
    game day below it."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            direct = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in direct:
            out += [child, *children(child)]
    return out


def in_sessions(sessions: set[int]) -> list[int]:
    """Every process of these sessions (the confined child has one of its own, its workers are in it)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) in sessions:  # state, ppid, pgrp, session
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def next_run_sweep(target: Target, tmp: Path) -> int:
    """What the next game day does first: sweep sandboxes of runs that are no longer alive."""
    sys.path.insert(0, str(REPO_ROOT / "python_runner"))
    from rerun_safety.warehouse.engines import engine_for

    engine = engine_for(target.output, work_root(tmp), f"sweep{uuid.uuid4().hex[:6]}")
    try:
        return engine.sweep()
    finally:
        engine.cleanup()
        engine.close()


def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL, group: bool = False) -> None:
    """`group`: every process of the game day (its session, which spawn_gameday starts, and every
    descendant: the confined child has a session of its own), as the kernel's OOM killer of its cgroup, or
    a scheduler that kills a job's cgroup, does."""
    below = children(proc.pid) if group else []
    try:
        os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    for pid in below:
        try:
            if os.getsid(pid) == pid:  # the confined child: its group holds a worker it is starting now
                os.killpg(pid, sig)
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def profile_yaml(output: dict, profile: str = "payments", target: str = "local") -> str:
    return yaml.safe_dump({profile: {"target": target, "outputs": {target: output}}})


def files_with(needle: bytes, roots: list[Path]) -> list[str]:
    """Files under `roots` that hold `needle` (a secret scan; a file removed while read is skipped)."""
    hits = []
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as fh:
                        if needle in fh.read():
                            hits.append(path)
                except OSError:
                    continue  # removed while we looked
    return hits


# ------------------------------------------------------------------ shared by the feature files
def role_target(server, tmp: Path):
    from support.common import create_role

    role = create_role(server)  # LOGIN CREATEDB CREATEROLE, no superuser
    return role, payments_target("postgres", tmp, server=server, role=role)


def databases_of(server, role: str) -> list[str]:
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


# The game days of a role's tests: the payments fixture's incremental merge model and its view.
ROLE_ARGS = (*CHEAP, "--select", "payments_merged")


def diff_cli(target, *args: str, profiles=None) -> tuple[int, str, str]:
    """`rerun-safety diff` of the payments fixture's landing table against itself, in this process (JSON)."""
    from support.gameday import run_cli

    return run_cli(["diff", "landing.payments", "landing.payments", "--project-dir", str(target.project),
                    "--profiles-dir", str(profiles or target.profiles), "--format", "json", *args])
