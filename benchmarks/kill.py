"""Kill safety: SIGKILL a real game day at random points and check that the user's target is
unchanged every time and that the next run's sweep removes every leftover sandbox.

Each trial starts `rerun-safety gameday` on the payments fixture (7 models, --threads 2) and
SIGKILLs it after a delay drawn from a stratum of the measured duration of a whole run, so the
kills spread over parse, snapshot, sandbox creation, dbt runs and diffs. The next trial's game
day is the "next run": its sweep (before its snapshot) must remove the leftovers of the killed
one. A final uninterrupted run must leave nothing behind at all.

With `--case hooks` the user's files that hooks would write and the secrets of the profile are
watched: on DuckDB a post-hook exports the merged model to a CSV file outside the project, another to
a relative path (the project folder), and the profile carries a secret in a plugin's config; on
PostgreSQL (a superuser) a post-hook COPYs to a file of the server, and the profile has a password.
After every kill the user's files must be byte-identical and no file under the work root, the
project or the output may hold the secret.

With `--case hardened` the project and the role are the ones that broke before: on DuckDB the
fixture gains two dbt-duckdb external models (one writing the user's export file at a fixed
`location`, one writing to `external_root`, the working directory), and "user data" is the
DuckDB file plus every file of the project folder; on PostgreSQL the game day runs as a role
without superuser (LOGIN CREATEDB CREATEROLE: a confined game day creates a role of its own), on a
server whose autovacuum visits each database every second.

    .venv/bin/python benchmarks/kill.py --engine duckdb --trials 20
    .venv/bin/python benchmarks/kill.py --engine postgres --trials 20
    .venv/bin/python benchmarks/kill.py --engine duckdb --case hardened --trials 20
    .venv/bin/python benchmarks/kill.py --engine postgres --case hardened --trials 20
    .venv/bin/python benchmarks/kill.py --engine duckdb --case hooks --trials 20
    .venv/bin/python benchmarks/kill.py --engine postgres --case hooks --trials 20
    .venv/bin/python benchmarks/kill.py --engine duckdb --case hooks --guard off --trials 20

A kill hits the command's process alone or its whole process group (the command, its confined game day
and the workers at once: `--kill group`, a scheduler's or the OOM killer's way), by default one and the
other in turn. Killed alone, the command's confined game day removes its own sandboxes; killed as a group,
they stay for the next run's sweep. `--guard off` switches the statement guard off
(RERUN_SAFETY_STATEMENT_GUARD=off): the hooks then meet only the kernel's and the database's confinement.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.common import create_role, start_pg_server  # noqa: E402
from support.gameday import file_sha256  # noqa: E402
from support.reliability import (add_external_models, alive, children, files_with, kill,  # noqa: E402
                                      leftover_databases, leftover_folders, leftover_roles, payments_target, phase,
                                      project_files, spawn_gameday)

ARGS = ("--steps", "2", "--scenarios", "replay,rerun", "--threads", "2")
PHASES = ("start", "snapshot", "reference", "scenario")


def leftovers(tmp: Path, server) -> set[str]:
    """Sandbox folders, sandbox databases and the run roles (PostgreSQL) that a run left."""
    return set(leftover_folders(tmp)) | set(leftover_databases(server)) | set(leftover_roles(server))


def full_run(target, tmp: Path) -> tuple[float, int, str]:
    started = time.time()
    proc = spawn_gameday(target, tmp, *ARGS)
    _, err = proc.communicate(timeout=1800)
    return time.time() - started, proc.returncode, err


def trial(target, tmp: Path, delay: float, group: bool = False) -> dict:
    before = leftovers(tmp, target.server)
    proc = spawn_gameday(target, tmp, *ARGS)
    started = time.time()
    seen = "start"
    workers: set[int] = set()
    while time.time() - started < delay and proc.poll() is None:
        seen = max(seen, phase(tmp, target.server), key=PHASES.index)
        workers |= set(children(proc.pid))
        time.sleep(0.02)
    now = leftovers(tmp, target.server)
    finished = proc.poll() is not None
    kill(proc, group=group)
    proc.wait()
    # The sweep runs before the snapshot: once this run had a snapshot, older leftovers must be gone.
    stale = sorted(before & now) if PHASES.index(seen) >= 1 else None
    # A worker still importing when its parent died exits on reaching its initializer (it checks
    # its parent before creating anything); give it time to get there. Killed alone, the command's
    # confined game day ends when it sees its command gone, after removing its sandboxes.
    deadline = time.time() + 30
    while any(alive(p) for p in workers) and time.time() < deadline:
        time.sleep(0.1)
    return {"delay": delay, "phase": "finished" if finished else seen, "code": proc.returncode, "group": group,
            "leftovers_before": len(before), "stale_after_sweep": stale,
            "leftovers_after_kill": len(leftovers(tmp, target.server)),
            "orphan_workers": sum(1 for p in workers if alive(p))}


def add_export_hooks(target, base: Path, server) -> list[Path]:
    """Models whose post-hooks write the user's files (see --case hooks); returns those files."""
    models = target.project / "models"
    if server is None:
        outside, here = base / "exports" / "payments.csv", target.project / "local_export.csv"
        outside.parent.mkdir()
        outside.write_text("account_id,payment_no\n" + "".join(f"{i},{i}\n" for i in range(4800)))
        here.write_text("kept\n")
        (models / "payments_exported.sql").write_text(
            "{{ config(materialized='table', post_hook=[\"copy (select account_id, payment_no from {{ this }}) to '"
            + str(outside) + "' (header)\", \"copy (select 1 as n) to 'local_export.csv'\"]) }}\n"
            "select account_id, payment_no from {{ ref('payments_merged') }}\n")
        return [outside, here]
    export = Path(server.base) / "payments_export.csv"
    export.write_text("account_id\n" + "".join(f"{i}\n" for i in range(4800)))
    export.chmod(0o666)
    (models / "payments_exported.sql").write_text(
        "{{ config(materialized='table', post_hook=\"copy (select account_id from {{ this }}) to '"
        + str(export) + "' with csv header\") }}\nselect account_id from {{ ref('payments_merged') }}\n")
    return [export]


