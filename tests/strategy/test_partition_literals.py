"""How `partition_overwrite` finds the target rows to replace. In dynamic mode it reads the
batch's partitions first and writes them into the delete as typed literals (ranges of the raw column for a granularity). These tests pin that form down on
both engines, in a session time zone with daylight saving time: gaps between partitions, the
edges of a range, quotes and SQL in string values, NULLs, the fallback to a join with the batch
(too many partitions, or a type without a literal form), and the SQL that actually ran. In static
mode, an empty batch deletes nothing."""
from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from zoneinfo import ZoneInfo

import pytest

from _po_project import PoProject, make_project, model_sql

TZ = "America/New_York"
NY = ZoneInfo(TZ)

MODELS = {
    "lit_day": model_sql("partition_key={'field': 'ts', 'granularity': 'day'}"),
    "lit_tz": model_sql("partition_key={'field': 'ts', 'granularity': 'day'}"),
    "lit_str": model_sql("partition_key='p'"),
    "lit_int": model_sql("partition_key='p'"),
    "lit_pair": model_sql("partition_key=['a', 'b']"),
    "lit_float": model_sql("partition_key='p'"),
    "lit_static": model_sql("partition_key='p', partitions=['a', 'b']"),
    "lit_interval": model_sql("partition_key='p'"),
    "lit_list": model_sql("partition_key='p'"),
}


class TzProject(PoProject):
    """The partition_overwrite test project, with every dbt session in America/New_York."""

    def output(self, **extra):
        if self.engine == "duckdb":
            extra = {"settings": {"TimeZone": TZ}, **extra}
        return super().output(**extra)


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def po(request, tmp_path_factory):
    pg = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    project = make_project(tmp_path_factory.mktemp(f"po_lit_{request.param}"), request.param, MODELS,
                           pg_server=pg, project_class=TzProject)
    if pg is not None:  # dbt parses without connecting: every later session starts in TZ
        conn = pg.connect()
        conn.cursor().execute(f"alter database \"{project.dbname}\" set timezone to '{TZ}'")
        conn.close()
    yield project
    project.drop_warehouse()


def ran_sql(po, model: str) -> str:
    """The strategy SQL of the model's last run, as dbt wrote it to target/run."""
    return (po.root / "target" / "run" / "po_tests" / "models" / f"{model}.sql").read_text()


def build(po, model, cols, rows, *extra):
    po.fill_raw(model, cols, rows)
    po.run(model, *extra)
    return po.rows(model)


def test_day_ranges_with_gaps_and_edges(po):
    cols = "id integer, ts timestamp, v integer"

    def day(d, v):
        # the first and the last microsecond of the day, and noon
        return [(d * 10, dt.datetime(2024, 1, d), v), (d * 10 + 1, dt.datetime(2024, 1, d, 12), v),
                (d * 10 + 2, dt.datetime(2024, 1, d, 23, 59, 59, 999999), v)]

    first = [r for d in range(1, 8) for r in day(d, 1)]
    build(po, "lit_day", cols, first, "--full-refresh")
    batch = day(2, 2) + day(3, 2)[:1] + day(5, 2)[1:]  # days 2-3 contiguous, 4 left out, 5
    expected = Counter([r for d in (1, 4, 6, 7) for r in day(d, 1)] + batch)
    for _ in range(3):
        assert build(po, "lit_day", cols, batch) == expected
    assert sum(expected.values()) == 12 + 3 + 1 + 2
    sql = ran_sql(po, "lit_day")
    # two ranges: [2nd, 4th) merged from two days, and [5th, 6th); no join with the batch
    assert len(re.findall(r">= cast\('2024-01-0[25] 00:00:00' as timestamp", sql, re.I)) == 2
    assert re.search(r"< cast\('2024-01-04 00:00:00' as timestamp", sql, re.I)
    assert re.search(r"< cast\('2024-01-06 00:00:00' as timestamp", sql, re.I)
    assert "select distinct" not in sql.lower()


def test_timestamptz_days_follow_the_session_time_zone_across_dst(po):
    cols = "id integer, ts timestamp with time zone, v integer"
    # 2024-03-10 in New York has 23 hours (clocks jump from 02:00 EST to 03:00 EDT)
    first = [
        (1, dt.datetime(2024, 3, 9, 23, 59, tzinfo=NY), 1),
        (2, dt.datetime(2024, 3, 10, 0, 0, tzinfo=NY), 1),
        (3, dt.datetime(2024, 3, 10, 1, 30, tzinfo=NY), 1),
        (4, dt.datetime(2024, 3, 10, 23, 59, 59, tzinfo=NY), 1),
        (5, dt.datetime(2024, 3, 11, 0, 0, tzinfo=NY), 1),
        # 04:30 UTC on the 11th is still the 10th in New York
        (6, dt.datetime(2024, 3, 11, 3, 30, tzinfo=dt.timezone.utc), 1),
    ]
    build(po, "lit_tz", cols, first, "--full-refresh")
    batch = [(7, dt.datetime(2024, 3, 10, 12, 0, tzinfo=NY), 2)]
    for _ in range(2):
        got = build(po, "lit_tz", cols, batch)
        assert sorted(r[0] for r in got.elements()) == [1, 5, 7]
    assert len(got) == 3


