""""Safe" means exercised: a model that a scenario did not build, or whose decisive step (the
half-committed batch, the backfilled batch) held none of its input rows, is `untested` in every
report, never `safe`."""
from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
import yaml
from rerun_safety.gameday.timeline import row_hash_predicate

from support.common import duckdb_profile, load_duckdb_with, load_postgres_with, postgres_profile, write_profiles
from support.gameday import by_name, load_report, run_cli

START = dt.datetime(2025, 3, 1)


def _rows() -> tuple[list[tuple], list[tuple]]:
    """raw.sparse: 5 rows a day for 26 days, then 3 rows in the last 4 days (days 27, 29, 30);
    raw.dense: 12 rows a day for 30 days."""
    sparse = [(d * 10 + i, START + dt.timedelta(days=d, hours=2 * i + 1)) for d in range(26) for i in range(5)]
    sparse += [(1000 + d, START + dt.timedelta(days=d, hours=5)) for d in (26, 28, 29)]
    dense = [(d * 100 + i, START + dt.timedelta(days=d, hours=2 * i, minutes=7)) for d in range(30) for i in range(12)]
    return sparse, dense


def _load_for(dialect: str):
    """The fixture's data on an engine. raw.one_half: like raw.dense for 26 days, then, in the last
    4 days, only the rows that the engine's row hash puts in the half of a batch the partial
    scenario commits first (about 4 of 8 a day), so no half-committed batch leaves a row behind."""
    first_half = row_hash_predicate(dialect, 2, 1).sql(dialect=dialect)

    def load(execute, executemany) -> None:
        _load(execute, executemany)
        execute("create table raw.one_half_candidates (id integer, ts timestamp)")
        executemany("insert into raw.one_half_candidates values (%s, %s)",
                    [(d * 100 + i, START + dt.timedelta(days=d, hours=2 * i + 1)) for d in range(30)
                     for i in range(5 if d < 26 else 8)])
        execute("create table raw.one_half as select * from raw.one_half_candidates rs_row where "
                f"ts < timestamp '2025-03-27' or {first_half}")
        execute("drop table raw.one_half_candidates")

    return load


def _load(execute, executemany) -> None:
    sparse, dense = _rows()
    execute("create schema raw")
    for name, rows in (("sparse", sparse), ("dense", dense)):
        execute(f"create table raw.{name} (id integer, ts timestamp)")
        executemany(f"insert into raw.{name} values (%s, %s)", rows)
    # a connector's reference table: every row synced at once, four weeks before the last batch
    execute("create table raw.countries (country_id integer, name varchar(20), _fivetran_synced timestamp)")
    executemany("insert into raw.countries values (%s, %s, %s)",
                [(c, f"country {c}", START + dt.timedelta(days=2, minutes=c)) for c in range(5)])
    # current state: one row per account, updated in place (the last updates fall in the replayed days)
    execute("create table raw.accounts (account_id integer, plan varchar(10), updated_at timestamp)")
    executemany("insert into raw.accounts values (%s, %s, %s)",
                [(a, "pro" if a % 2 else "free", START + dt.timedelta(days=1.5 * a)) for a in range(20)])
    # a connector's current-state table, not declared: 36 customers synced at once on day 1, and 4
    # re-synced in the replayed days (updated in place: each row carries only its last sync)
    execute("create table raw.customers (customer_id integer, segment varchar(10), _fivetran_synced timestamp)")
    executemany("insert into raw.customers values (%s, %s, %s)",
                [(c, "smb", START + dt.timedelta(days=1, minutes=c)) for c in range(36)]
                + [(c, "enterprise", START + dt.timedelta(days=26.5 + (c - 36))) for c in range(36, 40)])


