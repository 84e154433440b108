"""The game day on a project it was not written for: other names, a custom schema, a composite
key, a quoted mixed-case column, time columns from loaded_at_field and from meta (a DATE), a dedup
view, window_filter, and a model that fails only on incremental runs. Plus the error cases."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from support.common import FIXTURES
from support.gameday import by_name, duckdb_fixture_project, file_sha256, load_report, run_cli, scenario

sys.path.insert(0, str(FIXTURES / "payments"))
import load_data  # noqa: E402


@pytest.fixture(scope="module")
def payments_project(tmp_path_factory):
    return duckdb_fixture_project(tmp_path_factory.mktemp("payments"), "payments", load_data.load_duckdb)


def _gameday(project: Path, *extra: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        return run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(project), *extra])
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def payments_run(payments_project, tmp_path_factory):
    out = tmp_path_factory.mktemp("payments_out")
    before = file_sha256(payments_project / "payments.duckdb")
    code, stdout, stderr = _gameday(payments_project, "--steps", "3", "--threads", "1", "--output-dir", str(out))
    return {"code": code, "stderr": stderr, "report": load_report(out),
            "unchanged": before == file_sha256(payments_project / "payments.duckdb")}


def test_verdicts(payments_run):
    assert payments_run["code"] == 1, payments_run["stderr"]
    assert payments_run["unchanged"]
    verdicts = {name: m["verdict"] for name, m in by_name(payments_run["report"]).items()}
    assert verdicts == {
        "payments_current": "safe",
        "payments_merged": "safe",
        "payments_audited": "safe",
        # `>=` on the watermark duplicates the boundary row, and loses rows after a half-committed batch
        "payments_appended": "loss",
        "balance_by_account": verdicts["balance_by_account"],
        # a DATE watermark re-aggregating whole days with delete+insert converges
        "ledger_daily": "safe",
        "breaks_when_incremental": "error",
    }
    assert verdicts["balance_by_account"] in ("drift", "loss")


def test_boundary_row_appended_again_on_each_step(payments_run):
    m = by_name(payments_run["report"])["payments_appended"]
    assert m["root_cause"] is True
    replay = scenario(m, "replay")
    # `>=` on the watermark re-reads exactly the newest row at each of the 3 daily batches
    assert (replay["reference_rows"], replay["rows"], replay["duplicate_keys"], replay["missing_rows"]) == (600, 603, 3, 0)
    rerun = scenario(m, "rerun")
    # each of the 6 incremental runs re-appends the newest row it finds: the first build's newest (155),
    # then each day's newest twice (360, 566) and the last one once more (600)
    assert (rerun["rows"], rerun["extra_rows"], rerun["duplicate_keys"]) == (606, 6, 4)
    assert sorted({r["payment_no"] for r in rerun["sample"]}) == [155, 360, 566, 600]
    partial = scenario(m, "partial")
    assert partial["verdict"] == "loss" and partial["missing_rows"] > 0


def test_contamination_and_error_isolation(payments_run):
    models = by_name(payments_run["report"])
    assert models["balance_by_account"]["contaminated_by"] == ["payments_appended"]
    assert models["balance_by_account"]["root_cause"] is False
    broken = models["breaks_when_incremental"]
    assert scenario(broken, "determinism")["verdict"] == "safe"
    replay = scenario(broken, "replay")
    assert replay["verdict"] == "error" and "no_such_column" in replay["message"]


def test_date_time_column_from_meta(payments_run):
    m = by_name(payments_run["report"])["ledger_daily"]
    for s in m["scenarios"]:
        assert (s["verdict"], s["rows"], s["reference_rows"]) == ("safe", 4, 4), s


def test_ignored_audit_column_is_not_judged(payments_run):
    m = by_name(payments_run["report"])["payments_audited"]
    assert scenario(m, "determinism")["verdict"] == "safe"


# ------------------------------------------------------------------ errors: exit 2, one line

def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_no_incremental_model_selected(payments_project):
    code, _, err = _gameday(payments_project, "--select", "payments_audited")
    assert code == 2
    assert "no incremental model is selected" in _one_line(err)


def test_selection_matching_nothing(payments_project):
    code, _, err = _gameday(payments_project, "--select", "no_such_model_anywhere")
    assert code == 2
    assert "matches no model" in _one_line(err)


def test_model_that_fails_to_compile(payments_project, tmp_path):
    project = Path(shutil.copytree(payments_project, tmp_path / "p", symlinks=True))
    (project / "models" / "orphan.sql").write_text("select * from {{ ref('does_not_exist') }}\n")
    code, _, err = _gameday(project)
    assert code == 2
    line = _one_line(err)
    assert "orphan" in line and "does_not_exist" in line


def test_source_without_time_column(payments_project, tmp_path):
    project = Path(shutil.copytree(payments_project, tmp_path / "p", symlinks=True))
    src = project / "models" / "sources.yml"
    src.write_text(src.read_text().replace("        loaded_at_field: ingested_at\n", ""))
    code, _, err = _gameday(project, "--select", "payments_appended")
    assert code == 2 and "Traceback" not in err
    # one line per source without a time column, each with the fix, and its one timestamp column filled in
    assert err.strip().splitlines() == [
        "rerun-safety: error: 1 source(s) read by incremental models have no time column, so no rows can arrive "
        "batch by batch:",
        "  source ingest.payments (read by payments_appended): set `config: {event_time: <column>}` on it in its "
        "sources .yml, or `time_columns: {ingest.payments: <column>}` in rerun_safety.yml (date or time columns: "
        "ingested_at; to replay by it: `time_columns: {ingest.payments: ingested_at}`)"]


def test_partial_going_on_from_replays_sandbox_judges_as_partial_alone(payments_run, payments_project, tmp_path):
    """With replay beside it, partial goes on from a copy of replay's sandbox taken after their runs in
    common (the first build and batch 1 of 3) instead of running them again: one invocation fewer, the
    same results for every model as partial run alone."""
    out = tmp_path / "out"
    code, _, err = _gameday(payments_project, "--steps", "3", "--threads", "1", "--scenarios", "partial",
                            "--output-dir", str(out))
    assert code == 1, err
    alone = load_report(out)
    keys = ("verdict", "reference_rows", "rows", "extra_rows", "missing_rows", "duplicate_keys", "missing_keys",
            "extra_keys", "changed_rows", "message", "partitions")

    def partial(report):
        return {n: {k: scenario(m, "partial").get(k) for k in keys} for n, m in by_name(report).items()}

    assert partial(payments_run["report"]) == partial(alone)
    assert partial(alone)["payments_appended"]["verdict"] == "loss"
    assert partial(alone)["payments_appended"]["missing_rows"] > 0
    # alone: reference, first build, batch 1, batch 2 in halves (2), batch 3, the models below the one that
    # differs; beside replay (payments_run) the first build and batch 1 are replay's (test_scenarios)
    assert alone["summary"]["dbt_invocations"] == 1 + 1 + 1 + 2 + 1 + 1


def test_incremental_model_no_timed_input_reaches_is_untested_not_a_stop(payments_project, tmp_path):
    """Beside a model with a timed input, an incremental model that reads only reference data (no time
    column) no longer stops the game day: it runs, is `untested` (never `safe`) with why, and the run
    notes name its source and the fix; declared static in rerun_safety.yml, the note is left out."""
    project = Path(shutil.copytree(payments_project, tmp_path / "p", symlinks=True))
    (project / "models" / "fx_latest.sql").write_text(
        "{{ config(materialized='incremental', unique_key='currency') }}\n"
        "select currency, rate from {{ source('ref_data', 'fx_rates') }}\n")
    out = tmp_path / "out"
    # two batches, and the scenario where the watermark loses rows: the verdicts are the full run's
    few = ("--steps", "2", "--scenarios", "partial")
    code, _, err = _gameday(project, "--select", "payments_appended fx_latest", "--output-dir", str(out), *few)
    assert code == 1 and "Traceback" not in err, err
    report = json.loads((out / "report.json").read_text())
    models = by_name(report)
    assert {n: m["verdict"] for n, m in models.items()} == {"payments_appended": "loss", "fx_latest": "untested"}
    assert models["fx_latest"]["reason"].startswith("no timed input feeds it")
    notes = [n for n in report["summary"]["notes"] if n.startswith("incremental models that no timed input reaches")]
    assert len(notes) == 1 and "fx_latest (source ref_data.fx_rates)" in notes[0], report["summary"]["notes"]
    (project / "rerun_safety.yml").write_text("inputs:\n  ref_data.fx_rates: static\n")
    code, _, err = _gameday(project, "--select", "payments_appended fx_latest", "--output-dir", str(out), *few)
    report = json.loads((out / "report.json").read_text())
    assert code == 1 and by_name(report)["fx_latest"]["verdict"] == "untested", err
    assert not [n for n in report["summary"]["notes"] if n.startswith("incremental models that no timed input reaches")]


def test_unsupported_adapter(payments_project, tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(
        "payments:\n  target: wh\n  outputs:\n    wh:\n      type: snowflake\n      account: x\n")
    code, _, err = run_cli(["gameday", "--project-dir", str(payments_project), "--profiles-dir", str(profiles)])
    assert code == 2
    assert "adapter 'snowflake'" in _one_line(err)


def test_unknown_target(payments_project):
    code, _, err = _gameday(payments_project, "--target", "prod")
    assert code == 2
    assert "target 'prod' not found" in _one_line(err)


def test_a_model_that_does_not_compile_even_with_its_upstream_built_is_named_not_silent(payments_project, tmp_path):
    """A model whose Jinja queries a relation that exists nowhere cannot be compiled to find what it reads:
    the game day goes on with the inputs it knows, and a run note names the model and dbt's message."""
    project = Path(shutil.copytree(payments_project, tmp_path / "p", symlinks=True))
    (project / "models" / "asks_nowhere.sql").write_text(
        "{% if execute %}{% set r = run_query('select max(x) from nowhere_schema.nowhere_table') %}{% endif %}\n"
        "select account_id from {{ ref('payments_appended') }}\n")
    out = tmp_path / "out"
    code, _, err = _gameday(project, "--select", "payments_appended asks_nowhere", "--output-dir", str(out),
                            "--steps", "2", "--scenarios", "partial")
    assert code == 1 and "Traceback" not in err, err
    report = json.loads((out / "report.json").read_text())
    notes = [n for n in report["summary"]["notes"] if n.startswith("models that did not compile")]
    assert len(notes) == 1, report["summary"]["notes"]
    assert "asks_nowhere (dbt: " in notes[0] and "nowhere_table" in notes[0]
    assert notes[0].endswith("an input only they read is not replayed, and their verdicts cover the inputs found "
                             "through source() and ref()")
    assert by_name(report)["asks_nowhere"]["verdict"] == "error"
