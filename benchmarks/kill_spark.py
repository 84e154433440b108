"""SIGKILL a game day on a Spark cluster's Thrift server mid-scenario; the user's tables must be
unchanged and the next run's sweep must drop the dead run's databases.

    .venv/bin/python benchmarks/kill_spark.py [--trials 1]

Starts a standalone cluster on loopback (master, one worker, the Thrift server; Java 17 and the
Spark extra), loads examples/shop into fresh schemas, starts `rerun-safety gameday --threads 2`
on it, waits until its scenarios run in the workers, kills the process (its workers die with it),
then checks: the user's tables by checksum, the sandboxes the kill left, and that a SparkEngine's
sweep (what the next game day does first) removes them. Prints one line per trial and exits 1 if
any check fails. (It left the test suite for its 90 s; the DuckDB and PostgreSQL kill trials are in
benchmarks/kill.py.)
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _databases(query) -> set[str]:
    return {r[0] for r in query("show databases")}


def trial(cluster, tmp: Path) -> tuple[bool, str]:
    from support.spark import unique_schema
    from support.common import write_profiles
    from support.gameday import SHOP, copy_project, dbt_deps, shop_generator, spark_fingerprint

    from rerun_safety.warehouse.spark.engine import SparkEngine

    project = copy_project(SHOP, tmp / "shop")
    raw, audit, target = unique_schema("shop_raw"), unique_schema("shop_audit"), unique_schema("shop")
    shop_generator().load_spark(cluster.query, raw, audit)
    profiles = tmp / "profiles"
    write_profiles(profiles, "shop", cluster.profile(target, user="dbt"))
    dbt_deps(project, profiles)
    before = spark_fingerprint(cluster.query, [raw, audit])
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "rerun_safety.cli", "gameday", "--project-dir", str(project),
                             "--profiles-dir", str(profiles), "--output-dir", str(tmp / "out"),
                             "--vars", json.dumps({"raw_schema": raw, "audit_schema": audit}), "--steps", "4",
                             "--threads", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def sandboxes() -> list[str]:
        return [d for d in _databases(cluster.query) if d.startswith("rerun_safety_sbx_")]

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if any("_replay_backfill__" in d or "_rerun__" in d for d in sandboxes()):
            break  # scenarios are running, in the workers
        time.sleep(2)
    if proc.poll() is not None:
        return False, "the game day ended before its scenarios ran: " + proc.stderr.read().decode()[-500:]
    time.sleep(5)  # somewhere inside the scenarios' writes
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    time.sleep(3)  # the workers die with their parent
    unchanged = spark_fingerprint(cluster.query, [raw, audit]) == before
    left = sandboxes()
    engine = SparkEngine(cluster.profile(target, user="dbt"), tmp / f"rerun_safety-{os.getuid()}", "nextrun00000")
    try:
        engine.sweep()  # what the next game day does first
    finally:
        engine.cleanup()
        engine.close()
    after = sandboxes()
    still_unchanged = spark_fingerprint(cluster.query, [raw, audit]) == before
    no_target = target not in _databases(cluster.query)
    ok = unchanged and bool(left) and not after and still_unchanged and no_target
    return ok, (f"user tables unchanged after the kill: {unchanged}; sandboxes the kill left: {len(left)}; "
                f"left after the next run's sweep: {len(after)}; unchanged after the sweep: {still_unchanged}; "
                f"the user's target never created: {no_target}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1)
    args = ap.parse_args()
    from support.spark_cluster import start_spark_cluster

    base = Path(tempfile.mkdtemp(prefix="rs_bench_kill_spark_"))
    cluster = start_spark_cluster(base / "spark_cluster")
    failed = 0
    try:
        for i in range(args.trials):
            ok, text = trial(cluster, base / f"trial{i}")
            failed += not ok
            print(f"trial {i + 1}: {'ok' if ok else 'FAILED'}: {text}", flush=True)
    finally:
        cluster.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
