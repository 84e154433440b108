"""Benchmark of `rerun-safety diff` against EXCEPT ALL, a keyed join, a checksum scan, pandas and peers.

Builds two tables of --rows rows on DuckDB (1,000 rows added, 1,000 removed, 1,000 changed),
a copy for the identical case and a copy whose double column moved by 1e-14 of its value (float
noise, equal within the default tolerance: the diff must call it identical); on PostgreSQL (a
throwaway server) the same with --pg-rows.
Every method runs in its own process, so the peak memory (ru_maxrss from wait4) is per method.
"op s" is the time of the comparison inside the process, "proc s" the whole process; cheap
methods run 3 times (the checksum scans and our keyed diffs 7), round robin (one run of each
per round, so that a slow spell of the shared machine falls on all alike), best time kept; the
slow ones once.
Peers (reladiff, SQLMesh) run from their own venvs under /tmp, never from the project's.

    nice .venv/bin/python benchmarks/diff.py [--rows 10000000] [--pg-rows 2000000] [--skip-peers]
                                            [--skip-pandas] [--skip-duckdb] [--skip-postgres] [--quick]
    nice .venv/bin/python benchmarks/diff.py --engine spark [--spark-rows 2000000] [--rounds 3]
                                            [--driver-memory 4g] [--profile]

--quick runs only the checksum scans and our diff (no EXCEPT ALL, join, CLI, pandas or peers):
a short before/after comparison of the diff itself.

--engine spark: one process with one in-process Spark (dbt-spark `method: session`, local[2], a
temporary warehouse and metastore), the same tables as parquet; every method runs --rounds times,
alternating, best time kept (Spark starts once: ~10 s, not counted). Our diff goes through
`run_diff` with a session profile, as the CLI does. --profile lists each Spark query of our diff
with its time.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["id", "day", "customer", "amount", "status", "ts"]
PEERS = {"reladiff": ("/tmp/peer-reladiff", "reladiff[duckdb]"), "sqlmesh": ("/tmp/peer-sqlmesh", "sqlmesh")}


def build_sql(n: int, engine: str) -> list[str]:
    step = max(1, n // 1000)
    if engine == "duckdb":
        gen = (f"select i as id, (i % 365)::int as day, 'cust_' || (i % 100000) as customer, "
               f"(i * 0.37)::double as amount, case i % 4 when 0 then 'new' when 1 then 'paid' else 'shipped' end "
               f"as status, timestamp '2024-01-01' + to_seconds(i) as ts from range({n}) t(i)")
        drop = "drop table if exists {}"
    else:
        gen = (f"select i::bigint as id, (i % 365)::int as day, 'cust_' || (i % 100000) as customer, "
               f"(i * 0.37)::float8 as amount, case i % 4 when 0 then 'new' when 1 then 'paid' else 'shipped' end "
               f"as status, timestamp '2024-01-01' + i * interval '1 second' as ts from generate_series(0, {n - 1}) i")
        drop = "drop table if exists {}"
    return [drop.format("a"), drop.format("b"), drop.format("c"),
            f"create table a as {gen}",
            "create table c as select * from a",
            f"create table b as select * from a where id % {step} <> 17 % {step}",
            f"update b set amount = amount + 1 where id % {step} = 5 % {step}",
            f"insert into b select id + {2 * n}, day, customer, amount, status, ts from a where id % {step} = 9 % {step}",
            *noise_sql()]


def noise_sql() -> list[str]:
    """Table d: a with every amount moved by 1e-14 of itself, as a sum in another order moves it."""
    return ["drop table if exists d",
            "create table d as select id, day, customer, amount * (1 + 1e-14) as amount, status, ts from a"]


# ----------------------------------------------------------------------------- child methods

def _duck(path: str):
    import duckdb
    con = duckdb.connect(path, read_only=True)
    con.execute("set enable_progress_bar = false")
    return con


def child(method: str, target: str, extra: str) -> dict:
    """Runs in its own process; returns counts so that every method's answer can be checked."""
    t0 = time.perf_counter()
    out: dict = {}
    left, right = extra.split(",") if extra else ("a", "b")
    if method.startswith("ours"):
        sys.path.insert(0, str(ROOT / "python_runner"))
        from rerun_safety.diff_command import run_diff

        t0 = time.perf_counter()
        key = ("id",) if method == "ours_keyed" else ()
        r = run_diff(f"{target}:main.{left}", f"{target}:main.{right}", key=key).to_dict()
        out = {k: r[k] for k in ("identical", "only_left", "only_right", "changed", "rows_only_left", "rows_only_right")}
    elif method == "checksum":
        con = _duck(target)
        t0 = time.perf_counter()
        row = con.execute(f"select (select count(*) || ':' || sum(hash(*columns(*))::hugeint) from {left}), "
                          f"(select count(*) || ':' || sum(hash(*columns(*))::hugeint) from {right})").fetchone()
        out = {"equal": row[0] == row[1]}
    elif method == "except_all":
        con = _duck(target)
        t0 = time.perf_counter()
        row = con.execute(f"select (select count(*) from (select * from {left} except all select * from {right})), "
                          f"(select count(*) from (select * from {right} except all select * from {left}))").fetchone()
        out = {"only_left": row[0], "only_right": row[1]}
    elif method == "full_join":
        con = _duck(target)
        t0 = time.perf_counter()
        changed = " or ".join(f"l.{c} is distinct from r.{c}" for c in COLUMNS[1:])
        row = con.execute(f"select count(*) filter (where r.id is null), count(*) filter (where l.id is null), "
                          f"count(*) filter (where l.id = r.id and ({changed})) "
                          f"from {left} l full outer join {right} r on l.id = r.id").fetchone()
        out = {"only_left": row[0], "only_right": row[1], "changed": row[2]}
    elif method == "pandas":
        con = _duck(target)
        t0 = time.perf_counter()
        a, b = con.table(left).df(), con.table(right).df()
        m = a.merge(b, how="outer", on=COLUMNS, indicator=True)
        counts = m["_merge"].value_counts()
        out = {"only_left": int(counts.get("left_only", 0)), "only_right": int(counts.get("right_only", 0))}
    elif method.startswith("pg_"):
        sys.path.insert(0, str(ROOT / "python_runner"))
        import psycopg2
        params = json.loads(target)
        dsn = {k: params[k] for k in ("host", "port", "user")}
        con = psycopg2.connect(dbname=params["db"], options="-c default_transaction_read_only=on", **dsn)
        con.autocommit = True
        cur = con.cursor()
        t0 = time.perf_counter()
        if method in ("pg_ours_keyed", "pg_ours_unkeyed", "pg_ours_across", "pg_ours_keyed_scan"):
            from rerun_safety.diff import Side, compare, parse_where
            from rerun_safety.warehouse.base import table
            from rerun_safety.warehouse.postgres.engine import PgConnection
            lcon = PgConnection(dsn, params["db"], read_only=True)
            rcon = PgConnection(dsn, params["db2"], read_only=True) if method == "pg_ours_across" else lcon
            # a (no-op) filter: no table statistics apply, so a min/max scan sizes the buckets
            where = parse_where("true", "postgres") if method == "pg_ours_keyed_scan" else None
            d = compare(Side(lcon, table("public", left), where), Side(rcon, table("public", right), where),
                        key=() if method == "pg_ours_unkeyed" else ("id",))
            out = {"identical": d.identical, "rows_only_left": d.missing_rows, "rows_only_right": d.extra_rows,
                   "changed": d.changed_keys}
        elif method == "pg_checksum":
            cur.execute(f"select (select count(*) || ':' || sum(hash_record_extended(x, 0)) from {left} x), "
                        f"(select count(*) || ':' || sum(hash_record_extended(y, 0)) from {right} y)")
            row = cur.fetchone()
            out = {"equal": row[0] == row[1]}
        elif method == "pg_except_all":
            cur.execute(f"select (select count(*) from (select * from {left} except all select * from {right}) x), "
                        f"(select count(*) from (select * from {right} except all select * from {left}) y)")
            row = cur.fetchone()
            out = {"only_left": row[0], "only_right": row[1]}
    else:
        raise SystemExit(f"unknown method {method}")
    out["op_seconds"] = time.perf_counter() - t0
    return out


