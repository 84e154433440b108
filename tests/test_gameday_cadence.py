"""Verdicts a team can act on, on both engines: the game day replays at the user's cadence with a
simulated clock, exercises every model (sources with different ranges, untested said as such),
finds a model's own defect below a broken parent, and takes DOUBLE sums that differ only in the
order of addition as equal."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from support.common import FIXTURES
from support.gameday import by_name, copy_project, dbt_deps, load_report, pg_profile, run_cli, scenario

sys.path.insert(0, str(FIXTURES / "cadence"))
import cadence_data  # noqa: E402  (a name no other fixture uses)


def _load(engine: str, project: Path, tmp: Path, request) -> Path:
    """Load the fixture's raw data; returns the profiles dir."""
    if engine == "duckdb":
        cadence_data.load_duckdb(str(project / "cadence.duckdb"))
        return project
    server = request.getfixturevalue("pg_server")
    dbname = server.create_database("cadence")
    cadence_data.load_postgres(server.dsn(dbname))
    return pg_profile(server, dbname, tmp / "profiles", "cadence", "analytics")


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def cadence(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"cadence_{request.param}")
    project = copy_project(FIXTURES / "cadence", tmp / "cadence")
    profiles = _load(request.param, project, tmp, request)
    dbt_deps(project, profiles)
    return {"engine": request.param, "project": project, "profiles": profiles, "tmp": tmp}


def gameday(c: dict, *extra: str, out_name: str = "out") -> tuple[int, str, dict | None]:
    out = c["tmp"] / out_name
    shutil.rmtree(out, ignore_errors=True)
    cwd = os.getcwd()
    os.chdir(c["project"])
    try:
        code, _, stderr = run_cli(["gameday", "--project-dir", str(c["project"]), "--profiles-dir",
                                   str(c["profiles"]), "--output-dir", str(out), *extra])
    finally:
        os.chdir(cwd)
    return code, stderr, load_report(out) if (out / "report.json").exists() else None


@pytest.fixture(scope="module")
def full_run(cadence):
    code, stderr, report = gameday(cadence, "--batch-size", "day", "--steps", "4", "--threads", "2")
    assert report is not None, stderr
    return {"code": code, "stderr": stderr, "report": report}


def test_verdicts_are_exactly_right(full_run):
    assert full_run["code"] == 1, full_run["stderr"]
    models = by_name(full_run["report"])
    got = {n: (m["verdict"], m["root_cause"], m["contaminated_by"]) for n, m in models.items()}
    assert got == {
        "orders_recent": ("safe", False, []),
        "revenue_daily": ("safe", False, []),
        "clicks_merged": ("safe", False, []),
        "regions_inc": ("untested", False, []),
        "orders_watermark": ("loss", True, []),
        "orders_dup": ("duplicates", True, []),
        "clicks_appended": ("duplicates", True, []),
        # its own lookback append, found with its parent kept right; it also inherits the parent's
        "orders_dup_rollup": ("duplicates", True, ["orders_dup"]),
        "orders_dup_daily": ("drift", False, ["orders_dup"]),
    }
    summary = full_run["report"]["summary"]
    assert sorted(summary["root_causes"]) == ["clicks_appended", "orders_dup", "orders_dup_rollup", "orders_watermark"]
    assert summary["contaminated"] == ["orders_dup_daily"]  # a root cause is never listed as contaminated too
    assert summary["exit_code"] == 1


def test_schedule_is_the_users_cadence(full_run):
    summary = full_run["report"]["summary"]
    assert (summary["batch_size"], summary["steps"]) == ("day", 4)
    # 30 days of orders up to 2026-05-10: the last four days are replayed, the first build holds the rest
    assert summary["cutoffs"] == ["2026-05-07 00:00:00", "2026-05-08 00:00:00", "2026-05-09 00:00:00",
                                  "2026-05-10 00:00:00", "2026-05-11 00:00:00"]
    assert summary["notes"][0].startswith("simulated schedule: 4 day batches from 2026-05-07 00:00:00")
    # reference 1, the shared first build 1, replay 4 (+1 backfill in the same sandbox), rerun 8, partial 3
    # (from a copy of replay's sandbox after batch 2);
    # at the end of those 4 scenarios orders_dup_daily is built, as orders_dup differs (rebuild.py): 4;
    # determinism 0 (no model's SQL depends on the order of rows: nothing to build again); and
    # orders_dup_rollup replayed in isolation in the 4 scenarios where its parent differs (each from its
    # own first build): 5 + 9 + 6 + 6
    assert summary["dbt_invocations"] == 1 + 1 + 4 + 1 + 8 + 3 + 4 + 0 + (5 + 9 + 6 + 6)
    determinism = [s for m in full_run["report"]["models"] for s in m["scenarios"] if s["name"] == "determinism"]
    assert len(determinism) == 9 and {s["verdict"] for s in determinism} == {"safe"}
    assert all(s["message"].startswith("not built again: its SQL has nothing whose result depends on the order")
               for s in determinism)


