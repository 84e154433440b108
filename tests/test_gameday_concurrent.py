"""The game day's `concurrent` scenario: one batch run twice at once, the first run's writes of each model held
uncommitted until the second run of that model has started and blocked or written (warehouse/postgres/overlap.py).

On PostgreSQL, a copy of examples/shop, labelled before the run (tests/strategy/test_overlap.py measured the
same strategies with two plain `dbt run` processes):
- events_delete_insert, events_merge (dbt's delete+insert and merge on event_id, safe run one at a time):
  `duplicates` in concurrent only (the second run cannot see the first's uncommitted rows of the batch: the
  batch's 801 new keys twice), "only when two runs overlap"; fixed by `rerun_safety.serialize_runs()` as a
  pre_hook;
- ev_deleteinsert_serialised, ev_merge_serialised (the same with that pre_hook) and events_partition_overwrite
  (which takes the same lock itself): `safe` in concurrent, exercised (not `untested`);
- events_append_lookback (an append re-reading three days): `duplicates` in rerun and concurrent; keyed on
  event_id mends the rerun and leaves the overlap, so the fix is keyed, then serialised;
- ev_merge_hooked (events_merge with a pre_hook of its own): `duplicates` when two runs overlap, and no
  candidate (the hook is not replaced), with why.
On DuckDB a second process cannot open a database file another process writes: the scenario is not
applicable there (a note; alone, exit 2 in one line), and a dbt run beside an open writer fails to open it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from support.gameday import SHOP, by_name, copy_project, dbt_deps, load_report, pg_profile, run_cli, scenario, \
    shop_generator

SERIALISED = ("{{{{ config(materialized='incremental', incremental_strategy='{strategy}', unique_key='event_id', "
              "pre_hook='{{{{ rerun_safety.serialize_runs() }}}}') }}}}\n"
              "select * from {{{{ ref('stg_events') }}}}\n"
              "{{% if is_incremental() %}}\n"
              "where event_time >= (select max(event_time) - interval '3 days' from {{{{ this }}}})\n"
              "{{% endif %}}\n")
# a merge whose config() has a pre_hook of its own: the fix search does not replace it (no candidate, with why)
HOOKED_MERGE = ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='event_id', "
                "pre_hook='select 1') }}\n"
                "select * from {{ ref('stg_events') }}\n"
                "{% if is_incremental() %}\n"
                "where event_time >= (select max(event_time) - interval '3 days' from {{ this }})\n"
                "{% endif %}\n")
MODELS = ["events_delete_insert", "events_merge", "events_partition_overwrite", "ev_deleteinsert_serialised",
          "ev_merge_serialised", "events_append_lookback", "ev_merge_hooked"]


def _shop_with_serialised(dest: Path) -> Path:
    project = copy_project(SHOP, dest)
    for strategy, name in (("delete+insert", "ev_deleteinsert_serialised"), ("merge", "ev_merge_serialised")):
        (project / "models/staging" / f"{name}.sql").write_text(SERIALISED.format(strategy=strategy))
    (project / "models/staging/ev_merge_hooked.sql").write_text(HOOKED_MERGE)
    return project


def test_two_runs_at_once_double_dbts_strategies_not_a_serialised_one_and_the_fix_serialises(pg_server, tmp_path):
    project = _shop_with_serialised(tmp_path / "shop")
    dbname = pg_server.create_database("shop_concurrent")
    shop_generator().load_postgres(pg_server.dsn(dbname))
    profiles = pg_profile(pg_server, dbname, tmp_path / "profiles", "shop", "analytics")
    dbt_deps(project, profiles)
    code, out, err = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                              "--output-dir", str(tmp_path / "out"), "--steps", "3", "--threads", "2",
                              "--scenarios", "rerun,concurrent", "--select", " ".join(MODELS), "--fix"])
    assert code == 1, out + err
    report = load_report(tmp_path / "out")
    models = by_name(report)
    assert report["summary"]["scenarios"] == ["reference", "replay", "rerun", "concurrent"]
    assert {n: m["verdict"] for n, m in models.items()} == {
        "events_delete_insert": "duplicates", "events_merge": "duplicates", "events_append_lookback": "duplicates",
        "events_partition_overwrite": "safe", "ev_deleteinsert_serialised": "safe", "ev_merge_serialised": "safe",
        "ev_merge_hooked": "duplicates", "stg_events": "safe"}
    for name in ("events_delete_insert", "events_merge", "ev_merge_hooked"):
        concurrent = scenario(models[name], "concurrent")
        assert (concurrent["verdict"], concurrent["duplicate_keys"], concurrent["extra_rows"]) == ("duplicates", 801, 801)
        assert [scenario(models[name], s)["verdict"] for s in ("replay", "rerun")] == ["safe", "safe"]
    for name in ("events_partition_overwrite", "ev_deleteinsert_serialised", "ev_merge_serialised"):
        concurrent = scenario(models[name], "concurrent")
        assert (concurrent["verdict"], concurrent["message"]) == ("safe", ""), concurrent  # exercised
    assert scenario(models["events_append_lookback"], "rerun")["duplicate_keys"] == 4800
    lines: dict[str, str] = {}  # each model's row of the summary table (its first line)
    for ln in out.splitlines():
        if ln.strip() and ln.split()[0] in models:
            lines.setdefault(ln.split()[0], ln)
    assert "root cause, only when two runs overlap" in lines["events_delete_insert"]
    assert "root cause, only when two runs overlap" in lines["events_merge"]
    assert "only when two runs overlap" not in lines["events_append_lookback"]
    assert "| events\\_merge | **duplicates** | root cause, only when two runs overlap | concurrent |" in (
        tmp_path / "out" / "report.md").read_text()

    fixes = {f["model"]: f for f in report["fixes"]}
    assert {n: (f["verified"], f["candidate"]) for n, f in fixes.items()} == {
        "events_delete_insert": (True, "serialise its runs"), "events_merge": (True, "serialise its runs"),
        "events_append_lookback": (True, "keyed on event_id, then serialise its runs"), "ev_merge_hooked": (False, "")}
    assert fixes["ev_merge_hooked"]["why_none"] == (
        "no candidate: its config() sets a pre_hook already; add `{{ rerun_safety.serialize_runs() }}` to it (a "
        "second run then waits for the first's commit)")
    assert "+{{ config(pre_hook='{{ rerun_safety.serialize_runs() }}') }}\n" in fixes["events_merge"]["patch"]
    assert ("+{{ config(materialized='incremental', incremental_strategy='delete+insert', event_time='event_time', "
            "unique_key='event_id', pre_hook='{{ rerun_safety.serialize_runs() }}') }}\n"
            ) in fixes["events_append_lookback"]["patch"]
    (tried,) = fixes["events_append_lookback"]["tried"]
    assert tried["candidate"] == "keyed on event_id"
    assert tried["why"] == "events_append_lookback stays duplicates (concurrent: 801 extra, 801 dup keys)", tried


def test_duckdb_cannot_run_two_writers_of_one_file_so_concurrent_is_not_applicable(tmp_path):
    project = copy_project(SHOP, tmp_path / "shop")
    shop_generator().load_duckdb(str(project / "shop.duckdb"))
    dbt_deps(project, project)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        code, out, err = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(project),
                                  "--output-dir", str(tmp_path / "out"), "--scenarios", "concurrent"])
        assert code == 2, out + err
        (line,) = [ln for ln in (out + err).strip().splitlines() if ln.strip()]
        assert line.startswith("rerun-safety: error: --scenarios concurrent: not applicable on DuckDB (one process "
                               "at a time opens a DuckDB file to write"), line
        assert not (tmp_path / "out").exists()
        code, out, err = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(project),
                                  "--output-dir", str(tmp_path / "out"), "--steps", "2",
                                  "--scenarios", "rerun,concurrent", "--select", "events_merge"])
    finally:
        os.chdir(cwd)
    assert code == 0, out + err
    report = load_report(tmp_path / "out")
    assert report["summary"]["scenarios"] == ["reference", "rerun"]
    assert any(n.startswith("concurrent: not applicable on DuckDB: one process at a time opens a DuckDB file")
               for n in report["summary"]["notes"])

    # what the note says, measured: a dbt run while another process has the file open to write fails to open it
    holder = duckdb.connect(str(project / "shop.duckdb"))
    try:
        run = subprocess.run([str(Path(sys.executable).parent / "dbt"), "run", "--select", "events_merge",
                              "--project-dir", str(project), "--profiles-dir", str(project)], cwd=project,
                             capture_output=True, text=True, env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})
    finally:
        holder.close()
    assert run.returncode == 2, run.stdout
    assert 'IO Error: Could not set lock on file "' in run.stdout and "Conflicting lock is held" in run.stdout
    with duckdb.connect(str(project / "shop.duckdb"), read_only=True) as con:  # it wrote nothing
        assert con.execute("select count(*) from information_schema.tables where table_schema = 'analytics'"
                           ).fetchone() == (0,)


def test_scenario_groups_default_all_and_names():
    from rerun_safety.gameday.options import GamedayOptions

    def names(value):
        return GamedayOptions.build(project_dir=".", scenarios=value).scenarios

    default = ("reference", "replay", "rerun", "partial", "backfill", "late", "determinism")
    assert names("default") == names("") == default
    assert names("all") == ("reference", "replay", "rerun", "partial", "backfill", "concurrent", "late", "determinism")
    assert names("default,concurrent") == names("all")
    assert names("concurrent") == ("reference", "concurrent")
    with pytest.raises(Exception, match="unknown scenario 'overlap'"):
        names("overlap")


def test_the_first_run_waits_before_a_commit_that_follows_a_write_and_the_second_before_each_models_start():
    from rerun_safety.warehouse.postgres.overlap import HELD, START, Hold

    first = Hold(True, {"model.p.a": 0, "model.p.b": 1})
    assert first.before("model.p.a", "BEGIN") == []
    assert first.before("model.p.a", "COMMIT") == []  # nothing written yet: an introspection's commit
    assert first.before("model.p.a", "/* dbt */\n-- the batch\n  create temporary table t as select 1") == []
    assert first.before("model.p.a", "COMMIT") == [f"select pg_advisory_lock_shared({HELD}, 0)",
                                                   f"select pg_advisory_unlock_shared({HELD}, 0)"]
    assert first.before("model.p.a", "COMMIT") == []  # held once
    assert first.before("master", "insert into x select 1") == first.before("master", "COMMIT") == []
    second = Hold(False, {"model.p.a": 0, "model.p.b": 1})
    assert second.before("model.p.b", "BEGIN") == [f"select pg_advisory_lock_shared({START}, 1)",
                                                   f"select pg_advisory_unlock_shared({START}, 1)"]
    assert second.before("model.p.b", "delete from t") == second.before("other", "BEGIN") == []
