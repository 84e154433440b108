"""The bad-input matrix (docs/readme/reliability.md): each row is a test here or in
test_gameday_fixture.py. A bad input gives exit 2 and one line naming what and where, no traceback;
a legal but awkward input gives the correct verdicts. Never is anything written outside sandboxes:
the user's target keeps its checksum, the project folder its files, the work root ends empty."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import duckdb
import pytest

from support.common import FIXTURES, write_profiles
from support.gameday import by_name, duckdb_fixture_project, file_sha256, load_report, run_cli, scenario
from support.reliability import PARSE_PREFIX, PREFIX, payments_target, work_root

def _load_module(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the payments fixture's loader is imported as `load_data` elsewhere: load this one by path
odd_data = _load_module("odd_names_load_data", FIXTURES / "odd_names" / "load_data.py")

CHEAP = ["--steps", "2", "--scenarios", "replay"]


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """A private work root for the in-process game day; it must end empty."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield tmp
    root = work_root(tmp)
    left = [p.name for pat in (f"{PREFIX}*", f"{PARSE_PREFIX}*") for p in root.glob(pat)] if root.exists() else []
    assert left == [], left


@pytest.fixture(scope="module")
def payments(tmp_path_factory):
    return payments_target("duckdb", tmp_path_factory.mktemp("inputs_payments"))


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def gameday(project: Path, profiles: Path | None, *args: str) -> tuple[int, str, str]:
    """The game day in-process from the project folder (as users run it), checking that it wrote
    nothing into the project."""
    before = _tree(project)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        extra = ["--profiles-dir", str(profiles)] if profiles else []
        result = run_cli(["gameday", "--project-dir", str(project), *extra, *args])
    finally:
        os.chdir(cwd)
    assert _tree(project) == before
    return result


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


def variant(payments, tmp_path: Path, sql: list[str] | None = None) -> tuple[Path, Path, Path]:
    """A copy of the payments project with its own DuckDB file, altered by `sql`."""
    project = Path(shutil.copytree(payments.project, tmp_path / "payments", symlinks=True))
    db = tmp_path / "variant.duckdb"
    shutil.copy(payments.output["path"], db)
    if sql:
        with duckdb.connect(str(db)) as con:
            for stmt in sql:
                con.execute(stmt)
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", dict(payments.output, path=str(db)), target="local")
    return project, profiles, db


# ------------------------------------------------------------------ project and profile

def test_missing_project_dir(isolated, tmp_path):
    code, _, err = run_cli(["gameday", "--project-dir", str(tmp_path / "nope"), *CHEAP])
    line = one_line(code, err)
    assert "project dir" in line and "nope" in line and "does not exist" in line


def test_project_dir_without_dbt_project(isolated, tmp_path):
    code, _, err = gameday(tmp_path, None, *CHEAP)
    line = one_line(code, err)
    assert f"no dbt_project.yml in {tmp_path}" in line