def test_a_clock_window_is_replayed_at_the_batch_time(full_run):
    m = by_name(full_run["report"])["orders_recent"]  # `where ordered_at >= current_date - 14`, delete+insert
    assert m["notes"] == ["reads the clock (current_date): each run saw the end of its batch"]
    for s in m["scenarios"]:
        assert (s["rows"], s["reference_rows"], s["missing_rows"], s["extra_rows"]) == (900, 900, 0, 0)
    # the strict watermark on the same source still loses the rows a half-committed batch left behind
    w = by_name(full_run["report"])["orders_watermark"]
    assert scenario(w, "replay")["verdict"] == "safe"
    partial = scenario(w, "partial")
    assert partial["verdict"] == "loss" and partial["rows"] + partial["missing_rows"] == 900
    assert 0 < partial["missing_rows"] < 30  # at most the day that was half committed


def test_every_model_is_exercised_or_called_untested(full_run):
    report = full_run["report"]
    models = by_name(report)
    # raw.clicks ends three weeks before the orders: it is replayed over its own last four days
    assert any(n.startswith("raw.clicks ends before the replayed batches") and "2026-03-27 00:00:00 .. "
               "2026-03-31 00:00:00" in n for n in report["summary"]["notes"])
    appended = scenario(models["clicks_appended"], "replay")
    assert appended["verdict"] == "duplicates" and appended["extra_rows"] > 0
    assert [s["verdict"] for s in models["clicks_merged"]["scenarios"]] == ["safe"] * 6
    untested = models["regions_inc"]
    assert [s["verdict"] for s in untested["scenarios"]] == ["safe", "untested", "untested", "untested",
                                                             "untested", "safe"]
    assert untested["reason"].startswith("no timed input feeds it")


def test_a_table_below_a_safe_model_is_judged_from_the_reference_and_below_a_broken_one_is_built(full_run):
    from rerun_safety.gameday.rebuild import CARRIED, CARRIED_ORDER

    models = by_name(full_run["report"])
    # revenue_daily reads orders_recent, safe in every scenario: never built again, its output is the reference's
    m = models["revenue_daily"]
    assert [s["verdict"] for s in m["scenarios"]] == ["safe"] * 6
    assert {s["name"]: s["message"] for s in m["scenarios"] if s["name"] != "reference"} == {
        "replay": CARRIED, "rerun": CARRIED, "partial": CARRIED, "backfill": CARRIED, "determinism": CARRIED_ORDER}
    # orders_dup_daily reads orders_dup, which differs: built at the end of each scenario and compared
    below = {s["name"]: s for s in models["orders_dup_daily"]["scenarios"]}
    for name in ("replay", "rerun", "partial", "backfill"):
        assert below[name]["verdict"] == "drift" and below[name]["changed_rows"] > 0, name
        assert below[name]["message"] != CARRIED


def test_batch_size_steps_and_slice_change_exactly_what_the_report_says(cadence):
    code, stderr, report = gameday(cadence, "--scenarios", "replay", "--batch-size", "2d", "--steps", "2",
                                   "--since", "2026-04-25", "--until", "2026-05-09", "--select", "orders_recent+",
                                   out_name="sliced")
    assert code == 0, stderr
    summary = report["summary"]
    assert (summary["batch_size"], summary["steps"], summary["scenarios"]) == ("2d", 2, ["reference", "replay"])
    assert summary["cutoffs"] == ["2026-05-05 00:00:00", "2026-05-07 00:00:00", "2026-05-09 00:00:00"]
    assert any(n.startswith("slice: only rows from 2026-04-25 00:00:00 to 2026-05-09 00:00:00") for n in summary["notes"])
    assert summary["dbt_invocations"] == 1 + 3
    # 14 days of 30 orders in the slice
    for name in ("orders_recent",):
        s = scenario(by_name(report)[name], "replay")
        assert (s["verdict"], s["rows"], s["reference_rows"]) == ("safe", 420, 420)