def add_secret(target) -> str:
    """A secret in the user's profile: PostgreSQL's password (the test server trusts local connections,
    so any value works), DuckDB's inside a plugin's config."""
    import uuid

    import yaml

    secret = f"secret-{uuid.uuid4().hex}"
    path = target.profiles / "profiles.yml"
    doc = yaml.safe_load(path.read_text())
    output = next(iter(next(iter(doc.values()))["outputs"].values()))
    if output["type"] == "postgres":
        output["password"] = secret
    else:
        output["plugins"] = [{"module": "rerun_safety.warehouse.duckdb.confine", "alias": "user_plugin",
                              "config": {"api_key": secret}}]
    path.write_text(yaml.safe_dump(doc))
    return secret


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["duckdb", "postgres"], default="duckdb")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kill", choices=["command", "group", "both"], default="both",
                    help="SIGKILL the command's process, its whole process group, or one and the other in turn")
    ap.add_argument("--guard", choices=["on", "off"], default="on",
                    help="off: the statement guard switched off (RERUN_SAFETY_STATEMENT_GUARD=off)")
    ap.add_argument("--case", choices=["payments", "hardened", "hooks"], default="payments",
                    help="hardened: external models (DuckDB) or a CREATEDB-only role (PostgreSQL); hooks: hooks "
                         "that write the user's files, and a secret in the profile")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    if a.guard == "off":
        import os

        os.environ["RERUN_SAFETY_STATEMENT_GUARD"] = "off"  # the game days inherit it
    hardened = a.case == "hardened"
    server = None
    if a.engine == "postgres":
        server = start_pg_server("-c autovacuum_naptime=1" if hardened else "")
    base = Path(tempfile.mkdtemp(prefix="rerun_safety_kill_"))
    try:
        role = create_role(server) if hardened and server is not None else None
        target = payments_target(a.engine, base / "project", server=server, role=role)
        if hardened and a.engine == "duckdb":
            add_external_models(target)
        tmp = base / "run"
        hooks = a.case == "hooks"
        exports = add_export_hooks(target, base, server) if hooks else []
        secret = add_secret(target) if hooks else None

        class UserData:  # the target's data and, with external models, every file of the project
            def __init__(self, target):
                self.target = target

            def fingerprint(self):
                return (self.target.fingerprint(), project_files(self.target.project) if hardened or hooks else None,
                        [file_sha256(p) for p in exports])

        user = UserData(target)
        fingerprint = user.fingerprint()
        changed = 0
        duration, code, err = full_run(target, tmp)
        assert code == 1, err
        print(f"[kill {a.engine} {a.case}] a whole game day takes {duration:.1f}s; {a.trials} trials"
              + (f" (as role {role}, no superuser)" if role else ""), flush=True)
        rows, failures = [], []
        i = attempts = 0
        cap = float("inf")
        while i < a.trials and attempts < 2 * a.trials:
            attempts += 1
            # one delay per stratum of the run's duration, so kills cover every phase
            delay = 1.3 * duration * (i + rng.random()) / a.trials  # runs slow down under load
            # ...but not past the shortest run seen: late kills land in the last diffs and cleanup
            delay = min(delay, cap * (0.85 + 0.15 * rng.random()))
            group = a.kill == "group" or (a.kill == "both" and i % 2 == 1)
            r = trial(target, tmp, delay, group=group)
            if r["phase"] == "finished":  # the machine got faster: not a kill, lower the cap
                cap = min(cap, delay)
                print(f"  (run finished before {delay:.1f}s: not counted; kills now before {cap:.1f}s)")
                if user.fingerprint() != fingerprint:
                    failures.append((i, ["user data changed"]))
                continue
            i += 1
            r["trial"] = i
            r["unchanged"] = user.fingerprint() == fingerprint
            r["secrets"] = files_with(secret.encode(), [tmp, target.project]) if secret else []
            problems = []
            if r["secrets"]:
                problems.append(f"secret on disk: {r['secrets']}")
            if not r["unchanged"]:
                changed += 1
                problems.append("user data changed")
            if r["stale_after_sweep"]:
                problems.append(f"sweep left {r['stale_after_sweep']}")
            if r["orphan_workers"]:
                problems.append(f"{r['orphan_workers']} workers outlived the runner")
            if problems:
                failures.append((i, problems))
            rows.append(r)
            print(f"  trial {i:2d}: kill {'group' if r['group'] else 'command'} at {r['delay']:5.1f}s ({r['phase']:9s}) "
                  f"leftovers before "
                  f"{r['leftovers_before']}, after kill {r['leftovers_after_kill']}, stale after the next "
                  f"sweep {len(r['stale_after_sweep']) if r['stale_after_sweep'] is not None else '-'}, "
                  f"user data {'unchanged' if r['unchanged'] else 'CHANGED'}", flush=True)
        before_final = len(leftovers(tmp, server))
        _, code, err = full_run(target, tmp)
        after_final = len(leftovers(tmp, server))
        if code != 1:
            failures.append(("final", [f"final run exit {code}: {err.strip()[-300:]}"]))
        if after_final:
            failures.append(("final", [f"{after_final} sandboxes left after the final run"]))
        if user.fingerprint() != fingerprint:
            changed += 1
            failures.append(("final", ["user data changed"]))
        phases = Counter(r["phase"] for r in rows)
        swept = sum(1 for r in rows if r["stale_after_sweep"] is not None and r["leftovers_before"])
        stale = sum(len(r["stale_after_sweep"] or ()) for r in rows)
        secrets = sum(len(r.get("secrets") or ()) for r in rows)
        if secret:
            secrets += len(files_with(secret.encode(), [tmp, target.project]))
        print(f"[kill {a.engine} {a.case} guard {a.guard}] user data changed {changed}; secrets found on disk {secrets}; leftovers after the next run "
              f"{after_final}; trials {len(rows)}, failures {len(failures)}; kills by phase "
              f"{dict(phases)}; leftovers after kills: max {max(r['leftovers_after_kill'] for r in rows)}, "
              f"sum {sum(r['leftovers_after_kill'] for r in rows)}; sweeps checked {swept} (stale {stale}); "
              f"before the final run {before_final}, after it {after_final}")
        for f in failures:
            print(f"  FAILURE {f}")
        return 1 if failures else 0
    finally:
        if server is not None:
            server.stop()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
