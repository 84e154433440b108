"""One thread and two give the same report, on the conformance project (DuckDB).

    .venv/bin/python benchmarks/threads.py [--steps 3]

--threads 2 runs the scenarios in worker processes, each sent one ScenarioJob; --threads 1 runs them in
this process on the plan itself. The conformance project has the shapes whose results are chance (lists
without an order, ties, random samples) beside defects of every class: both runs' reports, without what
differs between two runs of one game day (tests/support/gameday.py `report_essentials`), must be equal.
Prints the wall time of each, their ratio and every difference; exits 1 on a difference. The suite
compares the two thread counts on the example project on PostgreSQL (tests/test_gameday_shop.py).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.common import FIXTURES  # noqa: E402
from support.gameday import copy_project, dbt_deps, differences, report_essentials, run_cli  # noqa: E402


def _load_data():
    spec = importlib.util.spec_from_file_location("conformance_load_data", FIXTURES / "conformance" / "load_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rs_bench_threads_"))
    project = copy_project(FIXTURES / "conformance", tmp / "conformance")
    load = _load_data()
    load.load_duckdb(str(project / "conformance.duckdb"))
    load.load_refdata_duckdb(str(project / "refdata.duckdb"))
    dbt_deps(project, project)
    os.chdir(project)  # the profile's attach path is relative, as users write it
    reports, walls, codes = {}, {}, {}
    for threads in (2, 1):
        out = tmp / f"out_{threads}"
        started = time.perf_counter()
        codes[threads], stdout, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir",
                                                  str(project), "--steps", str(args.steps), "--threads",
                                                  str(threads), "--output-dir", str(out)])
        walls[threads] = time.perf_counter() - started
        if not (out / "report.json").exists():
            print(f"--threads {threads}: no report (exit {codes[threads]}):\n{(stdout + stderr)[-3000:]}")
            return 1
        reports[threads] = json.loads((out / "report.json").read_text())
    found = differences(report_essentials(reports[1]), report_essentials(reports[2]))
    if codes[1] != codes[2]:
        found.insert(0, f"exit codes: {codes[1]} != {codes[2]}")
    print(f"conformance ({len(reports[2]['models'])} models, --steps {args.steps}): --threads 1 {walls[1]:.1f} s, "
          f"--threads 2 {walls[2]:.1f} s (ratio 1/2: {walls[1] / walls[2]:.2f}); exit {codes[1]} and {codes[2]}")
    print(f"differences between the reports: {len(found)}")
    for line in found[:60]:
        print(f"  {line}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