def test_every_missing_time_column_at_once_then_the_runner_config_fixes_it(cadence):
    sources = cadence["project"] / "models" / "sources.yml"
    original = sources.read_text()
    try:
        sources.write_text("version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n"
                           "      - name: orders\n      - name: clicks\n")
        code, stderr, report = gameday(cadence, "--scenarios", "replay", out_name="missing")
        assert code == 2 and report is None
        lines = stderr.strip().splitlines()
        assert lines[0] == ("rerun-safety: error: 2 source(s) read by incremental models have no time column, "
                            "so no rows can arrive batch by batch:")
        assert lines[1].startswith("  source raw.clicks (read by clicks_appended, clicks_merged): set `config: "
                                   "{event_time: <column>}`")
        # each source's one timestamp column, read from the user's database, in a line ready to copy
        assert lines[1].endswith(" (date or time columns: clicked_at; to replay by it: `time_columns: "
                                 "{raw.clicks: clicked_at}`)")
        assert lines[2].startswith("  source raw.orders (read by orders_dup, orders_dup_rollup, orders_recent, "
                                   "orders_watermark): set")
        assert lines[2].endswith("(date or time columns: ordered_at; to replay by it: `time_columns: "
                                 "{raw.orders: ordered_at}`)")
        (cadence["project"] / "rerun_safety.yml").write_text(
            "time_columns:\n  raw.orders: ordered_at\n  raw.clicks: clicked_at\n")
        code, stderr, report = gameday(cadence, "--scenarios", "replay", "--select", "orders_recent",
                                       out_name="configured")
        assert code == 0, stderr
        assert scenario(by_name(report)["orders_recent"], "replay")["rows"] == 900
    finally:
        sources.write_text(original)
        (cadence["project"] / "rerun_safety.yml").unlink(missing_ok=True)


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "daily"], "--batch-size 'daily' is not a batch"),
    (["--since", "2026-05-09", "--until", "2026-05-01"], "--until (2026-05-01 00:00:00) must be after --since"),
    (["--since", "yesterday"], "--since 'yesterday' is not a date or timestamp"),
    (["--since", "2027-01-01"], "every timed input is empty, so there is nothing to replay"),
])
def test_bad_schedule_options_exit_2_with_one_line(cadence, args, message):
    code, stderr, report = gameday(cadence, "--scenarios", "replay", *args, out_name="bad")
    assert code == 2 and report is None
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert message in stderr


def test_late_fraction_makes_rows_arrive_late_on_a_source_without_a_load_time(cadence):
    code, stderr, report = gameday(cadence, "--scenarios", "late", "--late-fraction", "0.05", "--late-by", "2d",
                                   "--select", "orders_watermark orders_recent", out_name="late")
    assert code == 1, stderr
    summary = report["summary"]
    assert summary["scenarios"] == ["reference", "late"]
    # 5 % of the orders arrive two days late (which rows: a hash of the row, so each engine picks its
    # own); those that land after a later batch than their event's are counted
    note = next(n for n in summary["notes"] if n.startswith("late: "))
    late_rows = int(note.split()[1])
    assert note == (f"late: {late_rows} rows of raw.orders arrive after a later batch than their event time "
                    "(5% of its rows delayed by 2d)")
    assert 5 <= late_rows <= 30  # about 5 % of the 4 x 30 orders replayed, and of the days before
    models = by_name(report)
    late = scenario(models["orders_watermark"], "late")
    assert (late["verdict"], late["rows"] + late["missing_rows"]) == ("loss", 900)
    assert 0 < late["missing_rows"] <= late_rows
    assert models["orders_watermark"]["notes"][0].startswith(f"dropped {late['missing_rows']} rows in late")
    # a delete+insert over the last 14 days by the clock takes rows two days late in its stride
    assert scenario(models["orders_recent"], "late")["verdict"] == "safe"


def test_sentinel_timestamps_are_kept_out_of_the_timeline_but_not_the_data(cadence, request):
    """'infinity' and 9999-12-31 in a time column: the schedule is that of the real data, and the
    sentinel rows arrive with the last batch (an early one is in the first build)."""
    rows = ["(90001, 1, 1.5, 'infinity')", "(90002, 2, 2.5, '9999-12-31 23:59:59')", "(90003, 3, 3.5, '-infinity')"]

    def execute(sql: str) -> None:
        if cadence["engine"] == "duckdb":
            import duckdb

            with duckdb.connect(str(cadence["project"] / "cadence.duckdb")) as con:
                con.execute(sql)
            return
        import yaml

        out = yaml.safe_load((cadence["profiles"] / "profiles.yml").read_text())["cadence"]["outputs"]["dev"]
        conn = request.getfixturevalue("pg_server").connect(out["dbname"])
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    execute("insert into raw.orders values " + ", ".join(rows))
    try:
        code, stderr, report = gameday(cadence, "--scenarios", "replay", "--select", "orders_recent",
                                       out_name="sentinels")
    finally:
        execute("delete from raw.orders where order_id > 90000")
    assert code == 0, stderr
    assert report["summary"]["cutoffs"][0] == "2026-05-07 00:00:00"
    s = scenario(by_name(report)["orders_recent"], "replay")
    assert (s["verdict"], s["rows"], s["reference_rows"]) == ("safe", 903, 903)
