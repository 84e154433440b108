"""Config checks the game day makes before replaying anything (pure logic; the end-to-end exit
codes are in test_bad_input.py)."""
from __future__ import annotations

import pytest

from rerun_safety.errors import ConfigError
from rerun_safety.gameday.preflight import check_columns, check_config, partition_key_columns
from rerun_safety.project import Model


def model(partition_key, strategy="partition_overwrite", materialized="incremental", name="m") -> Model:
    return Model(unique_id=f"model.p.{name}", name=name, fqn=("p", name), resource_type="model",
                 materialized=materialized, strategy=strategy, key=(), partition_key=partition_key,
                 event_time=None, database=None, schema="s", identifier=name, parents=(), sources=(),
                 ignore_columns=(), window_driven=False)


@pytest.mark.parametrize("raw, expected", [
    ("day", (["day"], None)),
    (["region", "day"], (["region", "day"], None)),
    ({"field": "ts"}, (["ts"], "day")),
    ({"field": "ts", "granularity": "HOUR"}, (["ts"], "hour")),
])
def test_partition_key_shapes(raw, expected):
    assert partition_key_columns(model(raw)) == expected


@pytest.mark.parametrize("raw, message", [
    (None, "partition_key is not set"),
    ([], "partition_key is not set"),
    ({"field": "ts", "granularity": "week"}, "granularity 'week' is unknown"),
    ({"granularity": "day"}, "without a 'field' column name"),
    (42, "partition_key must be"),
    (["day", 3], "partition_key must be"),
])
def test_partition_key_errors_name_the_model(raw, message):
    with pytest.raises(ConfigError) as err:
        check_config([model(raw, name="orders")], {"type": "duckdb"}, "dev")
    assert str(err.value).startswith("model orders (incremental_strategy='partition_overwrite'): ")
    assert message in str(err.value)


def test_other_strategies_are_not_checked():
    check_config([model(None, strategy="append"), model(None, materialized="table", strategy=None)],
                 {"type": "duckdb", "disable_transactions": True}, "dev")


@pytest.mark.parametrize("output, setting", [({"disable_transactions": True}, "disable_transactions: true"),
                                             ({"autocommit": True}, "autocommit: true")])
def test_transactions_off_is_refused_only_with_partition_overwrite(output, setting):
    with pytest.raises(ConfigError) as err:
        check_config([model("day", name="b"), model("day", name="a")], output, "prod")
    assert str(err.value).startswith(f"target 'prod' sets {setting}, but a, b use incremental_strategy=")
    check_config([model("day", strategy="merge")], output, "prod")


def test_columns_checked_case_insensitively():
    check_columns(model({"field": "TS"}), ["id", "ts"])
    with pytest.raises(ConfigError, match=r"partition_key names 'region', which is not a column of the model "
                                          r"\(columns: id, ts\)"):
        check_columns(model(["ts", "region"]), ["id", "ts"])
