"""A game day on PostgreSQL of one wide incremental model against the same model 10x narrower.

    .venv/bin/python benchmarks/gameday_wide.py [--rows 60000] [--wide 150] [--narrow 15] [--threads 1]

One throwaway PostgreSQL server; raw.events holds --rows events over 30 days with --wide (then
--narrow) integer and float columns. The model merges the events by key over a one-day lookback
and stamps each row with the time it was built: that one column drifts (rows built at an earlier
batch keep an earlier stamp than the reference's), so every scenario's diff has changed rows to
find and name. Prints both game days' wall time, verdict and the column named, and the ratio
(target: the wide one at most 3x the narrow one).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

MODEL = """{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id') }}
select e.*, current_timestamp as built_at
from {{ source('raw', 'events') }} e
{% if is_incremental() %}
where e.occurred_at >= (select max(occurred_at) - interval '1 day' from {{ this }})
{% endif %}
"""


def load(server, db: str, rows: int, columns: int) -> None:
    values = ", ".join(f"(i * {k + 3}) % 10007" + (" * 0.25" if k % 5 == 4 else "") + f" as c{k}"
                       for k in range(columns - 2))
    con = server.connect(db)
    with con.cursor() as cur:
        cur.execute("create schema raw")
        cur.execute(f"create table raw.events as select i as event_id, timestamp '2025-01-01' + "
                    f"i * interval '{30 * 86400 // rows} seconds' as occurred_at, {values} "
                    f"from generate_series(1, {rows}) i")
        cur.execute("vacuum analyze raw.events")
    con.close()


def game_day(server, rows: int, columns: int, threads: int, tmp: Path) -> tuple[float, dict]:
    from support.common import postgres_profile, write_profiles
    from support.gameday import by_name, load_report, run_cli

    db = server.create_database(f"wide{columns}")
    load(server, db, rows, columns)
    project = tmp / f"wide{columns}"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "wide", "version": "1.0", "config-version": 2, "profile": "wide"}))
    (project / "models" / "sources.yml").write_text(yaml.safe_dump({"version": 2, "sources": [{
        "name": "raw", "schema": "raw", "tables": [{"name": "events", "config": {"event_time": "occurred_at"}}]}]}))
    (project / "models" / "events_wide.sql").write_text(MODEL)
    write_profiles(project, "wide", postgres_profile(server, db, schema="analytics"))
    cwd = os.getcwd()
    os.chdir(project)
    try:
        t = time.perf_counter()
        code, _out, err = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(project),
                                   "--output-dir", str(tmp / f"out{columns}"), "--threads", str(threads)])
        wall = time.perf_counter() - t
    finally:
        os.chdir(cwd)
    model = by_name(load_report(tmp / f"out{columns}"))["events_wide"]
    columns_named = sorted({c for s in model["scenarios"] for c in s["differing_columns"]})
    return wall, {"exit": code, "verdict": model["verdict"], "columns": columns_named, "stderr": err[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--wide", type=int, default=150)
    ap.add_argument("--narrow", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    from support.common import start_pg_server

    tmp = Path(tempfile.mkdtemp(prefix="rs_bench_gameday_wide_"))
    server = start_pg_server()
    try:
        print(f"PostgreSQL, {args.rows:,} events, --threads {args.threads}; load average "
              f"{os.getloadavg()[0]:.1f}")
        results = {}
        for columns in (args.narrow, args.wide):
            wall, info = game_day(server, args.rows, columns, args.threads, tmp)
            results[columns] = wall
            print(f"  {columns:>4} columns: {wall:7.1f} s  verdict {info['verdict']}, columns named "
                  f"{info['columns']} (exit {info['exit']})")
        ratio = results[args.wide] / results[args.narrow]
        print(f"  wide / narrow: {ratio:.2f}x (target <= 3x)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