def test_missing_profiles_yml(isolated, payments, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = gameday(payments.project, empty, *CHEAP)
    assert f"no profiles.yml in {empty}" in one_line(code, err)


def test_profile_not_in_profiles_yml(isolated, payments, tmp_path):
    write_profiles(tmp_path / "other", "some_other_profile", payments.output)
    code, _, err = gameday(payments.project, tmp_path / "other", *CHEAP)
    line = one_line(code, err)
    assert "profile 'payments' not found" in line and str(tmp_path / "other") in line


def test_bad_selector_method(isolated, payments):
    before = payments.fingerprint()
    code, _, err = gameday(payments.project, payments.profiles, "--select", "nosuchmethod:x", *CHEAP)
    line = one_line(code, err)
    assert "bad selection" in line and "nosuchmethod" in line
    assert payments.fingerprint() == before


def test_a_misspelt_model_is_named_before_the_parse_with_the_closest_names(isolated, payments):
    before = payments.fingerprint()
    code, _, err = gameday(payments.project, payments.profiles, "--select", "+payments_mergd+", *CHEAP)
    assert one_line(code, err) == (
        "rerun-safety: error: the selection matches no model (--select +payments_mergd+): no model, seed, "
        "snapshot, folder or package is named payments_mergd (did you mean payments_merged, payments_appended, "
        "payments_current?)")
    assert payments.fingerprint() == before
    # one good term among typos: dbt selects it, nothing is said before the parse
    code, _, err = gameday(payments.project, payments.profiles, "--select", "payments_mergd nosuch_model_at_all",
                           *CHEAP)
    assert "no model, seed, snapshot, folder or package is named nosuch_model_at_all" in one_line(code, err)


def test_selection_terms_that_only_dbt_can_answer_are_left_to_it(tmp_path):
    from rerun_safety.select_names import unmatched

    (tmp_path / "dbt_project.yml").write_text("name: shop\nmodel-paths: [transform]\n")
    (tmp_path / "transform" / "marts").mkdir(parents=True)
    (tmp_path / "transform" / "marts" / "orders_v2.sql").write_text("select 1")
    (tmp_path / "transform" / "schema.yml").write_text("models:\n  - name: orders\n    versions: [{v: 2}]\n")
    (tmp_path / "dbt_packages" / "fivetran_log" / "models").mkdir(parents=True)
    (tmp_path / "dbt_packages" / "fivetran_log" / "dbt_project.yml").write_text("name: fivetran_log\n")
    (tmp_path / "dbt_packages" / "fivetran_log" / "models" / "fivetran_log__connector_status.sql").write_text("1")
    for fine in ("orders", "orders.v2", "marts", "shop.marts.orders", "fivetran_log", "2+orders_v2+",
                 "@fivetran_log__connector_status", "tag:nightly", "path:transform/marts", "orders_*",
                 "transform/marts/orders_v2.sql", "orderz,tag:x"):
        assert unmatched(tmp_path, [fine]) == "", fine
    assert unmatched(tmp_path, ["fivetran_log__connector_statsu"]) == (
        "no model, seed, snapshot, folder or package is named fivetran_log__connector_statsu (did you mean "
        "fivetran_log__connector_status?)")
    assert unmatched(tmp_path, ["orders,ordrs"]).endswith("named ordrs (did you mean orders_v2?)")
    assert unmatched(tmp_path, ["nothing_like_it"]) == "no model, seed, snapshot, folder or package is named nothing_like_it"


# ------------------------------------------------------------------ data

def test_unparsable_event_time(isolated, payments, tmp_path):
    project, profiles, db = variant(payments, tmp_path, [
        "alter table landing.payments alter ingested_at type varchar",
        "update landing.payments set ingested_at = 'not a date' where payment_no = 17"])
    before = file_sha256(db)
    code, _, err = gameday(project, profiles, "--select", "payments_appended", *CHEAP)
    line = one_line(code, err)
    assert "source ingest.payments" in line and "'ingested_at'" in line and "not a date" in line
    assert file_sha256(db) == before


def test_empty_sources(isolated, payments, tmp_path):
    project, profiles, db = variant(payments, tmp_path, ["delete from landing.payments"])
    code, _, err = gameday(project, profiles, "--select", "payments_appended", *CHEAP)
    line = one_line(code, err)
    assert "every timed input is empty" in line and "source ingest.payments" in line


def test_an_untimed_seed_says_how_to_name_its_time_column(isolated, tmp_path):
    """A project whose incremental models read only a seed without event_time (as dbt's own adapter
    tests are written): one line naming the seed, its date column, and the two ways to give it a time
    column; with `time_columns` in rerun_safety.yml the same project replays."""
    import duckdb

    from support.common import duckdb_profile, write_profiles

    project = tmp_path / "seeded"
    (project / "models").mkdir(parents=True)
    (project / "seeds").mkdir()
    (project / "dbt_project.yml").write_text("name: seeded\nversion: '1.0'\nconfig-version: 2\nprofile: seeded\n")
    (project / "seeds" / "visits.csv").write_text(
        "city,last_visit_date\n" + "".join(f"c{i},2024-01-{1 + i % 28:02d}\n" for i in range(56)))
    (project / "models" / "visits_inc.sql").write_text(
        "{{ config(materialized='incremental', unique_key='city') }}\nselect * from {{ ref('visits') }}\n"
        "{% if is_incremental() %}where last_visit_date > (select max(last_visit_date) from {{ this }}){% endif %}\n")
    duckdb.connect(str(project / "seeded.duckdb")).close()
    write_profiles(project, "seeded", duckdb_profile(project / "seeded.duckdb"))
    code, _, err = gameday(project, project, *CHEAP)
    assert one_line(code, err) == (
        "rerun-safety: error: no input of the selected models has a time column, so no rows can arrive batch by "
        "batch and there is nothing to replay (1 input(s) without one: seed visits (date or time columns: "
        "last_visit_date; to replay by it: `time_columns: {visits: last_visit_date}`)): name the column rows "
        "arrive by, `config: {event_time: <column>}` on a source or seed, or `time_columns: {<name>: <column>}` "
        "in rerun_safety.yml")
    # a hundred reference seeds beside it: still one short line, the seed a hint fills in named first
    for i in range(100):
        (project / "seeds" / f"code_list_{i:03d}.csv").write_text("code,label\n1,a\n")
    (project / "models" / "codes.sql").write_text(" union all ".join(
        f"select * from {{{{ ref('code_list_{i:03d}') }}}}" for i in range(100)))
    code, _, err = gameday(project, project, *CHEAP)
    line = one_line(code, err)
    assert len(line) < 700, len(line)
    assert ("(101 input(s) without one: seed visits (date or time columns: last_visit_date; to replay by it: "
            "`time_columns: {visits: last_visit_date}`), seed code_list_000, seed code_list_001, seed code_list_002, "
            "seed code_list_003 and 96 more)") in line
    for i in range(100):
        (project / "seeds" / f"code_list_{i:03d}.csv").unlink()
    (project / "models" / "codes.sql").unlink()
    (project / "rerun_safety.yml").write_text("time_columns:\n  visits: last_visit_date\n")
    # an on-run-end hook inserting into a model's table (a run-log package's shape) fails `dbt seed` in the
    # input copy, where no model is built yet: the seeds loaded, the game day goes on and says so
    (project / "models" / "run_audit.sql").write_text(
        "{{ config(materialized='incremental') }}\nselect cast(null as varchar) as invocation where 1 = 0\n")
    (project / "dbt_project.yml").write_text(
        "name: seeded\nversion: '1.0'\nconfig-version: 2\nprofile: seeded\non-run-end:\n"
        "  - \"insert into {{ target.schema }}.run_audit values ('{{ invocation_id }}')\"\n")
    code, out, err = gameday(project, project, *CHEAP, "--output-dir", str(tmp_path / "out"))
    assert code in (0, 1), err
    assert "event logs (rows arrive batch by batch by their time column): visits (by last_visit_date, from " in out
    assert "dbt seed's on-run-start/end hooks failed in the game day's copy of the inputs after every seed loaded" in out
    assert "written by the project's on-run-start/end hooks: run_audit" in out


# ------------------------------------------------------------------ odd identifiers, strategy config

@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    return duckdb_fixture_project(tmp_path_factory.mktemp("odd_names"), "odd_names", odd_data.load_duckdb)


ODD_VERDICTS = {"Orders_Appended": "loss", "Städte_Summary": "drift", "order_days": "safe", "order_labels": "safe"}


def _check_odd(report: dict) -> None:
    models = by_name(report)
    assert {n: m["verdict"] for n, m in models.items()} == ODD_VERDICTS
    appended = models["Orders_Appended"]
    assert appended["root_cause"] is True
    partial = scenario(appended, "partial")
    assert partial["reference_rows"] == 288 and partial["missing_rows"] > 0 and partial["extra_rows"] == 0
    assert scenario(appended, "replay")["verdict"] == "safe"
    assert models["Städte_Summary"]["contaminated_by"] == ["Orders_Appended"]
    for name in ("order_days", "order_labels"):
        for s in models[name]["scenarios"]:
            assert s["rows"] == s["reference_rows"] == (288 if name == "order_days" else 2), s


def test_odd_identifiers_duckdb(isolated, odd, tmp_path):
    before = file_sha256(odd / "odd_names.duckdb")
    out = tmp_path / "out"
    code, _, err = gameday(odd, odd, "--steps", "3", "--scenarios", "replay,partial", "--output-dir", str(out))
    assert code == 1, err
    _check_odd(load_report(out))
    assert file_sha256(odd / "odd_names.duckdb") == before


def test_odd_identifiers_postgres(isolated, odd, tmp_path, pg_server):
    from support.gameday import pg_fingerprint

    dbname = pg_server.create_database("odd")
    odd_data.load_postgres(pg_server.dsn(dbname))
    profiles = tmp_path / "profiles"
    from support.common import postgres_profile

    write_profiles(profiles, "odd_names", postgres_profile(pg_server, dbname, schema="Mart Ä"), target="local")
    before = pg_fingerprint(pg_server, dbname)
    out = tmp_path / "out"
    code, _, err = gameday(odd, profiles, "--steps", "3", "--scenarios", "replay,partial", "--output-dir", str(out))
    assert code == 1, err
    _check_odd(load_report(out))
    assert pg_fingerprint(pg_server, dbname) == before


def _odd_variant(odd: Path, tmp_path: Path, output: dict) -> tuple[Path, Path]:
    project = Path(shutil.copytree(odd, tmp_path / "odd", symlinks=True,
                                   ignore=shutil.ignore_patterns("*.duckdb", "*.wal")))
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "odd_names", output, target="local")
    return project, profiles


