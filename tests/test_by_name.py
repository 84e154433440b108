"""Which relations a model's compiled SQL reads by name (pure logic; the game day's use of it runs
in the conformance project)."""
from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("raw, is_plain", [
    ("select * from {{ ref('a') }} join {{ source('raw', 'b') }} using (id)", True),
    ("{{ config(materialized='incremental', unique_key=['a', 'b'], meta={'x': 1}) }}\nselect * from {{ ref('a') }}\n"
     "{% if is_incremental() %}where t > (select max(t) from {{ this }}){% endif %}", True),
    ("{# a comment with {{ var('x') }} #} select 1", True),
    ("select * from {{ var('events') }}", False),                      # a var may render a relation
    ("select * from {{ var('schema') }}.{{ var('table') }}", False),  # a name concatenated from vars
    ("{% set r = adapter.get_relation(database=target.database, schema='raw', identifier='t') %}select * from {{ r }}",
     False),
    ("select * from {{ my_package.events_relation() }}", False),       # a macro call
    ("select * from raw.events", False),                                # a schema-qualified name in the SQL
    ("select * from events", True),                                      # found through the search path: not read
])
def test_plain_models_need_no_compile(raw, is_plain):
    from rerun_safety.gameday.by_name import plain

    assert plain(raw) is is_plain
