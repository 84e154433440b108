"""How a Spark sandbox's statements are pointed at its databases (pure text, no Spark needed)."""
from __future__ import annotations

import pytest

from rerun_safety.warehouse.spark.engine import map_bare_schema, map_schemas

P = "rerun_safety_sbx_1a2b_replay__"


@pytest.mark.parametrize("sql, expected", [
    ("create schema if not exists analytics", f"create schema if not exists `{P}analytics`"),
    ('/* {"app": "dbt"} */\ncreate database `Analytics`', f'/* {{"app": "dbt"}} */\ncreate database `{P}analytics`'),
    ("show table extended in analytics like '*'", f"show table extended in `{P}analytics` like '*'"),
    ("use analytics;", f"use `{P}analytics`;"),
    ("drop schema if exists analytics cascade", f"drop schema if exists `{P}analytics` cascade"),
    # not a schema of the project, a longer name, a table named like the schema: as they are
    ("drop database other cascade", "drop database other cascade"),
    ("create schema analytics_audit", "create schema analytics_audit"),
    ("select * from analytics", "select * from analytics"),
    ("select 'analytics' as source_relation", "select 'analytics' as source_relation"),
])
def test_a_bare_schema_in_a_database_statement_goes_to_the_sandbox(sql, expected):
    assert map_bare_schema(sql, P, {"analytics"}) == expected


def test_a_qualified_name_goes_to_the_sandbox_and_a_string_stays_the_users():
    sql = "insert into analytics.log select 'analytics' as source_relation, x from raw.t"
    assert map_schemas(sql, P, {"analytics"}) == \
        f"insert into `{P}analytics`.log select 'analytics' as source_relation, x from raw.t"
