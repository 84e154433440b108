"""What a game day costs against one plain `dbt build` of the same project, side by side in one run.

    .venv/bin/python benchmarks/gameday_vs_build.py [--threads 1 ...] [--projects example,heavy,wide]
                                                    [--models 1000] [--incremental 50]

Three DuckDB projects: the example (examples/shop); `heavy`, a young team's shape where most models are
incremental (40 models: a deduplicated staging view, 30 incremental models in six shapes over it, 9 marts);
`wide`, a generated project of --models models, --incremental of them incremental (merge by key over a
one-day lookback: safe), each followed by a chain of views and tables that read it. For each, as a user
runs them (CLI processes, in a copy of the project): `dbt build` (which leaves its target/ folder, as a
user's does), then `rerun-safety gameday` as it comes (--threads: the machine's CPU count; `heavy` with
`--batch-size day --steps 4`) and with each --threads given; printed: the wall times and their ratio to
the build (the target is <= 2x), the game day's dbt invocations and model executions (report.json), where
its time went (summary.cost), and the bytes its sandboxes held (the run's folder kept with
--keep-sandboxes, measured, then removed).
"""
from __future__ import annotations

import argparse
import os
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.gameday import SHOP, copy_project, dbt_deps, shop_generator  # noqa: E402
from rerun_safety.gameday.options import default_threads  # noqa: E402

BIN = Path(sys.executable).parent


