"""The conformance project: dbt's ordinary features in one project (ephemeral chains, Python table
and incremental models, every incremental strategy, microbatch, snapshots, views over rebuilt
tables, an external model, seeds, a custom schema and alias, a generate_schema_name override, vars,
hooks, a local package, target.database in a hashed key, an `attach:`ed database), each model with
the verdict decided before any run (expected_verdicts.yml). The game day must give exactly those,
on DuckDB and PostgreSQL, with no model in error."""
from __future__ import annotations

import os

import pytest
import yaml

from support.common import FIXTURES, write_profiles
from support.gameday import (by_name, scenario, copy_project, dbt_deps, file_sha256, load_report, pg_fingerprint,
                             run_cli)


def _load_data_module():
    """The fixture's load_data.py under a name of its own: other fixtures' modules are also called
    load_data, and the first one imported would win."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("conformance_load_data", FIXTURES / "conformance" / "load_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


load_data = _load_data_module()

EXPECTED = yaml.safe_load((FIXTURES / "conformance" / "expected_verdicts.yml").read_text())["models"]


def _expected(engine: str) -> dict[str, dict]:
    return {name: spec for name, spec in EXPECTED.items() if engine in spec.get("only", [engine])}


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def conformance_run(request, tmp_path_factory):
    engine = request.param
    tmp = tmp_path_factory.mktemp(f"conformance_{engine}")
    project = copy_project(FIXTURES / "conformance", tmp / "conformance")
    out = tmp / "out"
    if engine == "duckdb":
        load_data.load_duckdb(str(project / "conformance.duckdb"))
        load_data.load_refdata_duckdb(str(project / "refdata.duckdb"))
        fingerprint = lambda: (file_sha256(project / "conformance.duckdb"), file_sha256(project / "refdata.duckdb"))  # noqa: E731
    else:
        from support.common import postgres_profile

        server = request.getfixturevalue("pg_server")
        dbname = server.create_database("conf")
        load_data.load_postgres(server.dsn(dbname))
        write_profiles(project, "conformance", postgres_profile(server, dbname, schema="analytics"))
        fingerprint = lambda: pg_fingerprint(server, dbname)  # noqa: E731
    dbt_deps(project, project)
    before = fingerprint()
    cwd = os.getcwd()
    os.chdir(project)  # the profile's attach path is relative, as users write it
    try:
        code, stdout, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(project),
                                        "--steps", "3", "--threads", "2", "--output-dir", str(out)])
    finally:
        os.chdir(cwd)
    return {"engine": engine, "code": code, "stdout": stdout, "stderr": stderr, "report": load_report(out),
            "unchanged": before == fingerprint(), "project": project, "cwd": project,
            "argv": ["gameday", "--project-dir", str(project), "--profiles-dir", str(project), "--steps", "3"]}


def test_every_model_gets_its_labelled_verdict(conformance_run):
    r = conformance_run
    assert r["report"] is not None, r["stderr"]
    models = by_name(r["report"])
    errors = {n: m["scenarios"] for n, m in models.items() if m["verdict"] == "error"}
    assert errors == {}, "a model in error from the runner's own mechanics"
    assert {n: m["verdict"] for n, m in models.items()} == {n: s["verdict"] for n, s in _expected(r["engine"]).items()}
    for name, spec in _expected(r["engine"]).items():
        assert models[name]["root_cause"] is spec.get("root_cause", False), name
        assert models[name]["contaminated_by"] == spec.get("contaminated_by", []), name
        assert models[name]["nondeterministic_columns"] == spec.get("nondeterministic_columns", []), name
        assert models[name]["audit_columns"] == spec.get("audit_columns", []), name
        assert bool(models[name]["inconclusive"]) is spec.get("inconclusive", False), name
    assert r["unchanged"]  # the user's database (and on DuckDB the attached one) byte for byte
    # a model file with no SQL: dbt builds nothing for it, so it is named, not judged (nor an error)
    assert "not_written_yet" not in models
    assert "models with no SQL, which dbt builds nothing for (not judged): not_written_yet" in \
        r["report"]["summary"]["notes"]
    # the on-run-end hook's log of the models each invocation ran: judged, it was `duplicates, root cause`
    # (a rerun's invocation logs 12 rows more); built (the hook wrote it), never judged
    assert "model_run_log" not in models
    # reconcile_counts(group_by=...) on a model read by name: compiled without its test, nothing failed
    assert not [n for n in r["report"]["summary"]["notes"] if "did not compile" in n]
    assert ("run logs, built but not judged (their rows record which models each invocation ran, and no replay "
            "runs the reference build's invocations): written by the project's on-run-start/end hooks: "
            "model_run_log") in r["report"]["summary"]["notes"]


def test_lost_events_are_told_apart_from_renumbered_ones(conformance_run):
    """An unkeyed model numbering each customer's events over the rows a run reads: each run numbers from 1
    again. Its half-committed batch loses exactly the events its keyed twin (the same watermark) loses;
    those are counted missing and shown first in the sample, every other differing row changed in
    event_index, not one missing and one extra."""
    models = by_name(conformance_run["report"])
    twin = scenario(models["inc_watermark_events"], "partial")
    numbered = scenario(models["inc_numbered_events"], "partial")
    lost = twin["missing_keys"]
    assert lost > 0 and twin["missing_rows"] == lost and twin["extra_rows"] == 0
    assert numbered["changed_rows"] > 0 and numbered["differing_columns"][0] == "event_index"
    assert numbered["missing_rows"] - numbered["changed_rows"] == lost
    assert numbered["extra_rows"] == numbered["changed_rows"]
    # the sample leads with lost events, the twin's own (both in key order)
    lost_ids = [r["event_id"] for r in twin["sample"] if r["_diff"] == "missing"][:3]
    assert numbered["sample"][0]["_diff"] == "missing"
    assert [r["event_id"] for r in numbered["sample"] if r["_diff"] == "missing"][:3] == lost_ids
    replay = scenario(models["inc_numbered_events"], "replay")
    assert replay["verdict"] == "drift" and replay["missing_rows"] == replay["extra_rows"] == replay["changed_rows"] > 0


def test_what_the_runner_handles_is_exercised_not_skipped(conformance_run):
    models = by_name(conformance_run["report"])
    # every incremental model was built and compared in each replay scenario
    for name in ("inc_from_ephemeral", "inc_enriched", "inc_microbatch", "inc_append_lookback"):
        verdicts = {s["name"]: s["verdict"] for s in models[name]["scenarios"]}
        assert {"replay", "rerun", "partial", "backfill", "determinism"} <= set(verdicts), name
        assert "skipped" not in verdicts.values() and "error" not in verdicts.values(), (name, verdicts)
    lookback = {s["name"]: s for s in models["inc_append_lookback"]["scenarios"]}
    assert lookback["rerun"]["duplicate_keys"] > 0 and lookback["rerun"]["missing_rows"] == 0
    if conformance_run["engine"] == "duckdb":
        notes = conformance_run["report"]["summary"]["notes"]
        assert [n for n in notes if n.startswith("inputs in databases the profile attaches: refdata.main.tier_discounts;")]


def test_snapshots_are_replayed_and_judged_like_models(conformance_run):
    models = by_name(conformance_run["report"])
    for name in ("events_snapshot", "customers_snapshot"):
        verdicts = {s["name"]: s["verdict"] for s in models[name]["scenarios"]}
        assert set(verdicts.values()) == {"safe"} and "rerun" in verdicts, (name, verdicts)
    loads = {s["name"]: s for s in models["customer_loads_snapshot"]["scenarios"]}
    # a rerun of an unchanged batch opened a new version of each of the 12 customers whenever the view
    # under the snapshot was made again with a new invocation id: at each of the 3 reruns (a view that an
    # incremental model or snapshot reads is made at every run, as a user's runs make it)
    added = 36
    assert loads["rerun"]["verdict"] == "duplicates" and loads["rerun"]["extra_rows"] == added
    assert loads["rerun"]["message"] == f"a rerun of an unchanged batch added {added} version(s) to the snapshot"
    assert models["customer_events"]["verdict"] == "safe"  # reads the open versions of two snapshots


def test_versions_are_two_models_with_two_names_everywhere(conformance_run):
    names = ("customer_summary.v1", "customer_summary.v2")
    assert set(names) <= set(by_name(conformance_run["report"]))
    out = conformance_run["project"].parent / "out"
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for name in names:
        assert f"| {name.replace('_', chr(92) + '_')} | safe |" in md
        assert f'data-model="{name}"' in html
        assert any(line.strip().startswith(f"{name} ") for line in conformance_run["stdout"].splitlines())
    if conformance_run["engine"] == "duckdb":
        import json

        cwd = os.getcwd()
        os.chdir(conformance_run["project"])
        try:
            code, stdout, stderr = run_cli(["lint", "--project-dir", str(conformance_run["project"]), "--profiles-dir",
                                            str(conformance_run["project"]), "--format", "json"])
        finally:
            os.chdir(cwd)
        linted = json.loads(stdout)["models"]
        assert code in (0, 1), stderr
        assert set(names) <= set(linted) and "customer_summary" not in linted
        # the project's own strategy (its macros/ define get_incremental_keyed_replace_sql) is named,
        # not called unknown; the partition_overwrite shim is found the same way
        found = [(f["model"], f["rule"]) for f in json.loads(stdout)["findings"]]
        assert ("inc_custom_strategy", "own-strategy") in found, found
        # the running sum over the batch alone, which the game day finds as drift, lint names statically
        assert [r for m, r in found if m == "inc_running_balance"] == ["window-over-batch"], found
        # the post-hook that consumes its staging parent, whose state the game day finds depending on it
        assert ("customer_change_scd", "hook-writes-other") in found, found
        assert not [f for f in found if f[1] == "unknown-strategy"], found


def test_inputs_read_by_name_are_copied_and_replayed(conformance_run):
    """inc_vendor_events reads its events through api.Relation.create (a declared source that no
    model reads through source()) and joins an undeclared table named in its SQL; vendor_daily
    reads the events through adapter.get_relation; vendor_sessions through a name concatenated from vars;
    pkg_page_views (a package's model) through a var that renders a source, in SQL its macro writes only
    after a run_query on the package's pkg_run_limits, which the copy of the inputs does not hold (it is
    compiled again where that model is built). All are copied; the events arrive batch by batch, the
    package's page views by the event_time that dbt_project.yml's `sources:` block gives them."""
    report = conformance_run["report"]
    notes = report["summary"]["notes"]
    assert ("inputs read by name, not through source(): pkg_raw.page_views (a declared source; read by "
            "pkg_page_views); vendor.app_events (a declared source; read by inc_vendor_events, vendor_daily); "
            "vendor.app_sessions (a declared source; read by vendor_sessions); vendor_raw.app_users (not declared "
            "as a source: static; read by inc_vendor_events)") in notes
    assert not [n for n in notes if "did not compile" in n]
    events = next(n for n in notes if n.startswith("event logs"))
    assert events.endswith(": pkg_raw.page_views (by viewed_at, from event_time); raw.events (by occurred_at, "
                           "from event_time)")
    loaded = next(n for n in notes if n.startswith("loaded logs"))
    assert loaded.endswith(": vendor.app_events (by _loaded_at, from loaded_at_field); vendor.app_sessions (by "
                           "_loaded_at, from loaded_at_field)")
    # exercised: the page views replayed into the package's model in every scenario (320 views)
    views = {s["name"]: (s["verdict"], s["rows"]) for s in by_name(report)["pkg_page_views"]["scenarios"]}
    assert views == {s: ("safe", 320) for s in ("reference", "replay", "rerun", "partial", "backfill", "determinism")}
    static = next(n for n in notes if n.startswith("static inputs"))
    assert static.endswith("): raw.customers (no time column); vendor_raw.app_users (no time column)")
    model = by_name(report)["inc_vendor_events"]
    assert model["verdict"] == "safe"
    # exercised: every scenario built it on all 480 events, none left untested
    assert {s["name"]: (s["verdict"], s["rows"]) for s in model["scenarios"]} == {
        s: ("safe", 480) for s in ("reference", "replay", "rerun", "partial", "backfill", "determinism")}
    daily = {s["name"]: s for s in by_name(report)["vendor_daily"]["scenarios"]}
    assert daily["reference"]["rows"] == 30  # 10 days x 3 kinds: the rows were there, not the empty fallback
