"""Scale: a game day over a large DuckDB source, with the runner's peak memory, and a generated
project of many models planned (and linted) without error.

    .venv/bin/python benchmarks/scale.py                       # 10M rows, 200 models
    .venv/bin/python benchmarks/scale.py --rows 2000000 --scenarios replay

The game day runs as a child process (`rerun-safety gameday`, one process: DuckDB and dbt run
inside it), so its peak resident memory is `getrusage(RUSAGE_CHILDREN).ru_maxrss`. Target: < 1 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

MODELS = {
    # safe: delete+insert on the key with a lookback
    "events_upsert": """{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}
select id, ts, account, amount from {{ source('raw', 'events') }}
{% if is_incremental() %}where ts >= (select max(ts) - interval '2 hours' from {{ this }}){% endif %}
""",
    # safe: whole days replaced
    "events_by_day": """{{ config(materialized='incremental', incremental_strategy='partition_overwrite',
          partition_key={'field': 'day', 'granularity': 'day'}) }}
select id, ts, account, amount, cast(ts as date) as day from {{ source('raw', 'events') }}
{% if is_incremental() %}where ts >= (select date_trunc('day', max(ts)) from {{ this }}){% endif %}
""",
    # unsafe: append with a lookback re-reads rows
    "events_appended": """{{ config(materialized='incremental', incremental_strategy='append') }}
select id, ts, account, amount from {{ source('raw', 'events') }}
{% if is_incremental() %}where ts >= (select max(ts) - interval '1 hour' from {{ this }}){% endif %}
""",
    "balance": """{{ config(materialized='table') }}
select account, count(*) as n, sum(amount) as amount from {{ ref('events_appended') }} group by 1
""",
}


def big_project(root: Path, rows: int) -> Path:
    import duckdb

    from lint import scaffold

    scaffold(root, "scale")
    (root / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n      - name: events\n"
        "        config:\n          event_time: ts\n")
    for name, sql in MODELS.items():
        (root / "models" / f"{name}.sql").write_text(sql)
    with duckdb.connect(str(root / "scale.duckdb")) as con:
        con.execute("create schema raw")
        # 10 days of events, one every ~86 ms, in id order
        con.execute(f"create table raw.events as select i as id, "
                    f"timestamp '2026-01-01' + to_milliseconds(cast(i * (864000000 // {rows}) as bigint)) as ts, "
                    f"i % 1000 as account, round((i * 7919) % 10000 / 100.0, 2) as amount from range({rows}) t(i)")
    return root


def deps(project: Path) -> None:
    dbt = str(Path(sys.executable).parent / "dbt")
    subprocess.run([dbt, "deps", "--project-dir", str(project), "--profiles-dir", str(project),
                    "--log-path", str(project.parent / "logs")], check=True, capture_output=True)


def gameday_at_scale(tmp: Path, rows: int, steps: int, scenarios: str) -> int:
    t = time.perf_counter()
    project = big_project(tmp / "scale", rows)
    size = (project / "scale.duckdb").stat().st_size
    print(f"[scale] {rows:,} rows generated in {time.perf_counter() - t:.1f}s ({size / 1e6:.0f} MB file)", flush=True)
    deps(project)
    out = tmp / "out"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "rerun-safety"), "gameday", "--project-dir", str(project),
                           "--profiles-dir", str(project), "--steps", str(steps), "--scenarios", scenarios,
                           "--output-dir", str(out)], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(tmp), NO_COLOR="1"))
    wall = time.perf_counter() - t
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):
        print(f"[scale] game day failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return 1
    report = json.loads((out / "report.json").read_text())
    verdicts = {m["name"]: m["verdict"] for m in report["models"]}
    print(f"[scale] game day over {rows:,} rows, --steps {steps} --scenarios {scenarios}: exit {proc.returncode} "
          f"in {wall:.0f}s, {report['summary'].get('dbt_invocations', '?')} dbt invocations; verdicts {verdicts}")
    print(f"[scale] runner peak RSS {peak_kb / 1024:.0f} MB (RUSAGE_CHILDREN maxrss; before the run "
          f"{before / 1024:.0f} MB from dbt deps); target < 1024 MB: {'OK' if peak_kb < 1024 * 1024 else 'OVER'}")
    expected = {"events_upsert": "safe", "events_by_day": "safe", "events_appended": "duplicates",
                "balance": "drift"}
    ok = peak_kb < 1024 * 1024 and all(verdicts.get(k) == v for k, v in expected.items())
    if not ok:
        print(f"[scale] expected verdicts {expected}")
    return 0 if ok else 1


def plan_many(tmp: Path, n_models: int) -> int:
    from lint import generate

    project = tmp / "many"
    generate(project, n_models)
    # the game day needs time columns on the sources
    src = project / "models" / "sources.yml"
    src.write_text(src.read_text().replace(
        "      - name: events_", "      - config: {event_time: ts}\n        name: events_"))
    deps(project)
    from rerun_safety.gameday import Gameday, GamedayOptions
    from rerun_safety.project import Project

    t = time.perf_counter()
    proj = Project(project, str(project), None, None, tmp / "parse")
    gd = Gameday(GamedayOptions.build(project_dir=project, profiles_dir=str(project), work_root=tmp / "work"))
    plan = gd.make_diff_plan(proj)
    planned = time.perf_counter() - t
    print(f"[scale] {n_models}-model project planned in {planned:.1f}s: {len(plan.build)} models built, "
          f"{len(plan.judged)} judged, {sum(m.incremental for m in plan.build)} incremental, "
          f"{len(plan.timed_sources)} timed sources")
    try:
        from rerun_safety.lint import run_lint
    except ImportError:
        print("[scale] rerun_safety.lint.run_lint not available: lint skipped")
        return 0 if len(plan.build) == n_models else 1
    t = time.perf_counter()
    result = run_lint(project_dir=project, profiles_dir=project)
    print(f"[scale] linted in {time.perf_counter() - t:.1f}s: {len(result.findings)} findings on "
          f"{len({f.model for f in result.findings})} models")
    return 0 if len(plan.build) == n_models else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--scenarios", default="replay,rerun")
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--skip-gameday", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rerun_safety_scale_"))
    try:
        failed = 0
        if not a.skip_gameday:  # first: lint may start a child process of its own
            failed |= gameday_at_scale(tmp, a.rows, a.steps, a.scenarios)
        failed |= plan_many(tmp, a.models)
        return failed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
