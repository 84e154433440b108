"""What the fix search (`gameday --fix`) costs, side by side in one run, on the example (DuckDB).

    .venv/bin/python benchmarks/fix_search.py [--threads 2] [--steps 4]

In a copy of examples/shop, as a user runs them (CLI processes): `rerun-safety gameday`, then the same with
`--fix`, then, for each root cause, a game day of that model and everything below it (`--select model+`).
Printed: the two game days' wall times and their difference (the fix search), and per root cause the
search's own time (report.json's `seconds`, shared by the root causes verified in one round) beside its
subtree's game day, with the ratio (the target: <= 1).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.gameday import SHOP, copy_project, dbt_deps, shop_generator  # noqa: E402

BIN = Path(sys.executable).parent


def gameday(project: Path, out: Path, *args: str) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN / "rerun-safety"), "gameday", "--project-dir", str(project), "--profiles-dir",
                           str(project), "--output-dir", str(out), *args], cwd=project, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"gameday {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return seconds, json.loads((out / "report.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="2")
    parser.add_argument("--steps", default="4")
    args = parser.parse_args()
    common = ["--threads", args.threads, "--steps", args.steps]
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(SHOP, Path(tmp) / "shop")
        shop_generator().load_duckdb(str(project / "shop.duckdb"))
        dbt_deps(project, project)
        plain, _ = gameday(project, Path(tmp) / "plain", *common)
        fixed, report = gameday(project, Path(tmp) / "fix", *common, "--fix")
        print(f"load average {os.getloadavg()[0]:.2f}; threads {args.threads}, steps {args.steps}")
        print(f"game day            {plain:7.1f} s")
        print(f"game day --fix      {fixed:7.1f} s   fix search {fixed - plain:+.1f} s "
              f"({sum(f['verified'] for f in report['fixes'])} of {len(report['fixes'])} root causes fixed)")
        print(f"{'root cause':<40} {'search':>8} {'subtree game day':>17} {'ratio':>6}  fix")
        for f in report["fixes"]:
            if not f["seconds"]:
                print(f"{f['model']:<40} {'-':>8} {'-':>17} {'-':>6}  none: {f['why_none'][:60]}")
                continue
            subtree, _ = gameday(project, Path(tmp) / f"sub_{f['model']}", *common, "--select", f"{f['model']}+")
            print(f"{f['model']:<40} {f['seconds']:7.1f}s {subtree:16.1f}s {f['seconds'] / subtree:6.2f}  "
                  + (f["candidate"] if f["verified"] else "none verified"))


if __name__ == "__main__":
    main()