def test_partition_key_on_missing_column(isolated, odd, tmp_path):
    project, profiles = _odd_variant(odd, tmp_path, {"type": "duckdb", "path": str(odd / "odd_names.duckdb"),
                                                     "schema": "Mart Ä", "threads": 1})
    sql = project / "models" / "order_days.sql"
    sql.write_text(sql.read_text().replace("'field': 'Événement à'", "'field': 'no_such_column'"))
    out = tmp_path / "out"
    code, _, err = gameday(project, profiles, *CHEAP, "--output-dir", str(out))
    # found after the reference build (the first place the model's columns exist), before any scenario;
    # the progress lines printed until then are followed by one error line
    assert code == 2 and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert [ln for ln in lines if "error" in ln] == [lines[-1]] and "scenario replay" not in err, err
    line = lines[-1]
    assert "model order_days (incremental_strategy='partition_overwrite')" in line
    assert "partition_key names 'no_such_column', which is not a column of the model" in line
    assert not out.exists()


@pytest.mark.parametrize("partition_key, expected", [
    ("{'field': 'Événement à', 'granularity': 'fortnight'}", "partition_key granularity 'fortnight' is unknown"),
    ("none", "partition_key is not set"),
    ("{'granularity': 'day'}", "partition_key is a dict without a 'field' column name"),
])
def test_partition_key_config_errors_stop_before_any_sandbox(isolated, odd, tmp_path, partition_key, expected):
    project, profiles = _odd_variant(odd, tmp_path, {"type": "duckdb", "path": str(odd / "odd_names.duckdb"),
                                                     "schema": "Mart Ä", "threads": 1})
    sql = project / "models" / "order_days.sql"
    text = sql.read_text()
    start = text.index("partition_key=")
    end = text.index("}", start) + 1
    sql.write_text(text[:start] + f"partition_key={partition_key}" + text[end:])
    code, _, err = gameday(project, profiles, *CHEAP)
    line = one_line(code, err)
    assert "model order_days" in line and expected in line, line


