"""Fixtures' building blocks for game-day tests: a copy of a project loaded with data."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

from click.testing import CliRunner

from support.common import FIXTURES, REPO_ROOT, postgres_profile, write_profiles

SHOP = REPO_ROOT / "examples" / "shop"


def copy_project(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", "*.duckdb",
                                                             "*.wal", ".user.yml", "package-lock.yml"))
    packages = dest / "packages.yml"
    if packages.exists():
        text = packages.read_text()
        for rel in ("../../", "../"):
            text = text.replace(f"local: {rel}", f"local: {REPO_ROOT}")
        text = text.replace("__REPO_ROOT__", str(REPO_ROOT))
        packages.write_text(text)
    return dest


def shop_generator():
    sys.path.insert(0, str(SHOP))
    import generate_data  # noqa: E402

    return generate_data


def dbt_deps(project: Path, profiles: Path) -> None:
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke(["deps", "--project-dir", str(project), "--profiles-dir", str(profiles), "--quiet"])
    assert res.success, res.exception


def duckdb_fixture_project(tmp: Path, name: str, load_duckdb) -> Path:
    """A copy of tests/fixtures/<name> in `tmp`, its `<name>.duckdb` loaded, its packages installed."""
    project = copy_project(FIXTURES / name, tmp / name)
    load_duckdb(str(project / f"{name}.duckdb"))
    dbt_deps(project, project)
    return project


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pg_fingerprint(server, dbname: str) -> dict:
    """Every relation in the database with a checksum of its rows."""
    conn = server.connect(dbname)
    try:
        with conn.cursor() as cur:
            cur.execute("select table_schema, table_name from information_schema.tables "
                        "where table_schema not in ('pg_catalog', 'information_schema') order by 1, 2")
            rels = cur.fetchall()
            out = {}
            for schema, name in rels:
                cur.execute(f'select count(*), md5(coalesce(string_agg(md5(t::text), \'\' order by md5(t::text)), \'\')) '
                            f'from "{schema}"."{name}" t')
                out[f"{schema}.{name}"] = cur.fetchone()
            return out
    finally:
        conn.close()


def run_cli(args: list[str]) -> tuple[int, str, str]:
    from rerun_safety.cli import main

    runner = CliRunner()
    result = runner.invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def load_report(output_dir: Path) -> dict:
    return json.loads((output_dir / "report.json").read_text())


def by_name(report: dict) -> dict:
    return {m["name"]: m for m in report["models"]}


def scenario(model: dict, name: str) -> dict:
    return next(s for s in model["scenarios"] if s["name"] == name)


def pg_profile(server, dbname: str, dest: Path, profile: str, schema: str) -> Path:
    write_profiles(dest, profile, postgres_profile(server, dbname, schema=schema))
    return dest


def spark_fingerprint(query, databases: list[str]) -> dict:
    """Every table of `databases` with its row count and a checksum of its rows (Spark)."""
    out = {}
    for db in databases:
        for row in query(f"show tables in {db}"):
            if row[2]:  # a temporary view of the session (dbt-spark's __dbt_tmp), listed in every database
                continue
            name = f"{db}.{row[1]}"
            out[name] = tuple(query(f"select count(*), sum(cast(xxhash64(*) as decimal(38,0))) from {name}")[0])
    return out


SHOP_ENGINES = ("duckdb", "postgres", "spark", "spark_thrift")


def shop_gameday(engine: str, tmp: Path, server=None) -> dict:
    """The game day of examples/shop (--steps 4 --threads 2) on a copy of it, loaded into a DuckDB file,
    a fresh PostgreSQL database (`server`: the PostgreSQL server), the test process's Spark ("spark",
    method: session) or a Spark cluster's Thrift server ("spark_thrift", `server`: tests/support/spark_cluster.py's
    cluster); the user's target is fingerprinted before and after. On Spark the catalog is shared by
    the whole test session, so the raw, audit and target databases get names of their own (the
    shop's vars raw_schema and audit_schema)."""
    assert engine in SHOP_ENGINES, engine
    project = copy_project(SHOP, tmp / "shop")
    gen = shop_generator()
    extra: list[str] = []
    raw = audit = None
    if engine == "duckdb":
        gen.load_duckdb(str(project / "shop.duckdb"))
        profiles = project
        fingerprint = lambda: file_sha256(project / "shop.duckdb")  # noqa: E731
    elif engine == "postgres":
        dbname = server.create_database("shop")
        gen.load_postgres(server.dsn(dbname))
        profiles = pg_profile(server, dbname, tmp / "profiles", "shop", "analytics")
        fingerprint = lambda: pg_fingerprint(server, dbname)  # noqa: E731
    else:
        from support.spark import spark_profile, spark_query, unique_schema

        raw, audit, target = unique_schema("shop_raw"), unique_schema("shop_audit"), unique_schema("shop")
        if engine == "spark":
            query, output = spark_query, spark_profile(target)
        else:
            query, output = server.query, server.profile(target)
        gen.load_spark(query, raw, audit)
        profiles = tmp / "profiles"
        write_profiles(profiles, "shop", output)
        extra = ["--vars", json.dumps({"raw_schema": raw, "audit_schema": audit})]
        if engine == "spark":  # the test process's own Spark: its JVM cannot be confined by the game day
            extra.append("--unconfined")

        def fingerprint():
            # the user's tables, and the databases of the catalog: the game day creates none (not
            # even the target's) and leaves no sandbox
            return {"tables": spark_fingerprint(query, [raw, audit]),
                    "databases": sorted(r[0] for r in query("show databases"))}
    before = fingerprint()
    dbt_deps(project, profiles)
    out = tmp / "out"
    cwd = os.getcwd()
    os.chdir(project)  # the DuckDB profile's path is relative, as users write it
    started = time.monotonic()
    try:
        # --fix (DuckDB, PostgreSQL): the fix search after the game day, checked by test_fixes.py
        fix = ["--fix"] if engine in ("duckdb", "postgres") else []
        code, stdout, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                        "--output-dir", str(out), "--steps", "4", "--threads", "2", *fix, *extra])
    finally:
        os.chdir(cwd)
    seconds = time.monotonic() - started
    (tmp / "gameday_output.txt").write_text(stdout + stderr)  # kept for a failing assertion's reader
    return {"engine": engine, "code": code, "stdout": stdout, "stderr": stderr, "report": load_report(out),
            "out": out, "before": before, "after": fingerprint(), "seconds": seconds,
            "raw": raw or "raw", "audit": audit or "audit",
            "argv": ["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles), "--steps", "4", *extra],
            "cwd": project}


def again_with_threads(run: dict, threads: int, out: Path) -> dict:
    """The same game day as `run` (its "argv", from its "cwd") with --threads `threads`: its report."""
    cwd = os.getcwd()
    os.chdir(run["cwd"])
    try:
        code, stdout, stderr = run_cli([*run["argv"], "--threads", str(threads), "--output-dir", str(out)])
    finally:
        os.chdir(cwd)
    assert code == run["code"], stdout + stderr
    return load_report(out)


def differences(a, b, path: str = "") -> list[str]:
    """Where two JSON values differ (paths, each with both values), for an assertion's message. Floats
    are equal within the game day's default tolerance (1e-9 relative): a sum of the same numbers in
    another order, which the diff itself does not call a difference, is none here either."""
    if isinstance(a, float) and isinstance(b, float):
        return [] if abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0) else [f"{path}: {a} != {b}"]
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in (
            differences(a[k], b[k], f"{path}.{k}") if k in a and k in b else [f"{path}.{k}: only on one side"])]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:200]} != {str(b)[:200]}"]


