"""Cost of a game day on examples/shop: wall time, dbt invocations, model time, overhead.

    .venv/bin/python benchmarks/gameday.py [--threads 1,2] [--steps 4]

Runs on a fresh copy of the example (DuckDB). Prints, per --threads value: total wall time, the
number of dbt invocations, the sum of the models' own execution times (dbt's run results), the
overhead ratio (wall / model time) and the median non-model time per invocation; and, side by
side, one `dbt run` of the same project as a CLI process (its start-up is what reusing one
parsed manifest saves on every invocation).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from gameday_support import SHOP, copy_project, dbt_deps, shop_generator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    from rerun_safety.gameday import GamedayOptions, run_gameday

    tmp = Path(tempfile.mkdtemp(prefix="rs_bench_gameday_"))
    project = copy_project(SHOP, tmp / "shop")
    shop_generator().load_duckdb(str(project / "shop.duckdb"))
    dbt_deps(project, project)
    os.chdir(project)

    started = time.perf_counter()
    cli = subprocess.run([str(Path(sys.executable).parent / "dbt"), "run", "--profiles-dir", ".", "--quiet",
                          "--select", "stg_events", "--target-path", str(tmp / "cli_target")],
                         capture_output=True, text=True)
    cli_wall = time.perf_counter() - started
    print(f"one CLI `dbt run` of a single view: {cli_wall:.2f} s (exit {cli.returncode})")

    rows = []
    walls = {}
    for threads in [int(t) for t in args.threads.split(",")]:
        opts = GamedayOptions.build(project_dir=project, profiles_dir=project, steps=args.steps,
                                    threads=threads, output_dir=tmp / f"out{threads}", work_root=tmp / "work")
        t0 = time.perf_counter()
        report = run_gameday(opts)
        wall = time.perf_counter() - t0
        walls[threads] = wall
        inv = report.extra["invocations"]
        non_model = [i["wall_s"] - i["model_s"] for i in inv]
        rows.append((threads, wall, report.dbt_invocations, report.model_time, wall / report.model_time,
                     statistics.median(non_model), {m.name: m.verdict for m in report.models}))
    print(f"\n{'threads':>7} {'wall s':>8} {'dbt calls':>9} {'model s':>8} {'wall/model':>10} {'median non-model s/call':>24}")
    for threads, wall, calls, model, ratio, med, _ in rows:
        print(f"{threads:>7} {wall:>8.1f} {calls:>9} {model:>8.1f} {ratio:>10.2f} {med:>24.3f}")
    if len(rows) > 1:
        base = rows[0]
        for r in rows[1:]:
            same = "same verdicts" if r[6] == base[6] else "VERDICTS DIFFER"
            print(f"threads {r[0]} / threads {base[0]} wall ratio: {r[1] / base[1]:.2f} ({same})")
    med = rows[0][5]
    print(f"median non-model time per invocation: {med:.3f} s (target < 0.3 s); "
          f"CLI start-up / reused-manifest overhead: {cli_wall / med:.1f}x")


if __name__ == "__main__":
    main()
