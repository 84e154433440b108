"""SIGKILL a confined game day on Spark's `method: session` at random moments: the user's catalog (an
embedded Derby metastore and a warehouse folder made by a Spark process of their own) must stay byte-identical
after every kill, and the next run's sweep must leave nothing of the killed runs in the work root.

    .venv/bin/python benchmarks/kill_spark_session.py [--trials 8] [--seed 11]

The project is tests/test_confinement_spark.py's (an append over a day's lookback, and a model whose
post-hook exports itself into the user's folder); each trial starts `rerun-safety gameday` (confined: its
Spark runs on the run's own copy of the catalog) as its own process group and SIGKILLs the group after a
delay drawn between 3 s and 40 s (Spark's start, the snapshot, the reference build, the scenarios). A final
uninterrupted run must finish and leave the work root empty. Prints a line per trial; exits 1 on a failure.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
BIN = Path(sys.executable).parent


def _files(root: Path) -> dict[str, str]:
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(root.rglob("*")) if f.is_file()}


def main() -> int:
    from support.spark import confined_session_project

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rs_kill_spark_session_"))
    work = tmp / "tmpdir"  # the runs' TMPDIR: their work root is inside, watched alone
    work.mkdir()
    env = {**os.environ, "TMPDIR": str(work), "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    user, project = confined_session_project(tmp)
    before = _files(user)
    command = [str(BIN / "rerun-safety"), "gameday", "--project-dir", str(project), "--profiles-dir", str(project),
               "--output-dir", str(tmp / "out"), "--vars", json.dumps({"outside": str(user)}), "--batch-size", "day",
               "--steps", "2", "--scenarios", "rerun"]
    rng = random.Random(args.seed)
    failures = 0
    for i in range(args.trials):
        proc = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        at = rng.uniform(3, 40)
        time.sleep(at)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        same = _files(user) == before
        failures += not same
        left = sorted(p.name for p in work.rglob("rerun_safety-*/*"))
        print(f"kill {i + 1} at {at:.1f} s: user's catalog unchanged: {same}; work root: {left}", flush=True)
    final = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    left = sorted(p.name for p in work.rglob("rerun_safety-*/*"))
    same = _files(user) == before
    print(f"final run: exit {final.returncode}; user's catalog unchanged: {same}; work root after it: {left}")
    failures += (final.returncode != 1) + (not same) + bool(left)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