def report_essentials(report: dict) -> dict:
    """A report without what differs between two runs of one game day: timings, its fixes, the order dbt's
    invocations finished in (their node counts stay, as a multiset), and a nondeterministic model's
    differing rows and samples (new at every build; a model whose very rows are chance, its scenarios'
    verdicts and sizes too: its own verdict and columns stay), and those of a model carrying a parent's
    chance column beside its own defect."""
    out = json.loads(json.dumps(report))
    out.pop("started_at", None)
    out.pop("fixes", None)  # the session's shop game day searches fixes (--fix): test_fixes.py checks them
    for key in ("wall_time_s", "model_time_s"):
        out["summary"].pop(key, None)
    cost = out["summary"].pop("cost", None)  # times; its counts stay (the same work in both runs)
    if cost is not None:
        out["summary"]["cost"] = {k: cost[k] for k in ("dbt_invocations", "model_executions")}
    out["extra"]["invocations"] = sorted(i["nodes"] for i in out["extra"]["invocations"])
    for m in out["models"]:
        if m["verdict"] != "nondeterministic" and m["nondeterministic_columns"]:
            # a model judged by its own defect that carries a parent's chance column: which of its rows a
            # replay leaves otherwise is partly chance, so are their counts and sample; its verdict stays
            for s in m["scenarios"]:
                for k in ("extra_rows", "missing_rows", "changed_rows", "sample", "partitions"):
                    s.pop(k, None)
        if m["verdict"] == "nondeterministic":
            for s in m["scenarios"]:
                # how many rows ties broke otherwise is chance (the order rows were written in, by whom):
                # the model's verdict and columns stay
                for k in ("extra_rows", "missing_rows", "changed_rows", "sample", "partitions"):
                    s.pop(k, None)
                # whether a replay broke them otherwise at all is chance too (a rerun may by luck write
                # rows in the reference's order); so are the sizes of a model whose very rows are chance
                if s["name"] != "determinism":
                    for k in ("verdict", "differing_columns", "volatile_columns", "message"):
                        s.pop(k, None)
                if not m["nondeterministic_columns"] and not m["key"]:
                    for k in ("verdict", "rows", "reference_rows", "differing_columns", "volatile_columns"):
                        s.pop(k, None)
    return out


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hostile_project(tmp: Path) -> dict:
    """A DuckDB project whose hooks write the user's export and landing folder and overwrite a seed, and
    whose Python model writes a CSV next to the export: plausible in real teams, each a production write."""
    user = tmp / "userdata"
    (user / "exports").mkdir(parents=True)
    (user / "landing").mkdir()
    project = tmp / "project"
    (project / "models").mkdir(parents=True)
    (project / "seeds").mkdir()
    export, py_export, landing = user / "exports" / "daily.csv", user / "exports" / "from_python.csv", user / "landing"
    seed = project / "seeds" / "plans.csv"
    (project / "dbt_project.yml").write_text(textwrap.dedent("""\
        name: hostile
        version: "1.0"
        profile: hostile
        models:
          hostile:
            +materialized: table
        """))
    (project / "profiles.yml").write_text(textwrap.dedent(f"""\
        hostile:
          target: prod
          outputs:
            prod:
              type: duckdb
              path: {user / 'prod.duckdb'}
              threads: 1
        """))
    (project / "models" / "sources.yml").write_text(textwrap.dedent("""\
        version: 2
        sources:
          - name: raw
            schema: raw
            tables:
              - name: events
                config:
                  event_time: event_time
        """))
    (project / "models" / "events_exported.sql").write_text(textwrap.dedent(f"""\
        {{{{ config(materialized='incremental', unique_key='id', incremental_strategy='merge',
                  post_hook=["copy (select * from {{{{ this }}}}) to '{export}' (header)",
                             "copy (select 1 as x) to '{landing / 'next_batch.csv'}'",
                             "copy (select 9 as plan_id) to '{seed}'"]) }}}}
        select id, event_time, amount from {{{{ source('raw', 'events') }}}}
        {{% if is_incremental() %}}
        where event_time > (select max(event_time) from {{{{ this }}}}) - interval 1 day
        {{% endif %}}
        """))
    (project / "models" / "events_to_csv.py").write_text(textwrap.dedent(f"""\
        def model(dbt, session):
            dbt.config(materialized="table")
            df = dbt.source("raw", "events").df()
            df.to_csv({str(py_export)!r})
            return df
        """))
    seed.write_text("plan_id,name\n1,basic\n2,pro\n")
    import duckdb

    con = duckdb.connect(str(user / "prod.duckdb"))
    con.execute("create schema raw")
    con.execute("create table raw.events as select i as id, timestamp '2026-03-01' + i * interval 1 hour as "
                "event_time, i * 1.5 as amount from range(200) t(i)")
    con.close()
    export.write_text("the user's export\n")
    py_export.write_text("the user's python export\n")
    (landing / "already_there.csv").write_text("a,b\n")
    files = [export, py_export, seed, user / "prod.duckdb"]
    return {"project": project, "user": user, "files": files, "landing": landing,
            "before": {str(f): sha256_of(f) for f in files}, "listing": sorted(p.name for p in landing.iterdir())}