def generated_project(root: Path, n_models: int, n_incremental: int, days: int = 30, per_day: int = 2000) -> Path:
    """n_incremental incremental models over raw.events, the others views and tables in chains below them."""
    import duckdb

    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: gen\nversion: '1.0'\nconfig-version: 2\nprofile: gen\n"
                                          "models:\n  gen:\n    +materialized: view\n")
    (root / "profiles.yml").write_text(f"gen:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
                                       f"      path: {root / 'gen.duckdb'}\n      schema: analytics\n      threads: 1\n")
    (root / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n"
        "      - name: events\n        config: {event_time: event_time}\n")
    per_chain = max((n_models - n_incremental) // n_incremental, 0)
    for i in range(n_incremental):
        (root / "models" / f"inc_{i:02d}.sql").write_text(
            "{{ config(materialized='incremental', unique_key='event_id', incremental_strategy='merge') }}\n"
            f"select event_id, user_id, amount * {i + 1} as amount, event_time from {{{{ source('raw', 'events') }}}}\n"
            f"where user_id % {n_incremental} = {i}\n"
            "{% if is_incremental() %}and event_time >= (select max(event_time) - interval '1 day' from {{ this }})"
            "{% endif %}\n")
        parent = f"inc_{i:02d}"
        for j in range(per_chain):
            name = f"m_{i:02d}_{j:02d}"
            body = (f"select user_id, count(*) as n, sum(amount) as amount from {{{{ ref('{parent}') }}}} group by 1\n"
                    if j == 0 else f"select user_id, n, amount * 2 as amount from {{{{ ref('{parent}') }}}}\n")
            config = "{{ config(materialized='table') }}\n" if j % 3 == 0 else ""
            (root / "models" / f"{name}.sql").write_text(config + body)
            parent = name
    start = dt.datetime(2026, 1, 1)
    with duckdb.connect(str(root / "gen.duckdb")) as con:
        con.execute("create schema raw")
        con.execute(f"create table raw.events as select i as event_id, i % 997 as user_id, (i % 89) * 1.5 as amount, "
                    f"timestamp '{start:%Y-%m-%d}' + to_seconds(cast(i * 86400 / {per_day} as bigint)) as event_time "
                    f"from range({days * per_day}) t(i)")
    return root


# the six incremental shapes of the `heavy` project: five safe on a rerun (keyed over a lookback or a window);
# `keyed_append`, a `>=` watermark on the latest time without a lookback, loses the rest of a half-committed
# batch (the game day finds 5 of them and the 3 marts over them):
# (name, config, the incremental filter or None)
THIS = "{{ this }}"
HEAVY_SHAPES = (
    ("merge", "{{ config(materialized='incremental', unique_key='event_id', incremental_strategy='merge') }}",
     "event_time >= (select max(event_time) - interval '1 day' from " + THIS + ")"),
    ("delete_insert", "{{ config(materialized='incremental', unique_key='event_id', "
     "incremental_strategy='delete+insert') }}", "event_time >= (select max(event_time) - interval '2 days' from "
     + THIS + ")"),
    ("by_user_day", "{{ config(materialized='incremental', unique_key=['event_id', 'user_id'], "
     "incremental_strategy='delete+insert') }}", "cast(event_time as date) >= (select max(cast(event_time as date)) "
     "- interval '1 day' from " + THIS + ")"),
    ("by_day", "{{ config(materialized='incremental', unique_key=['user_id', 'day'], "
     "incremental_strategy='delete+insert') }}", None),
    ("recent", "{{ config(materialized='incremental', unique_key='event_id', incremental_strategy='merge') }}",
     "event_time >= current_date - interval '3 days'"),
    ("keyed_append", "{{ config(materialized='incremental', unique_key='event_id', incremental_strategy='merge') }}",
     "event_time >= (select max(event_time) from " + THIS + ")"),
)


def heavy_project(root: Path, days: int = 30, per_day: int = 2000) -> Path:
    """40 models: stg_events (a view deduplicating raw.events by event_id), 30 incremental models in the six
    shapes above (five of each, each over its own share of users), 9 marts (tables and views) over them."""
    import duckdb

    (root / "models").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: heavy\nversion: '1.0'\nconfig-version: 2\nprofile: heavy\n"
                                          "models:\n  heavy:\n    +materialized: view\n")
    (root / "profiles.yml").write_text(f"heavy:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
                                       f"      path: {root / 'heavy.duckdb'}\n      schema: analytics\n      threads: 1\n")
    (root / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n"
        "      - name: events\n        config: {event_time: event_time}\n")
    (root / "models" / "stg_events.sql").write_text(
        "select event_id, user_id, amount, event_time from (select *, row_number() over (partition by event_id "
        "order by event_time desc, amount desc) as rs_n from {{ source('raw', 'events') }}) where rs_n = 1\n")
    names = []
    for i in range(30):
        shape, config, window = HEAVY_SHAPES[i % len(HEAVY_SHAPES)]
        name = f"inc_{shape}_{i:02d}"
        names.append(name)
        stg = "{{ ref('stg_events') }}"
        if shape == "by_day":
            body = ("select user_id, cast(event_time as date) as day, count(*) as n, sum(amount) as amount from "
                    + stg + f" where user_id % 30 = {i}\n{{% if is_incremental() %}}and cast(event_time as date) >= "
                    "(select max(day) - interval '1 day' from " + THIS + "){% endif %}\ngroup by 1, 2\n")
        else:
            body = (f"select event_id, user_id, amount * {i + 1} as amount, event_time from " + stg
                    + f"\nwhere user_id % 30 = {i}\n"
                    + ("{% if is_incremental() %}and " + window + "{% endif %}\n" if window else ""))
        (root / "models" / f"{name}.sql").write_text(config + "\n" + body)
    for j in range(9):
        parts = names[j::9]
        union = "\nunion all\n".join(f"select user_id, amount from {{{{ ref('{n}') }}}}" for n in parts)
        config = "{{ config(materialized='table') }}\n" if j % 2 == 0 else ""
        (root / "models" / f"mart_{j}.sql").write_text(
            config + f"select user_id, count(*) as n, sum(amount) as amount from (\n{union}\n) group by 1\n")
    start = dt.datetime(2026, 1, 1)
    with duckdb.connect(str(root / "heavy.duckdb")) as con:
        con.execute("create schema raw")
        # one event in 50 delivered twice (the staging view keeps one)
        con.execute(f"create table raw.events as select i as event_id, i % 997 as user_id, (i % 89) * 1.5 as amount, "
                    f"timestamp '{start:%Y-%m-%d}' + to_seconds(cast(i * 86400 / {per_day} as bigint)) as event_time "
                    f"from range({days * per_day}) t(i)")
        con.execute("insert into raw.events select * from raw.events where event_id % 50 = 0")
    return root


def dbt_build(project: Path) -> tuple[int, float]:
    dbt = [str(BIN / "dbt"), "build", "--project-dir", str(project), "--profiles-dir", str(project), "--quiet"]
    t = time.perf_counter()
    build = subprocess.run(dbt, capture_output=True, text=True, cwd=project)
    return build.returncode, time.perf_counter() - t