MODELS = {
    # strict watermark: loses the rows a half-committed batch left behind
    "wm_sparse.sql": "{{ config(materialized='incremental') }}\nselect id, ts from {{ source('raw', 'sparse') }}\n"
                     "{% if is_incremental() %}where ts > (select max(ts) from {{ this }}){% endif %}",
    "wm_one_half.sql": "{{ config(materialized='incremental') }}\nselect id, ts from {{ source('raw', 'one_half') }}\n"
                       "{% if is_incremental() %}where ts > (select max(ts) from {{ this }}){% endif %}",
    "wm_dense.sql": "{{ config(materialized='incremental') }}\nselect id, ts from {{ source('raw', 'dense') }}\n"
                    "{% if is_incremental() %}where ts > (select max(ts) from {{ this }}){% endif %}",
    # fails on every incremental run: what reads it is never built in a replay
    "breaks.sql": "{{ config(materialized='incremental', unique_key='id') }}\nselect id, ts from "
                  "{{ source('raw', 'dense') }}\n{% if is_incremental() %}where no_such_column > 0{% endif %}",
    "below_breaks.sql": "select count(*) as n from {{ ref('breaks') }}",
    # row_number over ties (4 rows per day share each order value): the second build of the
    # determinism scenario reads its input in another physical order, so this shows every time
    "ties.sql": "select id, row_number() over (partition by cast(ts as date) order by id % 3) as rn "
                "from {{ source('raw', 'dense') }}",
    "ties_broken.sql": "select id, row_number() over (partition by cast(ts as date) order by id % 3, id) as rn "
                       "from {{ source('raw', 'dense') }}",
    # three appends over a one-day lookback, each reading the one before: each doubles rows of its
    # own, so each is a root cause, the middle one too (it is above another suspect)
    **{f"stack_{n}.sql": "{{ config(materialized='incremental') }}\nselect id, ts from " + parent + "\n"
       "{% if is_incremental() %}where ts >= (select max(ts) from {{ this }}) - interval '1 day'{% endif %}"
       for n, parent in (("a", "{{ source('raw', 'dense') }}"), ("b", "{{ ref('stack_a') }}"),
                         ("c", "{{ ref('stack_b') }}"))},
    # inner joins on a reference table and a current-state table: both must be there from the first build
    "orders_enriched.sql": "{{ config(materialized='incremental', unique_key='id', incremental_strategy='merge') }}\n"
                           "select d.id, d.ts, c.name as country, a.plan from {{ source('raw', 'dense') }} d\n"
                           "join {{ source('raw', 'countries') }} c on c.country_id = d.id % 5\n"
                           "join {{ source('raw', 'accounts') }} a on a.account_id = d.id % 20\n"
                           "{% if is_incremental() %}where d.ts >= (select max(ts) from {{ this }}) - interval '1 day'"
                           "{% endif %}",
    # the same over the undeclared current-state table: replayed by its sync time, the 4 customers
    # re-synced late would be missing from the first build, and their older orders lost for good
    "orders_by_customer.sql": "{{ config(materialized='incremental', unique_key='id', incremental_strategy='merge') }}\n"
                              "select d.id, d.ts, c.segment from {{ source('raw', 'dense') }} d\n"
                              "join {{ source('raw', 'customers') }} c on c.customer_id = (d.id * 7) % 40\n"
                              "{% if is_incremental() %}where d.ts >= (select max(ts) from {{ this }}) - interval '1 day'"
                              "{% endif %}",
}


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def coverage_run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"coverage_{request.param}")
    project = tmp / "coverage"
    (project / "models").mkdir(parents=True)
    for name, sql in MODELS.items():
        (project / "models" / name).write_text(sql)
    (project / "models" / "sources.yml").write_text(yaml.safe_dump({"version": 2, "sources": [{
        "name": "raw", "schema": "raw",
        "tables": [*({"name": t, "config": {"event_time": "ts"}} for t in ("sparse", "dense", "one_half")),
                   {"name": "countries", "loaded_at_field": "_fivetran_synced"},
                   {"name": "accounts", "loaded_at_field": "updated_at"},
                   {"name": "customers", "loaded_at_field": "_fivetran_synced"}]}]}))
    (project / "rerun_safety.yml").write_text("inputs:\n  raw.accounts: current_state\n")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "coverage", "version": "1.0", "config-version": 2, "profile": "coverage"}))
    if request.param == "duckdb":
        load_duckdb_with(str(project / "coverage.duckdb"), _load_for("duckdb"))
        write_profiles(project, "coverage", duckdb_profile(project / "coverage.duckdb", schema="analytics"))
    else:
        server = request.getfixturevalue("pg_server")
        dbname = server.create_database("cov")
        load_postgres_with(server.dsn(dbname), _load_for("postgres"))
        write_profiles(project, "coverage", postgres_profile(server, dbname, schema="analytics"))
    out = tmp / "out"
    cwd = os.getcwd()
    os.chdir(project)
    try:
        code, stdout, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(project),
                                        "--output-dir", str(out), "--threads", "2"])
    finally:
        os.chdir(cwd)
    return {"code": code, "stdout": stdout, "stderr": stderr, "report": load_report(out), "out": out,
            "project": project}


def test_a_sparse_strict_watermark_is_untested_not_safe(coverage_run):
    assert coverage_run["report"] is not None, coverage_run["stderr"]
    models = by_name(coverage_run["report"])
    sparse = models["wm_sparse"]
    assert sparse["verdict"] == "untested"
    partial = {s["name"]: s for s in sparse["scenarios"]}["partial"]
    # the last 4 days bring 1, 0, 1, 1 rows: no batch can be half-committed
    assert partial["verdict"] == "untested"
    assert re.search(r"held 1 row\(s\) of its inputs \(raw\.sparse\), [01] in the half committed first and [01] in "
                     "the rest: no half of it could be left behind", partial["message"]), partial["message"]
    # the same model over dense data: the half-committed batch loses rows
    assert models["wm_dense"]["verdict"] == "loss" and models["wm_dense"]["root_cause"] is True


