"""`rerun-safety lint` end to end on a copy of examples/shop: real dbt, real DuckDB and PostgreSQL."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from support.common import REPO_ROOT, postgres_profile, write_profiles
from rerun_safety.cli import main
from rerun_safety.lint import run_lint

SHOP = REPO_ROOT / "examples" / "shop"

# The unsafe models of examples/shop and what lint must say about them; every other model is safe
# and must get no finding at all (events_totalled's hooks delete the days they insert, and append to a
# declared run log; events_by_load's watermark is on the load time).
EXPECTED_DUCKDB = {
    "events_append_lookback": ["append-reread"],
    "events_keyed_append": ["append-reread", "unique-key-ignored"],
    "events_watermark": ["late-watermark", "watermark-strict-gt"],
    "events_partition_overwrite_unaligned": ["partition-lookback-unaligned", "window-shorter-than-run"],
    "events_scored": ["nondeterministic-function"],
    "events_summarised": ["hook-append"],
}
# On PostgreSQL the microbatch model is unsafe too: MERGE keeps rows deleted upstream.
EXPECTED_POSTGRES = {**EXPECTED_DUCKDB, "events_microbatch": ["microbatch-postgres"]}
ALL_MODELS = {"daily_revenue", "daily_revenue_safe", "daily_volume_monitor", "dim_users", "stg_events",
              "events_append_lookback", "events_delete_insert", "events_keyed_append", "events_merge",
              "events_microbatch", "events_partition_overwrite", "events_partition_overwrite_unaligned",
              "events_scored", "events_watermark", "audit_daily", "events_by_load", "events_summarised",
              "events_totalled"}


def _load_generator():
    spec = importlib.util.spec_from_file_location("shop_generate_data", SHOP / "generate_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shop_template(tmp_path_factory) -> Path:
    """examples/shop copied once per module, its package installed with `dbt deps`."""
    dest = tmp_path_factory.mktemp("shop_template") / "shop"
    shutil.copytree(SHOP, dest, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", "*.duckdb*",
                                                              "package-lock.yml", ".user.yml"))
    (dest / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke(["deps", "--project-dir", str(dest), "--profiles-dir", str(dest),
                              "--log-path", str(dest.parent / "deps_logs"), "--quiet"])
    assert res.success, res.exception
    return dest


@pytest.fixture
def shop(shop_template, tmp_path) -> Path:
    """A fresh copy of the prepared project (the local package stays a symlink)."""
    dest = tmp_path / "shop"
    shutil.copytree(shop_template, dest, symlinks=True)
    return dest


def _lint(project: Path, profiles: Path, *extra: str):
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                    "--format", "json", *extra], catch_exceptions=False)
    return res.exit_code, json.loads(res.output)


def _rules_by_model(doc: dict, severity: str | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in doc["findings"]:
        if severity is None or f["severity"] == severity:
            out.setdefault(f["model"], []).append(f["rule"])
    return {k: sorted(v) for k, v in out.items()}


def test_lint_shop_duckdb(shop, monkeypatch):
    project = shop
    monkeypatch.chdir(project)  # the profile's path is relative (shop.duckdb), as users write it and run dbt
    db = project / "shop.duckdb"
    _load_generator().load_duckdb(str(db))
    listing = "select table_catalog, table_schema, table_name from information_schema.tables"
    with duckdb.connect(str(db), read_only=True) as con:
        before = sorted(con.execute(listing).fetchall())
    mtime = db.stat().st_mtime_ns

    code, doc = _lint(project, project)

    assert code == 1
    assert _rules_by_model(doc) == EXPECTED_DUCKDB
    assert not [n for n in doc["summary"]["notes"] if "two runs at once" in n]  # one writer per DuckDB file
    assert set(doc) == {"findings", "models", "suppressed", "summary", "timings"}
    for f in doc["findings"]:
        assert set(f) >= {"rule", "model", "severity", "message"}
        assert f["severity"] == "error"
        assert f["model"] in f["message"] or f["path"] in f["message"]
    assert doc["summary"]["models"] == len(ALL_MODELS)
    assert doc["summary"]["errors"] == 9
    assert doc["summary"]["incremental_branch"] == "scratch duckdb file"
    # the append-reread finding comes from the incremental branch, located at the is_incremental filter
    lookback = next(f for f in doc["findings"] if f["model"] == "events_append_lookback")
    assert lookback["branch"] == "incremental"
    assert lookback["line"] == 5
    assert "{{ this }}" in lookback["message"]
    with duckdb.connect(str(db), read_only=True) as con:
        assert sorted(con.execute(listing).fetchall()) == before  # nothing built in the user's file
    assert db.stat().st_mtime_ns == mtime

    # the incremental branches compiled in a second process give the same findings
    parallel = run_lint(project_dir=project, profiles_dir=project, parallel=True,
                        select=("events_merge events_append_lookback events_watermark",))
    assert "pass2_process_parse" in parallel.timings
    assert _rules_by_model(parallel.to_dict()) == {m: EXPECTED_DUCKDB[m]
                                                   for m in ("events_append_lookback", "events_watermark")}
    assert parallel.models == ("events_append_lookback", "events_merge", "events_watermark")

    # a suppression with a reason, read from the model's config meta, silences its rule: exit 0
    model = project / "models" / "staging" / "events_watermark.sql"
    model.write_text(model.read_text().replace(
        "incremental_strategy='append')",
        "incremental_strategy='append', meta={'rerun_safety': {'lint_ignore': ["
        "{'rule': 'watermark-strict-gt', 'reason': 'single writer, events never late'}, "
        "{'rule': 'late-watermark', 'reason': 'loaded in event order'}]}})"))
    code, doc = _lint(project, project, "--select", "events_merge events_delete_insert events_watermark")
    assert (code, doc["findings"], doc["summary"]["models"]) == (0, [], 3)
    assert sorted((f["model"], f["rule"]) for f in doc["suppressed"]) == [
        ("events_watermark", "late-watermark"), ("events_watermark", "watermark-strict-gt")]


def test_lint_text_output_and_broken_models(shop):
    """A model sqlglot cannot parse gets a warning, a model that fails to compile a warning naming
    why; the others are still linted. Text output is grouped by model, without colour when not asked."""
    project = shop
    staging = project / "models" / "staging"
    (staging / "weird_sql.sql").write_text("select event_id from {{ ref('stg_events') }} where ((( event_id\n")
    (staging / "broken_jinja.sql").write_text(
        "{% if execute %}{{ exceptions.raise_compiler_error('undefined_macro_xyz') }}{% endif %}\n"
        "select 1 as x\n")
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(project),
                                    "--select", "weird_sql broken_jinja events_watermark"],
                             catch_exceptions=False)
    assert res.exit_code == 1
    out = res.output
    assert "\033[" not in out
    blocks = {b.splitlines()[0].split()[0]: b for b in out.strip().split("\n\n")[:-1]}
    assert set(blocks) == {"weird_sql", "broken_jinja", "events_watermark"}
    assert "warning sql-parse-error" in " ".join(blocks["weird_sql"].split())
    assert "model weird_sql" in blocks["weird_sql"]
    assert "warning compile-error" in " ".join(blocks["broken_jinja"].split())
    assert "undefined_macro_xyz" in blocks["broken_jinja"]
    assert "error watermark-strict-gt" in " ".join(blocks["events_watermark"].split())
    assert "error late-watermark" in " ".join(blocks["events_watermark"].split())
    assert out.strip().splitlines()[-1].startswith("3 models linted: 2 errors, 2 warnings, 0 suppressed")


def _pg_relations(server, dbname):
    conn = server.connect(dbname)
    try:
        with conn.cursor() as cur:
            cur.execute("select n.nspname, c.relname, c.relkind from pg_class c join pg_namespace n "
                        "on n.oid = c.relnamespace where n.nspname not in ('pg_catalog', 'information_schema') "
                        "and n.nspname not like 'pg_toast%' order by 1, 2")
            return cur.fetchall()
    finally:
        conn.close()


def _scratch_databases(server):
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("select datname from pg_database where datname like 'rerun_safety_lint_%'")
            return cur.fetchall()
    finally:
        conn.close()


@pytest.mark.postgres
def test_lint_shop_postgres(shop, tmp_path, pg_server, pg_database):
    project = shop
    _load_generator().load_postgres(pg_server.dsn(pg_database))
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "shop", postgres_profile(pg_server, pg_database, schema="analytics"))
    before = _pg_relations(pg_server, pg_database)
    assert [(schema, name) for schema, name, _ in before] == [
        ("audit", "batch_summary"), ("audit", "batch_totals"), ("audit", "run_log"), ("raw", "events"), ("raw", "users")]

    code, doc = _lint(project, profiles)

    assert code == 1
    assert _rules_by_model(doc) == EXPECTED_POSTGRES
    # the models whose runs do not wait for one another, as a note: not partition_overwrite (it takes the lock)
    (overlap,) = [n for n in doc["summary"]["notes"] if n.startswith("two runs at once")]
    assert overlap.startswith(
        "two runs at once (PostgreSQL): 9 incremental model(s) whose runs do not wait for one another keep a batch "
        "twice when two runs of it overlap (a retry beside a run that did not die, a backfill during the schedule): "
        "events_append_lookback (append), events_by_load (merge), events_delete_insert (delete+insert), "
        "events_keyed_append (append), events_merge (merge), events_microbatch (microbatch), events_summarised "
        "(delete+insert), events_totalled (delete+insert), events_watermark (append); "), overlap
    assert doc["summary"]["incremental_branch"] == "scratch postgres database"
    assert _pg_relations(pg_server, pg_database) == before
    assert _scratch_databases(pg_server) == []

    # a user who may not create databases: the full-refresh SQL is still linted against the user's
    # database (read only), and each incremental model says its incremental branch was not checked
    conn = pg_server.connect(pg_database)
    try:
        with conn.cursor() as cur:
            cur.execute("create role lint_reader login nocreatedb")
            cur.execute("grant usage on schema raw, audit to lint_reader")
    finally:
        conn.close()
    try:
        reader = tmp_path / "reader_profiles"
        write_profiles(reader, "shop", {**postgres_profile(pg_server, pg_database, schema="analytics"),
                                        "user": "lint_reader"})
        code, doc = _lint(project, reader)
    finally:
        conn = pg_server.connect(pg_database)
        try:
            with conn.cursor() as cur:
                cur.execute("revoke usage on schema raw, audit from lint_reader")
                cur.execute("drop role lint_reader")
        finally:
            conn.close()
    incremental = {"events_append_lookback", "events_delete_insert", "events_keyed_append", "events_merge",
                   "events_microbatch", "events_partition_overwrite", "events_partition_overwrite_unaligned",
                   "events_watermark", "events_by_load", "events_summarised", "events_totalled"}
    assert code == 1
    assert doc["summary"]["incremental_branch"].startswith("not checked (no scratch database: permission denied")
    assert _rules_by_model(doc, "warning") == {m: ["incremental-branch-unchecked"] for m in incremental} | {
        "events_microbatch": ["incremental-branch-unchecked", "microbatch-postgres"]}
    assert _rules_by_model(doc, "error") == {"events_keyed_append": ["unique-key-ignored"],
                                             "events_scored": ["nondeterministic-function"],
                                             "events_summarised": ["hook-append"]}
    assert _pg_relations(pg_server, pg_database) == before


def test_lint_baseline_fails_only_on_new_findings(shop, tmp_path):
    """--baseline main's JSON: a comment-only and whitespace-only change fails nothing, a new defect
    fails alone; a bad baseline is one line and exit 2."""
    project = shop
    select = ("--select", "events_watermark events_append_lookback events_merge")
    code, main_doc = _lint(project, project, *select)
    assert code == 1 and main_doc["summary"]["errors"] == 3
    assert all(len(f["fingerprint"]) == 16 for f in main_doc["findings"])
    baseline = tmp_path / "main-lint.json"
    baseline.write_text(json.dumps(main_doc))

    # a comment-only change moves every line; a whitespace change rewrites the filter's spacing
    model = project / "models" / "staging" / "events_watermark.sql"
    text = model.read_text()
    model.write_text("-- reviewed: nothing changes here\n-- second comment line\n\n"
                     + text.replace(" > ", "   >   ").replace("select", "select  ", 1))
    code, doc = _lint(project, project, *select, "--baseline", str(baseline))
    assert code == 0
    assert doc["baseline"] == {"known": 3, "new": 0, "new_errors": 0}
    moved = {f["fingerprint"]: f["line"] for f in doc["findings"]}
    assert set(moved) == {f["fingerprint"] for f in main_doc["findings"]}
    assert any(moved[f["fingerprint"]] != f["line"] for f in main_doc["findings"] if f["line"])

    # a new defect in a new model fails the lint, the known ones are marked as such
    (project / "models" / "staging" / "events_sampled.sql").write_text(
        "select * from {{ ref('stg_events') }} limit 5\n")
    code, doc = _lint(project, project, "--select", "events_watermark events_append_lookback events_merge "
                      "events_sampled", "--baseline", str(baseline))
    assert code == 1
    assert doc["baseline"] == {"known": 3, "new": 1, "new_errors": 1}
    assert [(f["model"], f["rule"]) for f in doc["findings"] if f["new"]] == [("events_sampled",
                                                                               "limit-without-order")]
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(project),
                                    *select, "--baseline", str(baseline)], catch_exceptions=False)
    assert res.exit_code == 0
    assert "(in --baseline)" in res.output
    assert res.output.strip().splitlines()[-1] == "baseline: 3 finding(s) already in --baseline, 0 new (0 new error(s))"

    # a bad baseline: one line, exit 2, before any compile
    for content, says in (("{not json", "not JSON"), ('{"findings": 3}', "not a lint JSON")):
        baseline.write_text(content)
        res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(project),
                                        "--baseline", str(baseline)])
        assert res.exit_code == 2, res.output
        assert len(res.output.strip().splitlines()) == 1 and says in res.output
    res = CliRunner().invoke(main, ["lint", "--project-dir", str(project), "--profiles-dir", str(project),
                                    "--baseline", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "cannot read it" in res.output


def test_a_model_past_its_budget_is_skipped_with_the_reason(shop):
    """A model whose analysis runs past --model-budget is reported as skipped; the others are linted."""
    project = shop
    (project / "models" / "staging" / "events_huge.sql").write_text(
        "{% for i in range(12000) %}select event_id, {{ i }} as n from {{ ref('stg_events') }}"
        "{% if not loop.last %} union all {% endif %}{% endfor %}\n")
    code, doc = _lint(project, project, "--select", "events_huge events_watermark", "--model-budget", "0.2")
    assert code == 1
    assert doc["summary"]["skipped"] == [{"model": "events_huge", "reason": doc["summary"]["skipped"][0]["reason"]}]
    assert "--model-budget" in doc["summary"]["skipped"][0]["reason"]
    assert "model events_huge skipped: " in " ".join(doc["summary"]["notes"])
    assert _rules_by_model(doc) == {"events_watermark": ["late-watermark", "watermark-strict-gt"]}
    # with the default budget it is linted like any model
    code, doc = _lint(project, project, "--select", "events_huge")
    assert (code, doc["summary"]["skipped"], doc["findings"]) == (0, [], [])
