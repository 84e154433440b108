"""Benchmark: replace one day of a table of N rows over D daily partitions with
`partition_overwrite` vs `delete+insert` (keyed by unique_key) vs `merge`, on DuckDB and
PostgreSQL, side by side in one run, reported as ratios to delete+insert.

Each target starts as a copy of the same table (dbt only checks that an incremental target
exists); every timed dbt run replaces the same day with restated rows (same ids, new values).
Two times per run: the model's execution time reported by dbt (temp table, the strategy's SQL,
commit; on DuckDB also the checkpoint at close), and the strategy's own statements alone (the
delete/insert/merge statement, plus the query partition_overwrite reads the batch's partitions
with), taken from dbt's SQLQueryStatus events. The part the strategies share (the temp table,
the commit) is ~80 % of the model time on DuckDB and varies by +-0.1 s between runs, so the
statement times are the sharper comparison. Best and median of --repeat runs, strategies
interleaved; ratios to delete+insert for both. A throwaway PostgreSQL server is started and
removed by the script.

    .venv/bin/python benchmarks/strategy.py [--rows 10000000] [--days 100] [--repeat 7] [--layouts clustered,interleaved]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

from support.common import duckdb_profile, postgres_profile, start_pg_server  # noqa: E402

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

SHIM = (REPO_ROOT / "integration_tests" / "macros" / "get_incremental_partition_overwrite_sql.sql").read_text()
BODY = """
select id, day, ts, v + 1 as v from {{ target.schema }}.bench_raw
{% if is_incremental() %} where day = cast('{{ var("day") }}' as date) {% endif %}
"""
MODELS = {
    "partition_overwrite": "{{ config(materialized='incremental', incremental_strategy='partition_overwrite', partition_key='day') }}",
    "partition_overwrite (ts, day)": "{{ config(materialized='incremental', incremental_strategy='partition_overwrite', partition_key={'field': 'ts', 'granularity': 'day'}) }}",
    "delete+insert": "{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}",
    "merge": "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}",
}
TABLES = {"partition_overwrite": "bench_po", "partition_overwrite (ts, day)": "bench_po_ts",
          "delete+insert": "bench_di", "merge": "bench_merge"}


def connect(engine, output):
    if engine == "duckdb":
        import duckdb

        return duckdb.connect(output["path"])
    import psycopg2

    conn = psycopg2.connect(host=output["host"], port=output["port"], user=output["user"],
                            dbname=output["dbname"])
    conn.autocommit = True
    return conn


def execute(engine, output, statements):
    conn = connect(engine, output)
    try:
        cur = conn.cursor()
        for stmt in statements:
            cur.execute(stmt)
        if engine == "duckdb":
            cur.execute("checkpoint")
    finally:
        conn.close()


def build_data(engine, output, rows, days, layout):
    """`clustered`: the rows of a day are stored together, as in a table loaded day by day;
    `interleaved`: every day is spread over the whole table (no storage block can be skipped)."""
    series = f"range({rows})" if engine == "duckdb" else f"generate_series(0, {rows - 1})"
    day_of = f"(i % {days})" if layout == "interleaved" else f"(i / {-(-rows // days)})"
    statements = [
        "drop table if exists bench_raw",
        f"create table bench_raw as select i as id, cast(date '2024-01-01' + cast({day_of} as integer) as date) as day, "
        f"cast(date '2024-01-01' + cast({day_of} as integer) as timestamp) + (i % 86400) * interval '1 second' as ts, "
        f"cast(i % 1000 as double precision) as v from {series} t(i)",
    ]
    for table in TABLES.values():
        statements += [f"drop table if exists {table}", f"create table {table} as select * from bench_raw"]
    if engine == "postgres":
        statements.append("vacuum analyze")
    execute(engine, output, statements)


def run_engine(engine, output, workdir, args):
    from dbt.cli.main import dbtRunner

    project = Path(workdir) / f"bench_{engine}"
    (project / "models").mkdir(parents=True)
    (project / "macros").mkdir()
    (project / "macros" / "get_incremental_partition_overwrite_sql.sql").write_text(SHIM)
    for name, config in MODELS.items():
        (project / "models" / f"{TABLES[name]}.sql").write_text(config + BODY)
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "bench", "version": "1.0", "config-version": 2, "profile": "bench"}))
    (project / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    (project / "profiles.yml").write_text(yaml.safe_dump(
        {"bench": {"target": "dev", "outputs": {"dev": output}}}))
    common = ["--project-dir", str(project), "--profiles-dir", str(project), "--no-write-json",
              "--log-level", "warn", "--log-level-file", "none"]
    for cmd in (["deps"], ["parse"]):
        res = dbtRunner().invoke([*cmd, *common])
        assert res.success, res.exception
    manifest = res.result
    return {layout: run_layout(engine, output, manifest, common, layout, args)
            for layout in args.layouts.split(",")}


def run_layout(engine, output, manifest, common, layout, args):
    from dbt.cli.main import dbtRunner

    t = time.time()
    build_data(engine, output, args.rows, args.days, layout)
    print(f"  {engine}, {layout}: built {args.rows:,} rows x {len(TABLES) + 1} tables in {time.time() - t:.1f}s", flush=True)

    times = {name: [] for name in MODELS}
    stmt_times = {name: [] for name in MODELS}
    names = list(MODELS)
    statements = []

    def on_event(event):
        # the strategy's statements: dbt's main statement, and partition_overwrite's partition read
        name = event.info.name
        if name == "SQLQuery":
            sql = event.data.sql.lower()
            statements.append([("rerun_safety partition_overwrite" in sql or "rerun_safety_parts" in sql
                                or ("create " not in sql and any(w in sql for w in ("delete from", "merge into", "insert into")))), None])
        elif name == "SQLQueryStatus" and statements and statements[-1][1] is None:
            statements[-1][1] = event.data.elapsed

    for rnd in range(args.repeat):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for name in order:
            if engine == "postgres":
                execute(engine, output, [f"vacuum analyze {TABLES[name]}"])
            day = f"2024-01-{(rnd % 28) + 1:02d}"
            statements.clear()
            res = dbtRunner(manifest=manifest, callbacks=[on_event]).invoke(
                ["run", "--select", TABLES[name], "--vars", f"{{day: '{day}'}}", *common])
            assert res.success, (name, res.exception, [r.message for r in res.result.results])
            times[name].append(res.result.results[0].execution_time)
            strategy_sql = [elapsed for is_strategy, elapsed in statements if is_strategy]
            assert strategy_sql and None not in strategy_sql, (name, statements)
            stmt_times[name].append(sum(strategy_sql))
    check = execute_fetch(engine, output, [f"select count(*), sum(v) from {t}" for t in TABLES.values()])
    assert len(set(check)) == 1, f"strategies disagree: {check}"
    return {name: (min(values), statistics.median(values), min(stmt_times[name]), statistics.median(stmt_times[name]))
            for name, values in times.items()}


def execute_fetch(engine, output, queries):
    conn = connect(engine, output)
    try:
        cur = conn.cursor()
        out = []
        for q in queries:
            cur.execute(q)
            out.append(tuple(cur.fetchone()))
        return out
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--engines", default="duckdb,postgres")
    parser.add_argument("--layouts", default="clustered,interleaved")
    args = parser.parse_args()
    print(f"rows={args.rows:,} days={args.days} (one day = {args.rows // args.days:,} rows replaced), "
          f"repeat={args.repeat}, seconds of dbt's model execution", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="rerun_safety_bench_") as workdir:
        server = None
        try:
            for engine in args.engines.split(","):
                if engine == "duckdb":
                    output = duckdb_profile(Path(workdir) / "bench.duckdb", keep_open=False)
                else:
                    server = start_pg_server()
                    dbname = server.create_database("bench")
                    output = postgres_profile(server, dbname)
                results[engine] = run_engine(engine, output, workdir, args)
        finally:
            if server is not None:
                server.stop()
    print()
    print("| engine | layout | strategy | model s best / median | ratio (best / median) | strategy SQL s best / median | ratio (best / median) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for engine, layouts in results.items():
        for layout, times in layouts.items():
            base = times["delete+insert"]
            for name, t in times.items():
                print(f"| {engine} | {layout} | {name} | {t[0]:.2f} / {t[1]:.2f} | {t[0] / base[0]:.2f} / {t[1] / base[1]:.2f} "
                      f"| {t[2]:.3f} / {t[3]:.3f} | {t[2] / base[2]:.2f} / {t[3] / base[3]:.2f} |")


if __name__ == "__main__":
    main()
