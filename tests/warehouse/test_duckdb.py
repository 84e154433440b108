"""DuckDB's SQL pieces, pinned as text and run on a real (in-memory) DuckDB."""
from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from rerun_safety.warehouse.base import CLOCK_SCHEMA, CLOCK_TABLE
from rerun_safety.warehouse.dialects import dialect_for

D = dialect_for("duckdb")


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    yield c
    c.close()


def test_row_hash_and_exact_sums(con):
    assert D.row_hash(["a", "b"]) == "hash(hash(a, b))"
    assert D.int_sum("x") == "cast(coalesce(sum(x), 0) as hugeint)"
    one, two, swapped, nulls = (con.execute(f"select {D.row_hash(p)}").fetchone()[0]
                                for p in (["1", "'x'"], ["1", "'x'"], ["'x'", "1"], ["null", "1"]))
    assert one == two and one != swapped and nulls != con.execute(f"select {D.row_hash(['1', 'null'])}").fetchone()[0]
    # 2 * 2^62 = 2^63 is past bigint: exact as hugeint
    assert con.execute(f"select {D.int_sum('x')} from (values (4611686018427387904), (4611686018427387904)) t(x)"
                       ).fetchone()[0] == 2 ** 63


def test_the_clock_is_a_macro_reading_one_row(con):
    for statement in D.clock_setup(CLOCK_SCHEMA, CLOCK_TABLE):
        con.execute(statement)
    con.execute(D.clock_set(dt.datetime(2025, 1, 2, 3, 4, 5), CLOCK_SCHEMA, CLOCK_TABLE))
    assert con.execute("select rerun_safety_clock.rs_timestamp(), rerun_safety_clock.rs_date(), "
                       "rerun_safety_clock.rs_time()").fetchone() == (
        dt.datetime(2025, 1, 2, 3, 4, 5), dt.date(2025, 1, 2), dt.time(3, 4, 5))
    assert D.clock_setup(CLOCK_SCHEMA, CLOCK_TABLE)[3] == (
        "create macro rerun_safety_clock.rs_timestamp() as (select ts from rerun_safety_clock.clock)")


def test_row_order_and_share_are_deterministic(con):
    assert D.row_order(["a"]).sql(D) == "HASH(rs_row)" and D.row_share(20, 1).sql(D) == "HASH(rs_row) % 20 < 1"
    query = f"select count(*) from (select range as a from range(2000)) rs_row where {D.row_share(20, 1).sql(D)}"
    first = con.execute(query).fetchone()[0]
    assert first == con.execute(query).fetchone()[0] and 60 <= first <= 140  # about a twentieth, the same each time


def test_capabilities():
    assert (D.late_materialization, D.row_addresses, D.concurrent_writers, D.cheap_clones, D.external_sources) == (
        True, False, False, True, True)
    # no port, no network of the machine, no Unix socket: a sandbox is a file
    assert D.network_needs({"type": "duckdb", "path": "x.duckdb"}) == ((), False, False)


def test_late_materialization_finds_rows_by_rowid_then_reads_them_whole(con):
    con.execute("create table t as select range as id, range * 2 as v from range(10)")
    sql = D.late_materialized("t", "t", " where id % 3 = 0")
    assert sql == "t where rowid in (select rowid from t where id % 3 = 0)"
    assert con.execute(f"select id, v from {sql} order by id").fetchall() == [(0, 0), (3, 6), (6, 12), (9, 18)]
    assert D.address_item(True) == ""  # no addresses read back as text