def measure(label: str, project: Path, threads: int | None, tmp: Path, build: tuple[int, float],
            extra: tuple[str, ...] = ()) -> dict:
    tag = f"{label.replace(' ', '_').replace('/', '_')}_{threads or 'default'}"
    out, work = tmp / f"{tag}_out", tmp / f"{tag}_work"
    game = [str(BIN / "rerun-safety"), "gameday", "--project-dir", str(project), "--profiles-dir", str(project),
            "--output-dir", str(out), "--keep-sandboxes", *(["--threads", str(threads)] if threads else []), *extra]
    work.mkdir()
    t = time.perf_counter()
    # the sandboxes live under $TMPDIR/rerun_safety-<uid>: here, to be measured
    run = subprocess.run(game, capture_output=True, text=True, cwd=project, env={**os.environ, "TMPDIR": str(work)})
    game_wall = time.perf_counter() - t
    report = json.loads((out / "report.json").read_text())
    held = sum(f.stat().st_size for f in work.rglob("*") if f.is_file()) if work.exists() else 0
    shutil.rmtree(work, ignore_errors=True)
    return {"label": label, "threads": threads or f"{default_threads()} (default)", "build_rc": build[0],
            "build_s": build[1], "gameday_rc": run.returncode,
            "gameday_s": game_wall, "invocations": report["summary"]["dbt_invocations"],
            "model_runs": sum(i["nodes"] for i in report["extra"]["invocations"]),
            "models": report["summary"]["models"], "unsafe": report["summary"]["unsafe"], "bytes": held,
            "cost": report["summary"].get("cost")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="*", default=[1],
                    help="game days with these --threads too, beside the default (none: the default only)")
    ap.add_argument("--projects", default="example,heavy,wide", help="which of example, heavy, wide (comma-separated)")
    ap.add_argument("--models", type=int, default=1000, help="models of the wide project")
    ap.add_argument("--incremental", type=int, default=50, help="incremental models of the wide project")
    args = ap.parse_args()
    wanted = [p.strip() for p in args.projects.split(",") if p.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="rs_bench_vs_build_"))
    projects: list[tuple[str, Path, tuple[str, ...]]] = []
    if "example" in wanted:
        shop = copy_project(SHOP, tmp / "shop")
        shop_generator().load_duckdb(str(shop / "shop.duckdb"))
        dbt_deps(shop, shop)
        projects.append(("example", shop, ()))
    if "heavy" in wanted:
        projects.append(("heavy 40/30", heavy_project(tmp / "heavy"), ("--batch-size", "day", "--steps", "4")))
    if "wide" in wanted:
        projects.append((f"wide {args.models}/{args.incremental}",
                         generated_project(tmp / "wide", args.models, args.incremental), ()))
    rows = []
    for label, project, extra in projects:
        build = dbt_build(project)  # a user's build: it leaves target/ (and dbt's partial-parse state)
        rows += [measure(label, project, threads, tmp, build, extra) for threads in [None, *args.threads]]
    print("DuckDB; each `dbt build` and game day a CLI process, one run each; the build with the profile's threads")
    print(f"{'project':>16} {'models':>6} {'threads':>11} {'dbt build s':>11} {'game day s':>10} {'ratio':>6} "
          f"{'dbt calls':>9} {'model runs':>10} {'sandbox MB':>10} {'unsafe':>6}")
    for r in rows:
        print(f"{r['label']:>16} {r['models']:>6} {r['threads']:>11} {r['build_s']:>11.1f} {r['gameday_s']:>10.1f} "
              f"{r['gameday_s'] / r['build_s']:>5.1f}x {r['invocations']:>9} {r['model_runs']:>10} "
              f"{r['bytes'] / 1e6:>10.1f} {r['unsafe']:>6}")
        if r["cost"]:  # where the game day's time went (summary.cost), summed over its processes
            c = r["cost"]
            print(f"{'':>16} split: parse {c['parse_s']:.1f} s, dbt start-up {c['dbt_startup_s']:.1f} s, model execution "
                  f"{c['model_execution_s']:.1f} s, copies {c['copies_s']:.1f} s, judging {c['judging_s']:.1f} s, "
                  f"reports {c['reports_s']:.1f} s (work {c['work_s']:.1f} s)")
        if r["build_rc"] not in (0,) or r["gameday_rc"] not in (0, 1):
            print(f"  exit codes: dbt build {r['build_rc']}, game day {r['gameday_rc']}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