def test_string_values_with_quotes_and_sql_are_literals(po):
    cols = "id integer, p varchar(60), v integer"
    hostile = "x'); delete from lit_str; --"
    first = [(1, "o'brien", 1), (2, hostile, 1), (3, "", 1), (4, None, 1), (5, "keep", 1), (6, "O'BRIEN", 1)]
    build(po, "lit_str", cols, first, "--full-refresh")
    batch = [(7, "o'brien", 2), (8, hostile, 2), (9, "", 2), (10, None, 2), (11, None, 2)]
    expected = Counter(batch + [(5, "keep", 1), (6, "O'BRIEN", 1)])
    for _ in range(3):
        assert build(po, "lit_str", cols, batch) == expected
    sql = ran_sql(po, "lit_str")
    assert "cast('o''brien' as" in sql.lower()
    assert "cast('x''); delete from lit_str; --' as" in sql.lower()
    # the NULL partition is matched NULL-safely; without one in the batch there is no NULL delete
    assert '"p" is null' in sql
    build(po, "lit_str", cols, [(12, "keep", 3)])
    assert po.rows("lit_str") == Counter(batch + [(6, "O'BRIEN", 1), (12, "keep", 3)])
    assert " is null" not in ran_sql(po, "lit_str")


def test_more_partitions_than_literals_fall_back_to_the_batch(po):
    cols = "id integer, p integer, v integer"
    build(po, "lit_int", cols, [(i, i, 1) for i in range(1200)], "--full-refresh")
    many = [(i, i, 2) for i in range(0, 1200, 1)][:1001] + [(5000, None, 2)]
    expected = Counter(many + [(i, i, 1) for i in range(1001, 1200)])
    for _ in range(2):
        assert build(po, "lit_int", cols, many) == expected
    assert "select distinct" in ran_sql(po, "lit_int").lower()
    few = [(1, 7, 3), (2, 7, 3), (3, 1100, 3)]
    expected = (expected - Counter([r for r in expected if r[1] in (7, 1100)])) + Counter(few)
    assert build(po, "lit_int", cols, few) == expected
    sql = ran_sql(po, "lit_int").lower()
    assert "select distinct" not in sql and re.search(r"in \(cast\('7' as integer\), cast\('1100' as integer\)\)", sql)


def test_list_keys_literal_tuples_and_fallback(po):
    cols = "id integer, a integer, b varchar(10), v integer"
    first = [(i, i % 4, f"b{i % 5}", 1) for i in range(40)] + [(100, None, "b1", 1), (101, 1, None, 1)]
    build(po, "lit_pair", cols, first, "--full-refresh")
    # 3 pairs, one with a NULL member: literal tuples plus the NULL-safe match
    batch = [(200, 0, "b0", 2), (201, 1, "b1", 2), (202, None, "b1", 2)]
    gone = {(0, "b0"), (1, "b1"), (None, "b1")}
    expected = Counter([r for r in first if (r[1], r[2]) not in gone] + batch)
    for _ in range(2):
        assert build(po, "lit_pair", cols, batch) == expected
    assert "select distinct" not in ran_sql(po, "lit_pair").lower()
    # 20 pairs: more than 16, matched through the batch
    wide = [(300 + i, i % 4, f"b{i % 5}", 3) for i in range(20)]
    gone = {(r[1], r[2]) for r in wide}
    expected = Counter([r for r in expected if (r[1], r[2]) not in gone] + wide)
    assert build(po, "lit_pair", cols, wide) == expected
    assert "select distinct" in ran_sql(po, "lit_pair").lower()


def test_interval_and_list_partitions_are_matched_through_the_batch(po):
    # intervals and lists have a text form, but not one to trust for equality: no literals
    kind = "integer[]" if po.engine == "postgres" else "INTEGER[]"
    for model, cols, first, batch in (
        ("lit_interval", "id integer, p interval, v integer",
         [(1, dt.timedelta(days=1), 1), (2, dt.timedelta(hours=1), 1)], [(3, dt.timedelta(days=1), 2)]),
        ("lit_list", f"id integer, p {kind}, v integer",
         [(1, [1, 2], 1), (2, [3], 1)], [(3, [1, 2], 2)]),
    ):
        po.fill_raw(model, cols, first)
        po.run(model, "--full-refresh")
        po.fill_raw(model, cols, batch)
        for _ in range(2):
            po.run(model)
            assert po.sql(f"select id, v from {model} order by id", fetch=True) == [(2, 1), (3, 2)], model
        assert "select distinct" in ran_sql(po, model).lower()


def test_float_partitions_are_matched_through_the_batch(po):
    cols = "id integer, p double precision, v integer"
    first = [(1, 0.1, 1), (2, 0.30000000000000004, 1), (3, 0.3, 1), (4, 1e300, 1)]
    build(po, "lit_float", cols, first, "--full-refresh")
    batch = [(5, 0.30000000000000004, 2), (6, 1e300, 2)]
    for _ in range(2):
        assert build(po, "lit_float", cols, batch) == Counter(first[:1] + first[2:3] + batch)
    assert "select distinct" in ran_sql(po, "lit_float").lower()


def test_static_partitions_and_an_empty_batch_change_nothing(po):
    po.fill_raw("lit_static", "id integer, p varchar(20), v integer", [(1, "a", 1), (2, "b", 1), (3, "c", 1)])
    po.run("lit_static", "--full-refresh")
    po.fill_raw("lit_static", "id integer, p varchar(20), v integer", [])
    po.run("lit_static")
    assert po.rows("lit_static") == Counter([(1, "a", 1), (2, "b", 1), (3, "c", 1)])
    # a non-empty batch still replaces every listed partition, also one it has no rows for
    po.fill_raw("lit_static", "id integer, p varchar(20), v integer", [(4, "a", 2)])
    po.run("lit_static")
    assert po.rows("lit_static") == Counter([(4, "a", 2), (3, "c", 1)])
