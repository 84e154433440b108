"""A wide model's diff: two tables of --columns columns and --rows rows, --changed rows changed in
one column, keyed on id, on DuckDB and on PostgreSQL (a throwaway server).

    .venv/bin/python benchmarks/diff_wide.py [--rows 200000] [--columns 150] [--changed 1000] [--rounds 3]

Prints, side by side in one run (best of --rounds, the two run alternately): one checksum pass over both tables (count and
sum of a row hash, each side), the game day's diff of them (`diff_relations`, keyed, as a scenario
runs it), the columns it names, and the column search as it was before (two scalar subqueries per
column, each a scan), with each one's ratio to the checksum pass.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def build(con, engine: str, rows: int, columns: int, changed: int) -> None:
    cols = ", ".join(f"c{i} {'double precision' if i % 5 == 4 else 'integer'}" for i in range(columns - 1))
    values = ", ".join(f"(g * {i + 7}) % 1009" + (" * 0.5" if i % 5 == 4 else "") for i in range(columns - 1))
    series = f"range({rows}) t(g)" if engine == "duckdb" else f"generate_series(0, {rows - 1}) g"
    for name in ("wide_l", "wide_r"):
        con.execute(f"drop table if exists {name}")
        con.execute(f"create table {name} (id integer, {cols})")
        con.execute(f"insert into {name} select g, {values} from {series}")
    step = max(rows // changed, 1)
    con.execute(f"update wide_r set c42 = c42 + 1 where id % {step} = 0 and id < {step * changed}")
    if engine == "postgres":
        con.execute("vacuum analyze wide_l")
        con.execute("vacuum analyze wide_r")


def both(first, second, rounds: int):
    """The best time of each, run alternately (a slow spell of the shared machine falls on both alike)."""
    t1, t2, out = float("inf"), float("inf"), None
    for _ in range(rounds):
        t = time.perf_counter()
        first()
        t1 = min(t1, time.perf_counter() - t)
        t = time.perf_counter()
        out = second()
        t2 = min(t2, time.perf_counter() - t)
    return t1, (t2, out)


def best(fn, rounds: int):
    times, out = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def measure(engine: str, con, schema: str, args) -> None:
    from rerun_safety.diff import diff_relations
    from rerun_safety.diff.core import _table
    from rerun_safety.diff.results import Side
    from rerun_safety.diff.sql import int_sum, side_source, columns_of, row_hash

    build(con, engine, args.rows, args.columns, args.changed)
    d = con.dialect
    cols = [c for c, _ in columns_of(con, _table((schema, "wide_l")))]

    def checksum():
        h = row_hash(cols, d)
        return con.fetchone(f"select * from (select count(*), {int_sum(h, d)} from {schema}.wide_l) a "
                            f"cross join (select count(*), {int_sum(h, d)} from {schema}.wide_r) b")

    def ours():
        return diff_relations(con, (schema, "wide_l"), (schema, "wide_r"), key=("id",))

    def old_search():  # the column search before: two scalar subqueries (scans) per column
        left, right = Side(con, _table((schema, "wide_l"))), Side(con, _table((schema, "wide_r")))
        parts = [f"(select {int_sum(row_hash([c], d), d)} from {side_source(left, d)}), "
                 f"(select {int_sum(row_hash([c], d), d)} from {side_source(right, d)})" for c in cols]
        return con.fetchone("select " + ", ".join(parts))

    base, (t_ours, result) = both(checksum, ours, args.rounds)
    t_old, _ = best(old_search, 1)
    print(f"{engine}: {args.rows:,} rows x {args.columns} columns, {result.changed_rows:,} changed rows")
    print(f"  checksum pass over both tables  {base:7.3f} s  1.00x")
    print(f"  our diff (keyed)                {t_ours:7.3f} s  {t_ours / base:.2f}x   names {list(result.differing_columns)}")
    print(f"  old column search alone         {t_old:7.3f} s  {t_old / base:.2f}x   ({2 * len(cols)} scans)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--columns", type=int, default=150)
    ap.add_argument("--changed", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--skip-postgres", action="store_true")
    args = ap.parse_args()
    import tempfile

    from rerun_safety.warehouse.duckdb.engine import DuckDBConnection

    tmp = Path(tempfile.mkdtemp(prefix="rs_bench_wide_"))
    con = DuckDBConnection(str(tmp / "wide.duckdb"))
    try:
        measure("duckdb", con, "main", args)
    finally:
        con.close()
    if args.skip_postgres:
        return
    from support.common import start_pg_server

    from rerun_safety.warehouse.postgres.engine import PgConnection

    server = start_pg_server()
    try:
        dbname = server.create_database("wide")
        con = PgConnection({"host": server.host, "port": server.port, "user": server.user}, dbname)
        try:
            measure("postgres", con, "public", args)
        finally:
            con.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
