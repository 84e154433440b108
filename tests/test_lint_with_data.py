"""`rerun-safety lint --with-data`: each timed source's lateness read from the target (one read-only
aggregate query per source) and an incremental window on its event time that reaches back less than
it flagged, with the numbers; on DuckDB and PostgreSQL, with a model that has the defect and two that do
not. Without --with-data the rule never fires and no query reads the source."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from support.common import warehouse_target
from rerun_safety.cli import main

SOURCES = """version: 2
sources:
  - name: raw
    schema: raw
    loaded_at_field: loaded_at
    config: {event_time: event_time}
    tables:
      - name: events
"""
LOOKBACK = ("{{{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}}}\n"
            "select event_id, event_time, loaded_at from {{{{ source('raw', 'events') }}}}\n"
            "{{% if is_incremental() %}}\n"
            "where {column} >= (select max({column}) - interval '{back}' from {{{{ this }}}})\n"
            "{{% endif %}}\n")
MODELS = {
    "events_short": LOOKBACK.format(column="event_time", back="1 day"),  # rows arrive up to ~2 days late
    "events_wide": LOOKBACK.format(column="event_time", back="3 days"),  # reaches past the lateness
    "events_by_load": LOOKBACK.format(column="loaded_at", back="1 day"),  # on the load time: lateness is moot
}


def _project(root: Path) -> Path:
    project = root / "late"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: late\nversion: '1.0.0'\nconfig-version: 2\nprofile: late\n")
    (project / "models" / "sources.yml").write_text(SOURCES)
    for name, sql in MODELS.items():
        (project / "models" / f"{name}.sql").write_text(sql)
    return project


def _lint(project: Path, *extra: str) -> tuple[int, dict]:
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(project),
                                    "--format", "json", "--batch-size", "hour", *extra], catch_exceptions=False)
    return res.exit_code, json.loads(res.output)


def test_a_window_shorter_than_the_observed_lateness_is_an_error_with_the_numbers(engine, tmp_path, request):
    project = _project(tmp_path)
    query, _ = warehouse_target(engine, project, "late", tmp_path, request, "late_data")
    query("create schema raw")
    # 10,000 events a minute apart; event i is loaded (i % 50) hours after it happened: 99% within 48.51 hours
    query("create table raw.events as select i as event_id, "
          "timestamp '2026-03-01' + i * interval '1 minute' as event_time, "
          "timestamp '2026-03-01' + i * interval '1 minute' + (i % 50) * interval '1 hour' as loaded_at "
          f"from {'range(10000) t(i)' if engine == 'duckdb' else 'generate_series(0, 9999) as t(i)'}")
    code, doc = _lint(project, "--with-data")
    late = [f for f in doc["findings"] if f["rule"] == "window-shorter-than-lateness"]
    assert [(f["model"], f["severity"]) for f in late] == [("events_short", "error")], doc["findings"]
    assert late[0]["message"].startswith("incremental window `event_time >= (SELECT MAX(event_time) - INTERVAL ")
    assert ("reaches back 1 day before the watermark on event_time, but rows of raw.events arrive later than that "
            "after their event_time: 99% of its 10,000 rows within 2.0 days, the latest 2.0 days (by loaded_at, read "
            "from the target)") in late[0]["message"], late[0]["message"]
    assert code == 1 and _notes(doc, engine) == [] and "with_data" in doc["timings"]
    # without --with-data: the rule says nothing, and nothing read the source
    code, doc = _lint(project)
    assert [f for f in doc["findings"] if f["rule"] == "window-shorter-than-lateness"] == []
    assert "with_data" not in doc["timings"] and _notes(doc, engine) == []


def _notes(doc: dict, engine: str) -> list[str]:
    """The notes but the one of two runs at once, which PostgreSQL's (and only its) lint gives here: the
    three models are appends."""
    overlap = [n for n in doc["summary"]["notes"] if n.startswith("two runs at once (PostgreSQL): 3 incremental ")]
    assert len(overlap) == (engine == "postgres"), doc["summary"]["notes"]
    return [n for n in doc["summary"]["notes"] if n not in overlap]


def test_a_source_that_cannot_be_read_is_named_not_fatal(tmp_path, request):
    project = _project(tmp_path)
    query, _ = warehouse_target("duckdb", project, "late", tmp_path, request, "late_missing")
    query("create schema raw")  # no raw.events: nothing to read
    code, doc = _lint(project, "--with-data")
    assert [f for f in doc["findings"] if f["rule"] == "window-shorter-than-lateness"] == []
    (note,) = doc["summary"]["notes"]
    assert note.startswith("--with-data: raw.events not read (") and "events" in note, note