def test_transactions_disabled_duckdb(isolated, odd, tmp_path):
    project, profiles = _odd_variant(odd, tmp_path, {"type": "duckdb", "path": str(odd / "odd_names.duckdb"),
                                                     "schema": "Mart Ä", "threads": 1,
                                                     "disable_transactions": True})
    out = tmp_path / "out"
    code, _, err = gameday(project, profiles, *CHEAP, "--output-dir", str(out))
    line = one_line(code, err)
    assert "target 'local' sets disable_transactions: true, but order_days use" in line
    assert not out.exists()


def test_postgres_autocommit(isolated, odd, tmp_path, pg_server):
    from support.common import postgres_profile

    dbname = pg_server.create_database("odd_ac")
    odd_data.load_postgres(pg_server.dsn(dbname))
    project, profiles = _odd_variant(odd, tmp_path, postgres_profile(pg_server, dbname, schema="Mart Ä",
                                                                     autocommit=True))
    out = tmp_path / "out"
    code, _, err = gameday(project, profiles, *CHEAP, "--output-dir", str(out))
    line = one_line(code, err)
    assert "target 'local' sets autocommit: true, but order_days use" in line
    assert not out.exists()


# ------------------------------------------------------------------ vars

@pytest.mark.parametrize("start", ["not a timestamp", "2026-01-01'; drop table x; --"])
def test_window_vars_rejected(isolated, payments, start):
    before = payments.fingerprint()
    vars_yaml = "{rerun_safety_window_start: %s, rerun_safety_window_end: '2026-01-02'}" % (
        '"' + start + '"')
    code, _, err = gameday(payments.project, payments.profiles, "--vars", vars_yaml, *CHEAP)
    line = one_line(code, err)
    assert "payments_merged" in line and "rerun_safety_window_start" in line and "ISO-8601" in line
    assert start in line
    assert payments.fingerprint() == before


