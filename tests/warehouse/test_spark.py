"""Spark's SQL pieces, pinned as text (they run in tests/test_gameday_spark.py and test_diff_spark.py,
which start a JVM)."""
from __future__ import annotations

import datetime as dt

from rerun_safety.warehouse.base import CLOCK_SCHEMA, CLOCK_TABLE
from rerun_safety.warehouse.dialects import dialect_for

D = dialect_for("spark")


def test_row_hash_counts_nulls_and_sums_are_exact_in_three_parts():
    assert D.row_hash(["a", "b"]) == "xxhash64(a, isnull(a), b, isnull(b))"
    assert D.is_distinct("a", "b") == "not (a <=> b)"
    # 64-bit values summed as three 21-bit parts, each sum exact in a decimal(38,0)
    assert D.int_sum("x").count("shiftright") == 2 and "4398046511104" in D.int_sum("x")


def test_the_clock_is_a_parquet_table_and_functions():
    setup = D.clock_setup(CLOCK_SCHEMA, CLOCK_TABLE)
    assert setup[0] == "create table rerun_safety_clock.clock (ts timestamp_ntz, tstz timestamp, d date) using parquet"
    assert len(setup) == 5  # no time-of-day type on Spark
    assert D.clock_set(dt.datetime(2025, 1, 2, 3, 4, 5), CLOCK_SCHEMA, CLOCK_TABLE) == (
        "insert overwrite table rerun_safety_clock.clock select cast('2025-01-02 03:04:05.000000' as timestamp_ntz), "
        "cast('2025-01-02 03:04:05.000000+00:00' as timestamp), cast('2025-01-02' as date)")


def test_capabilities():
    assert (D.costly_queries, D.information_schema, D.cached_catalog, D.concurrent_writers) == (True, False, False, True)
    # a session of this process: any port of a loopback of its own, not the machine's network
    assert D.network_needs({"type": "spark", "method": "session"}) == (None, False, False)