# ----------------------------------------------------------------------------- Spark

def spark_build_sql(n: int) -> list[str]:
    """The DuckDB tables' rows as parquet tables (Spark has no UPDATE: b is built in one query)."""
    step = max(1, n // 1000)
    gen = (f"select id, cast(id % 365 as int) as day, concat('cust_', id % 100000) as customer, "
           f"cast(id * 0.37 as double) as amount, case id % 4 when 0 then 'new' when 1 then 'paid' else 'shipped' end "
           f"as status, timestamp'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as ts from range({n})")
    return [f"create table a using parquet as {gen}",
            "create table c using parquet as select * from a",
            f"create table b using parquet as select id, day, customer, "
            f"case when id % {step} = 5 % {step} then amount + 1 else amount end as amount, status, ts "
            f"from a where id % {step} <> 17 % {step} union all "
            f"select id + {2 * n}, day, customer, amount, status, ts from a where id % {step} = 9 % {step}",
            "create table d using parquet as select id, day, customer, amount * (1 + 1e-14) as amount, status, ts "
            "from a"]


def spark_bench(rows: int, rounds: int, driver_memory: str, profile: bool) -> None:
    import shutil
    import tempfile

    import yaml

    sys.path.insert(0, str(ROOT / "python_runner"))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = Path(tempfile.mkdtemp(prefix="rerun_safety_spark_bench_"))
    params = {"spark.master": "local[2]", "spark.driver.memory": driver_memory,
              "spark.sql.warehouse.dir": str(root / "warehouse"),
              "spark.hadoop.javax.jdo.option.ConnectionURL":
                  f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
              "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
              "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
              "spark.sql.session.timeZone": "UTC"}
    try:
        from pyspark.sql import SparkSession

        import pyspark
        from rerun_safety.diff_command import run_diff
        from rerun_safety.warehouse.spark import engine as spark_sandbox

        t = time.perf_counter()
        builder = SparkSession.builder.appName("rerun_safety diff benchmark").enableHiveSupport()
        for k, v in params.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        started = time.perf_counter() - t
        t = time.perf_counter()
        for statement in spark_build_sql(rows):
            spark.sql(statement)
        built = time.perf_counter() - t
        print(f"Spark {pyspark.__version__} (session, local[2], driver memory {driver_memory}): {rows:,} rows per "
              f"table, started in {started:.1f} s, data ready in {built:.1f} s; cores: {os.cpu_count()}; "
              f"load average before: {os.getloadavg()[0]:.1f}\n")
        (root / "dbt_project.yml").write_text(yaml.safe_dump({"name": "b", "profile": "b", "version": "1"}))
        (root / "profiles.yml").write_text(yaml.safe_dump({"b": {"target": "dev", "outputs": {"dev": {
            "type": "spark", "method": "session", "host": "localhost", "schema": "default", "threads": 1,
            "server_side_parameters": params}}}}))

        queries: list[tuple[float, str]] = []
        run = spark_sandbox.SessionBackend.run

        def timed(self, sql):  # counts our diff's queries (benchmark only)
            t0 = time.perf_counter()
            try:
                return run(self, sql)
            finally:
                queries.append((time.perf_counter() - t0, sql))

        spark_sandbox.SessionBackend.run = timed
        cols = ", ".join(COLUMNS)

        def sql(text: str) -> dict:
            return {"rows": [tuple(r) for r in spark.sql(text).collect()]}

        def checksum(*tables: str) -> dict:
            res = sql(" union all ".join(f"select count(*), sum(cast(xxhash64({cols}) as decimal(38,0))) from {t}"
                                         for t in tables))
            return {"equal": len(set(res["rows"])) == 1} if len(tables) > 1 else {"rows": res["rows"][0][0]}

        def except_all() -> dict:
            row = sql("select (select count(*) from (select * from a except all select * from b)), "
                      "(select count(*) from (select * from b except all select * from a))")["rows"][0]
            return {"only_left": row[0], "only_right": row[1]}

        def ours(left: str, right: str, key: tuple[str, ...]) -> dict:
            queries.clear()
            r = run_diff(left, right, key=key, project_dir=str(root), profiles_dir=str(root)).to_dict()
            return {**{k: r[k] for k in ("identical", "only_left", "only_right", "changed", "rows_only_left",
                                         "rows_only_right")}, "queries": len(queries)}

        plan = [("checksum scan of one side (a)", lambda: checksum("a")),
                ("checksum scan of both (a vs b)", lambda: checksum("a", "b")),
                ("ours, keyed (--key id)", lambda: ours("a", "b", ("id",))),
                ("ours, no key", lambda: ours("a", "b", ())),
                ("EXCEPT ALL both ways", except_all),
                ("ours identical, keyed (a vs c)", lambda: ours("a", "c", ("id",))),
                ("ours identical, no key (a vs c)", lambda: ours("a", "c", ())),
                ("ours float noise, keyed (a vs d)", lambda: ours("a", "d", ("id",)))]
        results: dict[str, dict] = {}
        profiles: dict[str, list] = {}
        for i in range(rounds):
            for name, fn in plan:
                t0 = time.perf_counter()
                answer = fn()
                took = time.perf_counter() - t0
                best = results.get(name)
                if best is None or took < best["op_seconds"]:
                    results[name] = {**answer, "op_seconds": took}
                    if name.startswith("ours"):
                        profiles[name] = list(queries)
                print(f"  round {i + 1}: {name}: {took:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)
        print("\n| method (Spark) | best s | x one-side checksum | queries | answer |\n|---|---:|---:|---:|---|")
        base = results["checksum scan of one side (a)"]["op_seconds"]
        for name, r in results.items():
            answer = {k: v for k, v in r.items() if k not in ("op_seconds", "queries")}
            print(f"| {name} | {r['op_seconds']:.2f} | {r['op_seconds'] / base:.2f} | {r.get('queries', 1)} | "
                  f"{json.dumps(answer, default=str)} |")
        print(f"\nTargets (load average after: {os.getloadavg()[0]:.1f}):")
        op = {name: r["op_seconds"] for name, r in results.items()}
        for label, mine, ref, limit in [
                ("1,000-row keyed diff <= 0.5x EXCEPT ALL", op["ours, keyed (--key id)"], op["EXCEPT ALL both ways"], 0.5),
                ("1,000-row unkeyed diff <= 0.5x EXCEPT ALL", op["ours, no key"], op["EXCEPT ALL both ways"], 0.5),
                ("identical keyed <= 1.5x one checksum scan of one side", op["ours identical, keyed (a vs c)"],
                 op["checksum scan of one side (a)"], 1.5),
                ("identical unkeyed <= 1.5x one checksum scan of one side", op["ours identical, no key (a vs c)"],
                 op["checksum scan of one side (a)"], 1.5),
                # the measure of the DuckDB and PostgreSQL tables: one checksum pass over both sides,
                # the least any comparison of two tables reads
                ("identical keyed <= 1.5x one checksum scan of both", op["ours identical, keyed (a vs c)"],
                 op["checksum scan of both (a vs b)"], 1.5),
                ("identical unkeyed <= 1.5x one checksum scan of both", op["ours identical, no key (a vs c)"],
                 op["checksum scan of both (a vs b)"], 1.5)]:
            print(f"  {label}: {mine:.2f} / {ref:.2f} = {mine / ref:.2f}  {'OK' if mine / ref <= limit else 'MISSED'}")
        if profile:
            for name, qs in profiles.items():
                print(f"\n{name}: {len(qs)} queries, {sum(q[0] for q in qs):.2f} s")
                for took, text in qs:
                    print(f"  {took:6.2f} s  {' '.join(text.split())[:150]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------------- parent

def measured(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> dict:
    """Run a process and return wall time and its own peak RSS (wait4 on that pid)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    out_f, err_f = [], []
    import threading

    def pump(stream, sink):
        sink.append(stream.read())

    threads = [threading.Thread(target=pump, args=(proc.stdout, out_f)),
               threading.Thread(target=pump, args=(proc.stderr, err_f))]
    for t in threads:
        t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for t in threads:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"proc_seconds": time.perf_counter() - start, "stdout": out_f[0].decode(), "stderr": err_f[0].decode(),
            "rc": proc.returncode, "peak_mb": usage.ru_maxrss / 1024}


def interleaved(entries: list[tuple[str, tuple[str, str, str, int]]]) -> dict[str, dict]:
    """Python methods (name, (method, target, extra, runs)) run round robin, one run of each per
    round, so that a slow spell of the shared machine falls on all of them alike; each keeps the
    best of its runs (lowest times, highest peak memory)."""
    found: dict[str, dict] = {}
    for round_no in range(max((spec[3] for _n, spec in entries), default=0)):
        for name, (method, target, extra, runs) in entries:
            if round_no >= runs or "error" in found.get(name, {}):
                continue
            res = python_method(method, target, extra)
            best = found.get(name)
            if best is None or "error" in res:
                found[name] = res
            else:
                found[name] = {**best, "proc_seconds": min(best["proc_seconds"], res["proc_seconds"]),
                               "op_seconds": min(best["op_seconds"], res["op_seconds"]),
                               "peak_mb": max(best["peak_mb"], res["peak_mb"]), "runs": round_no + 1}
    return found


def python_method(method: str, target: str, extra: str = "", repeat: int = 1) -> dict:
    """Best of `repeat` runs (the machine is shared): lowest times, highest peak memory."""
    best: dict | None = None
    for _ in range(repeat):
        res = measured([sys.executable, __file__, "--child", method, "--target", target, "--extra", extra])
        if res["rc"] != 0:
            return {**res, "error": (res["stderr"].strip().splitlines() or ["failed"])[-1]}
        res = {**res, **json.loads(res["stdout"].strip().splitlines()[-1])}
        if best is None:
            best = res
        else:
            peak = max(best["peak_mb"], res["peak_mb"])
            best = {**best, "proc_seconds": min(best["proc_seconds"], res["proc_seconds"]),
                    "op_seconds": min(best["op_seconds"], res["op_seconds"]), "peak_mb": peak}
    best["runs"] = repeat
    return best


def ensure_peer(name: str) -> tuple[str | None, str]:
    venv, spec = PEERS[name]
    py = Path(venv) / "bin" / "python"
    if not py.exists():
        r = subprocess.run(["python3", "-m", "venv", venv], capture_output=True)
        if r.returncode != 0:
            return None, f"venv failed: {r.stderr.decode().strip()[-200:]}"
    check = subprocess.run([str(py), "-c", f"import {name}"], capture_output=True)
    if check.returncode != 0:
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", spec], capture_output=True, timeout=900)
        if r.returncode != 0:
            return None, f"pip install {spec} failed: {r.stderr.decode().strip().splitlines()[-1:]}"
    return str(py), ""


def peer_duckdb_file(py: str, ours: str, workdir: Path, name: str, rows: int) -> str:
    """A data file the peer's own duckdb can open (older duckdb cannot read files of duckdb 2.0)."""
    import duckdb

    theirs = subprocess.run([py, "-c", "import duckdb; print(duckdb.__version__)"], capture_output=True,
                            text=True).stdout.strip()
    if theirs.split(".")[0] == duckdb.__version__.split(".")[0]:
        return ours
    path = workdir / f"{name}.duckdb"
    if not path.exists():
        script = ("import duckdb, json, sys\ncon = duckdb.connect(sys.argv[1])\n"
                  "con.execute('set enable_progress_bar = false')\n"
                  "for s in json.loads(sys.argv[2]): con.execute(s)\ncon.close()")
        subprocess.run([py, "-c", script, str(path), json.dumps(build_sql(rows, "duckdb"))], check=True)
    return str(path)


def reladiff_method(py: str, path: str, algorithm: str) -> dict:
    exe = str(Path(py).parent / "reladiff")
    cols = [x for c in COLUMNS[1:] for x in ("-c", c)]
    res = measured([exe, f"duckdb:///{path}", "a", "b", "-k", "id", *cols, "-a", algorithm, "-s"])
    if res["rc"] != 0:
        return {**res, "error": (res["stderr"].strip().splitlines() or ["failed"])[-1]}
    # its -s summary: "N rows exclusive to table A ...", "... table B ...", "N rows updated"
    for line in res["stdout"].splitlines():
        words = line.split()
        if "exclusive to table A" in line:
            res["only_left"] = int(words[0])
        elif "exclusive to table B" in line:
            res["only_right"] = int(words[0])
        elif line.strip().endswith("rows updated"):
            res["changed"] = int(words[0])
    return res


SQLMESH_SCRIPT = textwrap.dedent('''
    import os, sys, time, json
    from sqlmesh import Context
    from sqlmesh.core.config import Config, ModelDefaultsConfig, GatewayConfig, DuckDBConnectionConfig
    project, db = sys.argv[1], sys.argv[2]
    config = Config(gateways={"local": GatewayConfig(connection=DuckDBConnectionConfig(database=db))},
                    default_gateway="local", model_defaults=ModelDefaultsConfig(dialect="duckdb"))
    ctx = Context(paths=project, config=config)
    t0 = time.perf_counter()
    diffs = ctx.table_diff(source="main.a", target="main.b", on=["id"], show=False)
    diff = diffs[0] if isinstance(diffs, list) else diffs
    rs = diff.row_diff()
    print(json.dumps({"only_left": int(rs.s_only_count), "only_right": int(rs.t_only_count),
                      "changed": int(rs.partial_match_count), "op_seconds": time.perf_counter() - t0}))
''')


def sqlmesh_method(py: str, path: str, workdir: Path) -> dict:
    project = workdir / "sqlmesh_project"
    (project / "models").mkdir(parents=True, exist_ok=True)
    (project / "models" / "m.sql").write_text("MODEL (name main.m, kind VIEW);\nSELECT 1 AS x\n")
    res = measured([py, "-c", SQLMESH_SCRIPT, str(project), path], cwd=str(project))
    if res["rc"] != 0:
        return {**res, "error": (res["stderr"].strip().splitlines() or ["failed"])[-1][:200]}
    return {**res, **json.loads(res["stdout"].strip().splitlines()[-1])}


def fmt_row(name: str, r: dict, base: float | None) -> str:
    if "error" in r:
        return f"| {name} | skipped: {r['error']} | | | | |"
    op = r.get("op_seconds")
    ratio = f"{r['proc_seconds'] / base:.2f}" if base else ""
    answer = {k: v for k, v in r.items() if k in ("identical", "equal", "only_left", "only_right", "changed",
                                                  "rows_only_left", "rows_only_right")}
    return (f"| {name} | {'' if op is None else f'{op:.2f}'} | {r['proc_seconds']:.2f} | {ratio} | "
            f"{r['peak_mb']:.0f} | {json.dumps(answer) if answer else ''} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--pg-rows", type=int, default=2_000_000)
    ap.add_argument("--workdir", default="/tmp/rerun_safety_diff_bench")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--skip-pandas", action="store_true")
    ap.add_argument("--skip-postgres", action="store_true")
    ap.add_argument("--skip-duckdb", action="store_true")
    ap.add_argument("--quick", action="store_true", help="only the checksum scans and our diff")
    ap.add_argument("--engine", choices=["duckdb-postgres", "spark"], default="duckdb-postgres")
    ap.add_argument("--spark-rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3, help="Spark: runs of every method (best kept)")
    ap.add_argument("--driver-memory", default="4g", help="Spark: the in-process driver's heap")
    ap.add_argument("--profile", action="store_true", help="Spark: list our diff's queries with their times")
    ap.add_argument("--child")
    ap.add_argument("--target")
    ap.add_argument("--extra", default="")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.target, args.extra), default=str))
        return
    if args.engine == "spark":
        spark_bench(args.spark_rows, args.rounds, args.driver_memory, args.profile)
        return

    import duckdb

    if args.skip_duckdb:
        postgres(args.pg_rows, args.quick)
        return
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db = str(workdir / f"bench_{args.rows}.duckdb")
    t = time.perf_counter()
    if not Path(db).exists():
        # In a child: a parent grown by the build would pass its peak RSS on to every measured
        # child (Linux keeps the peak of the memory image a process had before exec).
        script = ("import duckdb, json, sys\ncon = duckdb.connect(sys.argv[1])\n"
                  "con.execute('set enable_progress_bar = false')\n"
                  "for s in json.loads(sys.argv[2]): con.execute(s)\ncon.execute('checkpoint')\ncon.close()")
        subprocess.run([sys.executable, "-c", script, db + ".tmp", json.dumps(build_sql(args.rows, "duckdb"))],
                       check=True)
        os.replace(db + ".tmp", db)
    else:
        check = duckdb.connect(db, read_only=True)
        has_noise = check.execute("select count(*) from information_schema.tables where table_name = 'd'").fetchone()[0]
        check.close()
        if not has_noise:  # a data file of an older version of this script
            script = ("import duckdb, json, sys\ncon = duckdb.connect(sys.argv[1])\n"
                      "for s in json.loads(sys.argv[2]): con.execute(s)\ncon.execute('checkpoint')\ncon.close()")
            subprocess.run([sys.executable, "-c", script, db, json.dumps(noise_sql())], check=True)
    print(f"DuckDB {duckdb.__version__}: {args.rows:,} rows per table, data ready in {time.perf_counter() - t:.1f} s; "
          f"cores: {os.cpu_count()}; load average before: {os.getloadavg()[0]:.1f}\n")

    results: dict[str, dict] = {}
    plan = [
        ("checksum scan of both (a vs b)", ("checksum", db, "", 7)),
        ("ours, keyed (--key id)", ("ours_keyed", db, "", 7)),
        ("ours, no key", ("ours_unkeyed", db, "", 3)),
        ("CLI process: rerun-safety diff --key id", lambda: {**measured(
            [str(Path(sys.executable).parent / "rerun-safety"), "diff", f"{db}:main.a", f"{db}:main.b",
             "--key", "id", "--format", "json"])}),
        ("keyed FULL OUTER JOIN", ("full_join", db, "", 3)),
        ("EXCEPT ALL both ways", ("except_all", db, "", 1)),
        ("checksum scan of both (a vs identical c)", ("checksum", db, "a,c", 7)),
        ("ours identical, keyed (a vs c)", ("ours_keyed", db, "a,c", 7)),
        ("ours identical, no key (a vs c)", ("ours_unkeyed", db, "a,c", 3)),
        ("ours float noise, keyed (a vs d)", ("ours_keyed", db, "a,d", 3)),
        ("ours float noise, no key (a vs d)", ("ours_unkeyed", db, "a,d", 3)),
    ]
    if args.quick:
        slow = ("CLI process", "keyed FULL OUTER JOIN", "EXCEPT ALL")
        plan = [(name, fn) for name, fn in plan if not name.startswith(slow)]
        args.skip_pandas = args.skip_peers = True
    if not args.skip_pandas:
        plan.append(("pandas merge(indicator=True)", ("pandas", db, "", 1)))
    if not args.skip_peers:
        py, why = ensure_peer("reladiff")
        if py:
            path = peer_duckdb_file(py, db, workdir, f"reladiff_{args.rows}", args.rows)
            plan.append(("reladiff joindiff (process)", lambda: reladiff_method(py, path, "joindiff")))
            plan.append(("reladiff hashdiff (process)", lambda: reladiff_method(py, path, "hashdiff")))
        else:
            print(f"reladiff skipped: {why}")
        spy, why = ensure_peer("sqlmesh")
        if spy:
            spath = peer_duckdb_file(spy, db, workdir, f"sqlmesh_{args.rows}", args.rows)
            plan.append(("SQLMesh table_diff", lambda: sqlmesh_method(spy, spath, workdir)))
        else:
            print(f"SQLMesh skipped: {why}")
    results.update(interleaved([(name, fn) for name, fn in plan if isinstance(fn, tuple)]))
    for name, fn in plan:
        if not isinstance(fn, tuple):
            results[name] = fn()
        print(f"  ran {name}: {results[name]['proc_seconds']:.2f} s", flush=True)
    results = {name: results[name] for name, _fn in plan}

    base = results["checksum scan of both (a vs b)"]["proc_seconds"]
    print("\n| method (DuckDB) | op s | proc s | x checksum | peak MB | answer |\n|---|---:|---:|---:|---:|---|")
    for name, r in results.items():
        print(fmt_row(name, r, base))

    def proc(name: str) -> float | None:
        r = results.get(name)
        return None if r is None or "error" in r else r["proc_seconds"]

    def op(name: str) -> float | None:
        r = results.get(name)
        return None if r is None or "error" in r else r.get("op_seconds")

    print("\nTargets:")
    ours = proc("ours, keyed (--key id)")
    checks = [
        ("identical keyed <= 1.5x one checksum scan (op)", op("ours identical, keyed (a vs c)"),
         op("checksum scan of both (a vs identical c)"), 1.5),
        ("identical unkeyed <= 1.5x one checksum scan (op)", op("ours identical, no key (a vs c)"),
         op("checksum scan of both (a vs identical c)"), 1.5),
        ("float noise keyed <= 1.5x one checksum scan (op)", op("ours float noise, keyed (a vs d)"),
         op("checksum scan of both (a vs identical c)"), 1.5),
        ("1,000-row diff <= 0.3x EXCEPT ALL (process)", ours, proc("EXCEPT ALL both ways"), 0.3),
        # a CLI diff against a one-query checksum script, each a process of its own
        ("1,000-row keyed diff <= 2.0x one checksum scan of both (process)", ours,
         proc("checksum scan of both (a vs b)"), 2.0),
        ("identical keyed <= 1.2x one checksum scan of both (process)", proc("ours identical, keyed (a vs c)"),
         proc("checksum scan of both (a vs identical c)"), 1.2),
    ]
    peers = [p for p in (proc("reladiff joindiff (process)"), proc("reladiff hashdiff (process)")) if p]
    if peers:
        checks.append(("1,000-row diff <= 0.25x reladiff's best (process)", ours, min(peers), 0.25))
    for label, mine, ref, limit in checks:
        if mine is None or ref is None:
            print(f"  {label}: not measured")
            continue
        print(f"  {label}: {mine:.2f} / {ref:.2f} = {mine / ref:.2f}  {'OK' if mine / ref <= limit else 'MISSED'}")
    peak = max(results[n]["peak_mb"] for n in results if n.startswith("ours") and "peak_mb" in results[n])
    print(f"  our peak memory < 1 GB: {peak:.0f} MB  {'OK' if peak < 1024 else 'MISSED'}")

    if not args.skip_postgres:
        postgres(args.pg_rows, args.quick)


def postgres(rows: int, quick: bool = False) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.common import start_pg_server

    server = start_pg_server()
    try:
        db = server.create_database("bench")
        con = server.connect(db)
        t = time.perf_counter()
        with con.cursor() as cur:
            for s in build_sql(rows, "postgres"):
                cur.execute(s)
            cur.execute("vacuum analyze")
        con.close()
        db2 = server.create_database("bench2")
        server.drop_database(db2)
        admin = server.connect()
        with admin.cursor() as cur:
            cur.execute(f'create database "{db2}" template "{db}" strategy file_copy')
        admin.close()
        print(f"\nPostgreSQL: {rows:,} rows per table, data ready in {time.perf_counter() - t:.1f} s; "
              f"load average before: {os.getloadavg()[0]:.1f}")
        target = json.dumps({"host": server.host, "port": server.port, "user": server.user, "db": db, "db2": db2})
        results = {}
        for name, method, extra in [("checksum scan of both", "pg_checksum", ""),
                                    ("ours, keyed", "pg_ours_keyed", ""),
                                    ("ours, keyed, min/max scan instead of pg_stats", "pg_ours_keyed_scan", ""),
                                    ("ours, no key", "pg_ours_unkeyed", ""),
                                    ("ours, keyed, two databases", "pg_ours_across", ""),
                                    ("checksum scan of both (a vs identical c)", "pg_checksum", "a,c"),
                                    ("ours identical, keyed (a vs c)", "pg_ours_keyed", "a,c"),
                                    ("ours identical, no key (a vs c)", "pg_ours_unkeyed", "a,c"),
                                    ("ours float noise, keyed (a vs d)", "pg_ours_keyed", "a,d"),
                                    ("EXCEPT ALL both ways", "pg_except_all", "")]:
            if quick and method in ("pg_except_all", "pg_ours_keyed_scan", "pg_ours_across"):
                continue
            results[name] = python_method(method, target, extra, repeat=1 if "except" in method else 2)
            print(f"  ran {name}: {results[name]['proc_seconds']:.2f} s", flush=True)
        base = results["checksum scan of both"]["proc_seconds"]
        print("\n| method (PostgreSQL) | op s | proc s | x checksum | peak MB | answer |\n|---|---:|---:|---:|---:|---|")
        for name, r in results.items():
            print(fmt_row(name, r, base))

        def get(name: str, field: str) -> float | None:
            r = results.get(name)
            return None if r is None or "error" in r else r.get(field)

        print(f"\nTargets (load average after: {os.getloadavg()[0]:.1f}):")
        for label, mine, ref, limit in [
            ("keyed diff <= 0.6x EXCEPT ALL (process)", get("ours, keyed", "proc_seconds"),
             get("EXCEPT ALL both ways", "proc_seconds"), 0.6),
            ("unkeyed diff <= 0.6x EXCEPT ALL (process)", get("ours, no key", "proc_seconds"),
             get("EXCEPT ALL both ways", "proc_seconds"), 0.6),
            ("identical keyed <= 1.5x one checksum scan (op)", get("ours identical, keyed (a vs c)", "op_seconds"),
             get("checksum scan of both (a vs identical c)", "op_seconds"), 1.5),
            ("identical unkeyed <= 1.5x one checksum scan (op)", get("ours identical, no key (a vs c)", "op_seconds"),
             get("checksum scan of both (a vs identical c)", "op_seconds"), 1.5)]:
            if mine is None or ref is None:
                print(f"  {label}: not measured")
                continue
            print(f"  {label}: {mine:.2f} / {ref:.2f} = {mine / ref:.2f}  {'OK' if mine / ref <= limit else 'MISSED'}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
