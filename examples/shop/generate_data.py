"""Generate the example shop's raw data: six days of events (with the time each was loaded: most
within minutes, one in twenty hours later), a static users table, and the empty audit tables that
hooks write.

Deterministic (fixed seed), so every run of the demo judges the same rows.
    python generate_data.py --out shop.duckdb
    python generate_data.py --postgres "host=... port=... user=... dbname=..."
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="DuckDB file to (re)create the raw schema in")
    group.add_argument("--postgres", help="libpq connection string of the database to load")
    args = parser.parse_args()
    if args.out:
        load_duckdb(args.out)
        print(f"wrote {len(events())} events and {USERS} users to {args.out}")
    else:
        load_postgres(args.postgres)
        print(f"wrote {len(events())} events and {USERS} users to PostgreSQL")


if __name__ == "__main__":
    main()
