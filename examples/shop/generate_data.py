"""Generate the example shop's raw data: six days of events (with the time each was loaded: most
within minutes, one in twenty hours later), a static users table, and the empty audit tables that
hooks write.

Deterministic (fixed seed), so every run of the demo judges the same rows.
    python generate_data.py --out shop.duckdb
    python generate_data.py --postgres "host=... port=... user=... dbname=..."
    python generate_data.py --spark spark     # parquet tables in spark/warehouse, catalog spark/metastore_db
    python generate_data.py --spark-thrift 127.0.0.1:10000   # a Spark cluster's Thrift server
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
from decimal import Decimal

START = dt.datetime(2026, 3, 1)
DAYS = 6
EVENTS_PER_DAY = 800
USERS = 60
CURRENCIES = ["USD", "EUR", "GBP"]


def events(days: int = DAYS, per_day: int = EVENTS_PER_DAY, seed: int = 7) -> list[tuple]:
    rng = random.Random(seed)
    rows = []
    event_id = 1
    for day in range(days):
        # distinct seconds within the day, so event_time is a total order
        seconds = sorted(rng.sample(range(86_400), per_day))
        for sec in seconds:
            kind = "order" if rng.random() < 0.3 else "view"
            amount = Decimal(rng.randint(100, 20_000)) / 100 if kind == "order" else Decimal("0.00")
            rows.append((event_id, rng.randint(1, USERS), kind, amount, rng.choice(CURRENCIES),
                         START + dt.timedelta(days=day, seconds=sec)))
            event_id += 1
    # when the loader landed each event: most within ten minutes, one in twenty 2 to 20 hours late
    late = random.Random(13)
    return [(*r, r[-1] + dt.timedelta(seconds=late.randint(7_200, 72_000) if late.random() < 0.05
                                       else late.randint(30, 600))) for r in rows]


def users(seed: int = 11) -> list[tuple]:
    rng = random.Random(seed)
    return [(uid, rng.choice(["DE", "FR", "GB", "US"]), rng.choice(CURRENCIES)) for uid in range(1, USERS + 1)]


EVENTS_DDL = ("create table raw.events (event_id integer, user_id integer, event_type varchar(16), "
              "amount decimal(10,2), currency varchar(3), event_time timestamp, loaded_at timestamp)")
# What the models' hooks write: a per-run summary, per-day totals, a run log.
AUDIT_DDL = ["create table audit.batch_summary (batch_day date, events bigint)",
             "create table audit.batch_totals (batch_day date, events bigint)",
             "create table audit.run_log (model varchar(64), rows_after bigint)"]
USERS_DDL = "create table raw.users (user_id integer, country varchar(2), currency varchar(3))"


def load_duckdb(path: str) -> None:
    import duckdb

    with duckdb.connect(path) as con:
        con.execute("drop schema if exists raw cascade")
        con.execute("drop schema if exists audit cascade")
        con.execute("create schema raw")
        con.execute("create schema audit")
        con.execute(EVENTS_DDL)
        con.execute(USERS_DDL)
        for ddl in AUDIT_DDL:
            con.execute(ddl)
        import pandas as pd

        ev = pd.DataFrame(events(), columns=["event_id", "user_id", "event_type", "amount", "currency", "event_time",
                                             "loaded_at"])
        us = pd.DataFrame(users(), columns=["user_id", "country", "currency"])
        con.register("ev", ev)
        con.register("us", us)
        con.execute("insert into raw.events select * from ev")
        con.execute("insert into raw.users select * from us")
        con.execute("checkpoint")


def load_postgres(dsn: str) -> None:
    import psycopg2
    from psycopg2.extras import execute_values

    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute("drop schema if exists raw cascade")
            cur.execute("drop schema if exists audit cascade")
            cur.execute("create schema raw")
            cur.execute("create schema audit")
            cur.execute(EVENTS_DDL)
            cur.execute(USERS_DDL)
            for ddl in AUDIT_DDL:
                cur.execute(ddl)
            execute_values(cur, "insert into raw.events values %s", events())
            execute_values(cur, "insert into raw.users values %s", users())
    finally:
        conn.close()


# Spark: parquet tables, its own text type. batch_totals is partitioned by day, as the Spark variant of
# events_totalled's hook replaces the days it covers by dynamic partition overwrite (no DELETE on
# parquet); Spark keeps partition columns last.
SPARK_EVENTS_DDL = ("create table {raw}.events (event_id int, user_id int, event_type string, amount decimal(10,2), "
                    "currency string, event_time timestamp, loaded_at timestamp) using parquet")
SPARK_USERS_DDL = "create table {raw}.users (user_id int, country string, currency string) using parquet"
SPARK_AUDIT_DDL = ["create table {audit}.batch_summary (batch_day date, events bigint) using parquet",
                   "create table {audit}.batch_totals (events bigint, batch_day date) using parquet "
                   "partitioned by (batch_day)",
                   "create table {audit}.run_log (model string, rows_after bigint) using parquet"]


def _spark_literal(value) -> str:
    if isinstance(value, dt.datetime):
        return f"timestamp'{value.isoformat(sep=' ')}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def spark_statements(raw: str = "raw", audit: str = "audit", chunk: int = 1000) -> list[str]:
    """The Spark SQL that (re)creates the raw and audit databases with the same rows as the other
    engines; `raw` and `audit` name the databases (the models read them through the vars
    shop_raw_schema and shop_audit_schema)."""
    out = [f"drop database if exists {raw} cascade", f"drop database if exists {audit} cascade",
           f"create database {raw}", f"create database {audit}",
           SPARK_EVENTS_DDL.format(raw=raw), SPARK_USERS_DDL.format(raw=raw),
           *(ddl.format(audit=audit) for ddl in SPARK_AUDIT_DDL)]
    for table, rows in (("events", events()), ("users", users())):
        for start in range(0, len(rows), chunk):
            values = ", ".join("(" + ", ".join(_spark_literal(v) for v in row) + ")" for row in rows[start:start + chunk])
            out.append(f"insert into {raw}.{table} values {values}")
    return out


def load_spark(run, raw: str = "raw", audit: str = "audit") -> None:
    """Load through `run(sql)`: a SparkSession's sql, or a Thrift server's cursor."""
    for statement in spark_statements(raw, audit):
        run(statement)


def spark_session(folder: str):
    """An in-process Spark with the warehouse and Derby catalog in `folder`, configured as the
    `spark` target of profiles.yml (SHOP_SPARK_DIR) configures dbt's."""
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = os.path.abspath(folder)
    os.makedirs(root, exist_ok=True)
    return (SparkSession.builder.appName("shop generate_data").enableHiveSupport()
            .config("spark.sql.warehouse.dir", os.path.join(root, "warehouse"))
            .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                    "jdbc:derby:;databaseName=metastore_db;create=true")
            .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={root}")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate())


