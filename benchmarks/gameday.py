"""Cost of a game day on examples/shop: wall time, dbt invocations, model time, overhead.

    .venv/bin/python benchmarks/gameday.py [--threads 1,2] [--steps 4]
    .venv/bin/python benchmarks/gameday.py --slice [--days 120 --per-day 20000 --since-days 12]

Runs on a fresh copy of the example (DuckDB). Prints, per --threads value: total wall time, the
number of dbt invocations, the sum of the models' own execution times (dbt's run results), the
overhead ratio (wall / model time) and the median non-model time per invocation; and, side by
side, one `dbt run` of the same project as a CLI process (its start-up is what reusing one
parsed manifest saves on every invocation).

--slice: the same project with a long history (raw.events rebuilt with --days days of --per-day
events), one game day on all of it and one with --since on its last --since-days days, side by
side: wall time, model time and rows, and the slice's share of the history beside the cost ratio.
(events_microbatch is left out of both: its full builds walk every day from its `begin`.)
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

from support.gameday import SHOP, copy_project, dbt_deps, shop_generator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--exclude", nargs="*", default=[], help="models left out (e.g. to compare with a smaller example)")
    ap.add_argument("--slice", action="store_true", help="compare a full history with a --since slice")
    ap.add_argument("--days", type=int, default=120)
    ap.add_argument("--per-day", type=int, default=20_000)
    ap.add_argument("--since-days", type=int, default=12)
    args = ap.parse_args()
    if args.slice:
        return slice_benchmark(args)
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
                                    threads=threads, output_dir=tmp / f"out{threads}", work_root=tmp / "work",
                                    exclude=tuple(args.exclude))
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


def slice_benchmark(args) -> None:
    import datetime as dt

    import duckdb

    from rerun_safety.gameday import GamedayOptions, run_gameday

    tmp = Path(tempfile.mkdtemp(prefix="rs_bench_slice_"))
    project = copy_project(SHOP, tmp / "shop")
    gen = shop_generator()
    gen.load_duckdb(str(project / "shop.duckdb"))
    start = gen.START
    with duckdb.connect(str(project / "shop.duckdb")) as con:
        con.execute("delete from raw.events")
        con.execute(f"""insert into raw.events
            select i + 1, 1 + i % 60, case when i % 10 < 3 then 'order' else 'view' end,
                   case when i % 10 < 3 then cast((i % 19900 + 100) / 100.0 as decimal(10, 2)) else 0 end,
                   ['USD', 'EUR', 'GBP'][1 + i % 3],
                   timestamp '{start}' + to_microseconds(cast(i * (86400e6 / {args.per_day}) as bigint)),
                   timestamp '{start}' + to_microseconds(cast(i * (86400e6 / {args.per_day}) as bigint))
                       + to_seconds(case when i % 20 = 0 then 7200 + i % 64800 else 30 + i % 570 end)
            from range({args.days * args.per_day}) t(i)""")
        con.execute("checkpoint")
    dbt_deps(project, project)
    os.chdir(project)
    end = start + dt.timedelta(days=args.days)
    since = end - dt.timedelta(days=args.since_days)
    rows = []
    for label, since_opt in (("full history", None), (f"--since {since.date()}", since.isoformat())):
        opts = GamedayOptions.build(project_dir=project, profiles_dir=project, steps=args.steps, threads=1,
                                    exclude=("events_microbatch",), since=since_opt,
                                    output_dir=tmp / f"out_{len(rows)}", work_root=tmp / "work")
        t0 = time.perf_counter()
        report = run_gameday(opts)
        wall = time.perf_counter() - t0
        ref_rows = max(s.reference_rows for m in report.models for s in m.scenarios)
        rows.append((label, wall, report.model_time, ref_rows, {m.name: m.verdict for m in report.models}))
    print(f"{args.days} days x {args.per_day} events; --steps {args.steps}, daily batches, threads 1")
    print(f"{'run':>20} {'wall s':>8} {'model s':>8} {'rows':>10}")
    for label, wall, model, n, _ in rows:
        print(f"{label:>20} {wall:>8.1f} {model:>8.1f} {n:>10}")
    full, part = rows
    print(f"slice share of the rows: {part[3] / full[3]:.2f}; wall ratio {part[1] / full[1]:.2f}; "
          f"model-time ratio {part[2] / full[2]:.2f}")


if __name__ == "__main__":
    main()
