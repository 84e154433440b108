"""PostgreSQL's SQL pieces, pinned as text and run on the suite's real server."""
from __future__ import annotations

import datetime as dt

import psycopg2
import pytest

from rerun_safety.warehouse.base import CLOCK_SCHEMA, CLOCK_TABLE
from rerun_safety.warehouse.dialects import dialect_for

D = dialect_for("postgres")


@pytest.fixture
def cur(pg_server, pg_database):
    con = psycopg2.connect(host=pg_server.host, port=pg_server.port, user=pg_server.user, dbname=pg_database)
    con.autocommit = True
    with con.cursor() as c:
        yield c
    con.close()


def one(cur, sql):
    cur.execute(sql)
    return cur.fetchone()[0]


def test_row_hash_and_exact_sums(cur):
    assert D.row_hash(["a", "b"]) == "hash_record_extended(row(a, b), 0)"
    assert D.int_sum("x") == "cast(coalesce(sum(x), 0) as numeric)"
    assert one(cur, f"select {D.row_hash(['1', 'text ' + chr(39) + 'x' + chr(39)])}") == one(
        cur, f"select {D.row_hash(['1', 'text ' + chr(39) + 'x' + chr(39)])}")
    assert one(cur, f"select {D.row_hash(['null::int', '1'])}") != one(cur, f"select {D.row_hash(['1', 'null::int'])}")
    assert one(cur, f"select {D.int_sum('x')} from (values (4611686018427387904), (4611686018427387904)) t(x)") == 2 ** 63


def test_typed_row_hash_tells_columns_and_nulls_apart(cur):
    sql = D.typed_row_hash([("a", "integer"), ("b", "text")])
    assert sql.startswith("hashint4extended(0, coalesce(hashint4extended(a, 1), ")
    rows = "(values (1, 'x'), (1, 'x'), (null, 'x'), (1, null)) t(a, b)"
    cur.execute(f"select {sql} from {rows}")
    hashes = [r[0] for r in cur.fetchall()]
    assert hashes[0] == hashes[1] and len(set(hashes)) == 3


def test_the_clock_is_a_stable_function_reading_one_row(cur):
    for statement in D.clock_setup(CLOCK_SCHEMA, CLOCK_TABLE):
        cur.execute(statement)
    cur.execute(D.clock_set(dt.datetime(2025, 1, 2, 3, 4, 5), CLOCK_SCHEMA, CLOCK_TABLE))
    cur.execute("select rerun_safety_clock.rs_timestamp(), rerun_safety_clock.rs_date(), rerun_safety_clock.rs_time()")
    assert cur.fetchone() == (dt.datetime(2025, 1, 2, 3, 4, 5), dt.date(2025, 1, 2), dt.time(3, 4, 5))
    assert D.clock_setup(CLOCK_SCHEMA, CLOCK_TABLE)[3] == (
        "create function rerun_safety_clock.rs_timestamp() returns timestamp language sql stable as "
        "$$ select ts from rerun_safety_clock.clock $$")


def test_row_order_and_share_are_deterministic(cur):
    assert D.row_share(20, 1).sql(D) == "ABS(HASHTEXT(CAST(rs_row AS TEXT))) % 20 < 1"
    query = f"select count(*) from (select g as a from generate_series(1, 2000) g) rs_row where {D.row_share(20, 1).sql(D)}"
    first = one(cur, query)
    assert first == one(cur, query) and 60 <= first <= 140


def test_capabilities():
    assert (D.row_addresses, D.concurrent_sides, D.planner_statistics, D.folds_unquoted_to_lower, D.cheap_clones,
            D.concurrent_writers) == (True, True, True, True, True, True)
    assert D.drop_cascade == " cascade"
    # the server's port on the machine's network; no Unix socket for a host name
    assert D.network_needs({"type": "postgres", "host": "localhost", "port": 5432}) == ((5432,), True, False)


def test_rows_are_read_back_by_their_address(cur):
    cur.execute("create table t as select g as id from generate_series(1, 5) g")
    cur.execute(f"select id{D.address_item(True)} from t where id in (2, 4)")
    addresses = {t: i for i, t in cur.fetchall()}
    assert D.address_item(False) == ", cast(null as text) as t"
    cur.execute(f"select id from t where {D.at_addresses(sorted(addresses))} order by id")
    assert [r[0] for r in cur.fetchall()] == [2, 4]