def thrift_cursor(address: str):
    """A PyHive cursor on the Spark Thrift server at HOST:PORT (dbt-spark[PyHive])."""
    from pyhive import hive

    host, port = address.rsplit(":", 1)
    return hive.connect(host=host, port=int(port)).cursor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="DuckDB file to (re)create the raw schema in")
    group.add_argument("--postgres", help="libpq connection string of the database to load")
    group.add_argument("--spark", metavar="DIR", help="folder of the Spark warehouse and metastore to load "
                                                      "(the spark target's SHOP_SPARK_DIR, default spark)")
    group.add_argument("--spark-thrift", metavar="HOST:PORT", help="a Spark Thrift server to load through "
                                                                   "(the spark_thrift target's)")
    args = parser.parse_args()
    if args.out:
        load_duckdb(args.out)
        print(f"wrote {len(events())} events and {USERS} users to {args.out}")
    elif args.spark:
        spark = spark_session(args.spark)
        try:
            load_spark(spark.sql)
        finally:
            spark.stop()
        print(f"wrote {len(events())} events and {USERS} users to Spark in {args.spark}")
    elif args.spark_thrift:
        cursor = thrift_cursor(args.spark_thrift)
        try:
            load_spark(cursor.execute)
        finally:
            cursor.close()
        print(f"wrote {len(events())} events and {USERS} users to the Spark Thrift server {args.spark_thrift}")
    else:
        load_postgres(args.postgres)
        print(f"wrote {len(events())} events and {USERS} users to PostgreSQL")


if __name__ == "__main__":
    main()
