"""The game day on the bundled example, on DuckDB and on PostgreSQL: every failure class gets
the right verdict, with the numbers behind it, and the user's target is left byte-for-byte as it was."""
from __future__ import annotations

import pytest

from gameday_support import by_name, scenario

SAFE = ["stg_events", "dim_users", "events_delete_insert", "events_merge", "events_partition_overwrite",
        "events_microbatch", "daily_revenue_safe"]


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def shop_run(request, shop_gameday):
    """The session's game day of examples/shop on each engine (conftest's shop_gameday)."""
    server = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    return shop_gameday(request.param, server)


def test_exit_code_and_reports(shop_run):
    assert shop_run["code"] == 1, shop_run["stderr"]
    for name in ("report.json", "junit.xml", "report.md", "report.html"):
        assert (shop_run["out"] / name).stat().st_size > 0


def test_user_target_unchanged(shop_run):
    assert shop_run["before"] == shop_run["after"]


def test_safe_models(shop_run):
    models = by_name(shop_run["report"])
    for name in SAFE:
        assert models[name]["verdict"] == "safe", (name, models[name])
        assert models[name]["contaminated_by"] == []
        for s in models[name]["scenarios"]:
            assert s["extra_rows"] == s["missing_rows"] == s["duplicate_keys"] == 0
            assert s["rows"] == s["reference_rows"]


def test_append_with_lookback_duplicates(shop_run):
    models = by_name(shop_run["report"])
    for name in ("events_append_lookback", "events_keyed_append"):
        m = models[name]
        assert (m["verdict"], m["root_cause"], m["contaminated_by"]) == ("duplicates", True, [])
        replay = scenario(m, "replay")
        # 4,800 events over 6 days; the first build holds 2 days, then each of 4 daily batches
        # re-appends the 3-day lookback (1,600 + 2,400 + 3,200 + 3,2xx + 3,2xx rows)
        assert (replay["reference_rows"], replay["rows"], replay["missing_rows"]) == (4800, 13602, 0)
        assert (replay["extra_rows"], replay["duplicate_keys"]) == (8802, 4000)
        rerun = scenario(m, "rerun")
        assert rerun["rows"] > replay["rows"] and rerun["duplicate_keys"] == 4800


def test_strict_watermark_loses_rows_after_a_half_committed_batch(shop_run):
    m = by_name(shop_run["report"])["events_watermark"]
    assert (m["verdict"], m["root_cause"]) == ("loss", True)
    assert scenario(m, "replay")["verdict"] == "safe"
    partial = scenario(m, "partial")
    assert partial["verdict"] == "loss"
    assert partial["missing_rows"] > 100 and partial["extra_rows"] == 0
    assert partial["rows"] + partial["missing_rows"] == partial["reference_rows"] == 4800


def test_unaligned_partition_replacement_loses_rows(shop_run):
    m = by_name(shop_run["report"])["events_partition_overwrite_unaligned"]
    assert (m["verdict"], m["root_cause"]) == ("loss", True)
    replay = scenario(m, "replay")
    assert replay["verdict"] == "loss"
    assert replay["missing_rows"] == 4800 - replay["rows"] and replay["missing_rows"] > 1000


def test_random_column_is_nondeterministic(shop_run):
    m = by_name(shop_run["report"])["events_scored"]
    assert (m["verdict"], m["root_cause"]) == ("nondeterministic", True)
    det = scenario(m, "determinism")
    assert det["verdict"] == "nondeterministic"
    assert det["volatile_columns"] == ["sample_score"]
    assert det["rows"] == det["reference_rows"] == 4800


def test_contamination_names_the_root_cause(shop_run):
    models = by_name(shop_run["report"])
    revenue = models["daily_revenue"]
    assert revenue["root_cause"] is False
    assert revenue["contaminated_by"] == ["events_append_lookback"]
    assert revenue["verdict"] != "safe"
    monitor = models["daily_volume_monitor"]
    assert monitor["contaminated_by"] == ["events_watermark"]
    assert scenario(monitor, "replay")["verdict"] == "safe"
    assert scenario(monitor, "partial")["verdict"] != "safe"


def test_summary(shop_run):
    summary = shop_run["report"]["summary"]
    assert sorted(summary["root_causes"]) == sorted([
        "events_append_lookback", "events_keyed_append", "events_watermark",
        "events_partition_overwrite_unaligned", "events_scored"])
    assert summary["exit_code"] == 1
    # --steps 4 daily batches: reference 1, replay 5 and backfill 1 more in the same sandbox, rerun 9,
    # partial 6, determinism 1; no isolation run (the contaminated marts are tables)
    assert summary["dbt_invocations"] == 1 + 5 + 1 + 9 + 6 + 1
    assert summary["cutoffs"] == ["2026-03-03 00:00:00", "2026-03-04 00:00:00", "2026-03-05 00:00:00",
                                  "2026-03-06 00:00:00", "2026-03-07 00:00:00"]