def test_a_half_committed_batch_whose_rows_all_fall_in_one_half_is_untested(coverage_run):
    """Two or more rows in the half-committed batch are not enough: the half committed first is
    chosen by a row hash, and when every row of the batch lands in it nothing is left behind."""
    model = by_name(coverage_run["report"])["wm_one_half"]
    scenarios = {s["name"]: s for s in model["scenarios"]}
    partial = scenarios["partial"]
    found = re.search(r"the half-committed batch \(batch \d\) held (\d+) row\(s\) of its inputs \(raw\.one_half\), "
                      r"(\d+) in the half committed first and 0 in the rest", partial["message"])
    assert found and int(found[1]) == int(found[2]) >= 2, partial["message"]
    assert partial["verdict"] == "untested" and model["verdict"] == "untested"
    # the other scenarios did run on new rows and found nothing
    assert {n: s["verdict"] for n, s in scenarios.items() if n != "partial"} == {
        n: "safe" for n in scenarios if n != "partial"}


def test_a_model_a_scenario_did_not_build_is_untested_in_every_report(coverage_run):
    models = by_name(coverage_run["report"])
    assert models["breaks"]["verdict"] == "error"
    below = models["below_breaks"]
    assert below["verdict"] == "untested"
    assert {s["name"]: s["verdict"] for s in below["scenarios"]}["replay"] == "untested"
    out: Path = coverage_run["out"]
    md = (out / "report.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| below\\_breaks |"))
    assert line.startswith("| below\\_breaks | untested | not built at batch 4: an upstream model failed (breaks) |")
    html = (out / "report.html").read_text()
    assert 'data-model="below_breaks" data-verdict="untested"' in html
    assert 'data-model="below_breaks" data-verdict="safe"' not in html
    junit = (out / "junit.xml").read_text()
    import xml.etree.ElementTree as ET

    cases = [c for c in ET.fromstring(junit).iter("testcase") if c.get("classname") == "model.coverage.below_breaks"]
    untested = {c.get("name"): sk.get("message", "") for c in cases if (sk := c.find("skipped")) is not None}
    # named by each scenario's last run
    assert untested == {s: f"untested: not built at {run}: an upstream model failed (breaks)" for s, run in (
        ("replay", "batch 4"), ("rerun", "batch 4, again"), ("partial", "batch 4"),
        ("backfill", "backfill of batch 1"))}
    terminal = next(ln for ln in coverage_run["stdout"].splitlines() if ln.strip().startswith("below_breaks"))
    assert "untested" in terminal and " safe " not in terminal
    assert coverage_run["code"] == 1


def test_reference_and_current_state_tables_are_present_from_the_first_build(coverage_run):
    report = coverage_run["report"]
    assert by_name(report)["orders_enriched"]["verdict"] == "safe"
    assert by_name(report)["orders_by_customer"]["verdict"] == "safe"
    notes = report["summary"]["notes"]
    static = next(n for n in notes if n.startswith("static inputs (present in full at every build"))
    assert static.endswith("): raw.countries (100% of its rows were loaded in one day (2025-03-03 00:00), before "
                           "the replayed batches: a table loaded at once)")
    current = next(n for n in notes if n.startswith("current-state inputs"))
    assert current.endswith("their history cannot be replayed): raw.accounts (declared in "
                            f"{coverage_run['project'] / 'rerun_safety.yml'}); raw.customers (90% of its rows "
                            "were loaded in one day (2025-03-02 00:00), before the replayed batches, and 4 since: a "
                            "table loaded at once and updated in place (declare it `inputs: raw.customers: "
                            "loaded_log` in rerun_safety.yml if its later rows are new ones))")
    logs = next(n for n in notes if n.startswith("event logs"))
    assert logs.endswith(": raw.dense (by ts, from event_time); raw.one_half (by ts, from event_time); "
                         "raw.sparse (by ts, from event_time)")
    assert not [n for n in notes if n.startswith("raw.countries ends before")]


def test_ties_are_found_on_purpose(coverage_run):
    models = by_name(coverage_run["report"])
    ties = {s["name"]: s for s in models["ties"]["scenarios"]}
    assert models["ties"]["verdict"] == "nondeterministic" and models["ties"]["root_cause"] is True
    # unkeyed: each changed row is one row only in the reference and one only in the second build
    assert ties["determinism"]["verdict"] == "nondeterministic"
    assert ties["determinism"]["extra_rows"] == ties["determinism"]["missing_rows"] > 100
    assert models["ties_broken"]["verdict"] == "safe"


def test_a_root_cause_between_two_others_is_named(coverage_run):
    models = by_name(coverage_run["report"])
    assert [models[f"stack_{n}"]["verdict"] for n in "abc"] == ["duplicates"] * 3
    assert [models[f"stack_{n}"]["root_cause"] for n in "abc"] == [True, True, True]


def test_worker_scenarios_show_progress_as_they_run(coverage_run):
    """With --threads 2 the scenarios run in worker processes; each one's start reaches the
    terminal while it runs (a worker's progress used to show only when its scenario ended, and
    its scenario name never)."""
    lines = [ln for ln in coverage_run["stderr"].splitlines() if ln.startswith("rerun-safety: scenario ")]
    started = {ln.removeprefix("rerun-safety: scenario ") for ln in lines}
    assert {"reference", "replay+backfill", "rerun", "partial", "determinism"} <= started, lines
