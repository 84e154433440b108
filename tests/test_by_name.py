"""Which relations a model's compiled SQL reads by name (pure logic; the game day's use of it runs
in the conformance project)."""
from __future__ import annotations

from rerun_safety.gameday.by_name import relations_read


def test_qualified_relations_are_read_and_ctes_are_not():
    sql = ("with recent as (select * from \"analytics\".\"vendor_raw\".\"app_events\") "
           "select r.*, u.plan from recent r join vendor_raw.app_users u using (user_id) "
           "join recent r2 using (app_event_id) where r.x in (select x from Other.Thing)")
    assert relations_read(sql, "postgres") == {("analytics", "vendor_raw", "app_events"),
                                               (None, "vendor_raw", "app_users"), (None, "Other", "Thing")}


def test_unqualified_names_and_unparsable_sql_read_nothing():
    assert relations_read("select * from events", "duckdb") == set()
    assert relations_read("select * from (((", "duckdb") == set()


def test_a_schema_named_like_a_cte_is_still_a_relation():
    sql = "with raw as (select 1 as x) select * from raw join raw.events e on true join db.raw.users u on true"
    assert relations_read(sql, "duckdb") == {(None, "raw", "events"), ("db", "raw", "users")}