def test_vars_not_a_dictionary(isolated, payments):
    code, _, err = gameday(payments.project, payments.profiles, "--vars", "[1, 2]", *CHEAP)
    assert "--vars must be a YAML dictionary" in one_line(code, err)


def test_a_source_the_profile_role_may_not_read_is_one_line(isolated, tmp_path, pg_server):
    """A source table owned by another role, with no SELECT granted to the profile's role: one line naming
    the source, the role and the grant; exit 2, nothing written, no sandbox database."""
    from support.common import create_role

    role = create_role(pg_server)
    target = payments_target("postgres", tmp_path / "proj", server=pg_server, role=role)
    conn = pg_server.connect(target.dbname)
    conn.autocommit = True
    with conn.cursor() as cur:  # the table becomes the superuser's, readable by nobody else
        cur.execute("select schemaname, tablename from pg_tables where schemaname not in ('pg_catalog', "
                    "'information_schema') order by 1, 2 limit 1")
        schema, name = cur.fetchone()
        cur.execute(f'alter table "{schema}"."{name}" owner to current_user')
        cur.execute(f'revoke all on "{schema}"."{name}" from public, "{role}"')
    conn.close()
    out = tmp_path / "out"
    code, _, err = gameday(target.project, target.profiles, *CHEAP, "--output-dir", str(out))
    line = one_line(code, err)
    assert line.endswith(f"the profile's role {role} may not read {schema}.{name} in database {target.dbname}; "
                         "grant it SELECT on that table"), line
    assert not out.exists()
    conn = pg_server.connect()
    with conn.cursor() as cur:
        cur.execute("select count(*) from pg_database where datname like 'rerun\\_safety\\_sbx\\_%'")
        assert cur.fetchone()[0] == 0
    conn.close()
