"""Set-ups that fit real projects: a timed seed as the only input, a DuckDB file named like a
schema it holds, and a model failing in a scenario reported with dbt's whole message."""
from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pytest

from support.common import duckdb_profile, postgres_profile, write_profiles
from support.gameday import by_name, copy_project, dbt_deps, load_report, run_cli, scenario

SEED_PROJECT = {
    "dbt_project.yml": ("name: seed_only\nversion: '1.0.0'\nconfig-version: 2\nprofile: seed_only\n"
                        "seeds:\n  seed_only:\n    sales:\n      +event_time: sold_at\n"
                        "      +column_types: {sold_at: timestamp}\n"),
    "models/sales_appended.sql": (
        "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
        "select * from {{ ref('sales') }}\n{% if is_incremental() %}\n"
        "where sold_at >= (select max(sold_at) - interval '6 hours' from {{ this }})\n{% endif %}\n"),
    "models/sales_merged.sql": (
        "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='sale_id') }}\n"
        "select * from {{ ref('sales') }}\n{% if is_incremental() %}\n"
        "where sold_at >= (select max(sold_at) - interval '6 hours' from {{ this }})\n{% endif %}\n"),
    "models/sales_broken.sql": (
        "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
        "select * from {{ ref('sales') }}\n{% if is_incremental() %}\n"
        "where no_such_column > 0\n{% endif %}\n"),
}


def _sales_csv() -> str:
    start = dt.datetime(2026, 1, 1)
    rows = ["sale_id,amount,sold_at"]
    rows += [f"{i},{(i * 37) % 100 + 0.5},{start + dt.timedelta(hours=i)}" for i in range(120)]
    return "\n".join(rows) + "\n"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _gameday(project: Path, profiles: Path, out: Path, *extra: str) -> tuple[int, str, dict | None]:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        code, _, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                   "--output-dir", str(out), *extra])
    finally:
        os.chdir(cwd)
    return code, stderr, load_report(out) if (out / "report.json").exists() else None


def _profile_with_an_output_for_elsewhere(project: Path, output: dict) -> None:
    """profiles.yml with the target and a second output that reads an environment variable this
    machine does not set (as a shared profiles.yml with a warehouse target does): dbt renders only
    the target's output, and so must the runner."""
    import yaml

    other = {"type": "postgres", "host": "{{ env_var('RS_TEST_UNSET_WAREHOUSE_HOST') }}", "user": "u",
             "password": "{{ env_var('RS_TEST_UNSET_WAREHOUSE_PASSWORD') }}", "port": 5432, "dbname": "d",
             "schema": "s"}
    assert "RS_TEST_UNSET_WAREHOUSE_HOST" not in os.environ
    (project / "profiles.yml").write_text(yaml.safe_dump(
        {"seed_only": {"target": "dev", "outputs": {"dev": output, "warehouse": other}}}))


@pytest.mark.parametrize("engine", ["duckdb", "duckdb-in-memory", "postgres"])
def test_a_timed_seed_is_replayed_like_a_source(engine, tmp_path, request):
    project = tmp_path / "seed_only"
    _write(project, {**SEED_PROJECT, "seeds/sales.csv": _sales_csv()})
    if engine == "duckdb":
        import duckdb

        duckdb.connect(str(project / "seed_only.duckdb")).close()  # the user's (empty) database
        write_profiles(project, "seed_only", duckdb_profile("seed_only.duckdb"))
    elif engine == "duckdb-in-memory":
        # dbt-duckdb's default target: no file, every input a seed, so nothing needs copying
        _profile_with_an_output_for_elsewhere(project, {"type": "duckdb", "schema": "main", "threads": 1})
    else:
        server = request.getfixturevalue("pg_server")
        write_profiles(project, "seed_only", postgres_profile(server, request.getfixturevalue("pg_database")))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert code == 1, stderr
    models = by_name(report)
    assert report["summary"]["cutoffs"] == ["2026-01-02 00:00:00", "2026-01-03 00:00:00", "2026-01-04 00:00:00",
                                            "2026-01-05 00:00:00", "2026-01-06 00:00:00"]
    assert scenario(models["sales_merged"], "replay")["verdict"] == "safe"
    appended = scenario(models["sales_appended"], "replay")
    # each of the 4 daily runs appends the 6-hour lookback again: 7 rows (the newest and 6 before it)
    assert (appended["verdict"], appended["rows"], appended["extra_rows"]) == ("duplicates", 148, 28)
    broken = scenario(models["sales_broken"], "replay")
    assert broken["verdict"] == "error"
    # dbt's whole message, not only "ERROR": the step, the database's error and the column it names
    assert broken["message"].startswith("batch 1: ")
    assert "no_such_column" in broken["message"] and len(broken["message"]) > 60
    # without dbt's "compiled code at <path>": a path in a sandbox that is gone when the report is read
    assert "compiled code at" not in broken["message"] and "rerun_safety_sbx_" not in broken["message"]


def test_a_load_stamp_synced_after_the_events_neither_sets_the_window_nor_arrives(tmp_path):
    """A connector's dimension carries only its last sync (`_fivetran_synced`), months after the events:
    the replay window stays where the events are, and the dimension is present in full at every build
    (current state), not a table arriving in the last batch."""
    import duckdb

    project = tmp_path / "seed_only"
    regions = ["sale_id,region,_fivetran_synced"] + [
        f"{i},{('north', 'south', 'east')[i % 3]},{dt.datetime(2026, 6, 1 + i % 20, 4)}" for i in range(120)]
    files = {**SEED_PROJECT, "seeds/sales.csv": _sales_csv(), "seeds/regions.csv": "\n".join(regions) + "\n",
             "models/sales_regions.sql": (
                 "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='sale_id') }}\n"
                 "select s.sale_id, s.amount, s.sold_at, r.region from {{ ref('sales') }} s\n"
                 "join {{ ref('regions') }} r on r.sale_id = s.sale_id\n{% if is_incremental() %}\n"
                 "where s.sold_at >= (select date_trunc('day', max(sold_at)) - interval '1 day' from {{ this }})\n"
                 "{% endif %}\n")}
    files["dbt_project.yml"] += ("    regions:\n      +event_time: _fivetran_synced\n"
                                 "      +column_types: {_fivetran_synced: timestamp}\n")
    _write(project, files)
    duckdb.connect(str(project / "seed_only.duckdb")).close()
    write_profiles(project, "seed_only", duckdb_profile("seed_only.duckdb"))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay,partial")
    assert code == 1, stderr
    # the sales' days, as without the dimension (not June's)
    assert report["summary"]["cutoffs"] == ["2026-01-02 00:00:00", "2026-01-03 00:00:00", "2026-01-04 00:00:00",
                                            "2026-01-05 00:00:00", "2026-01-06 00:00:00"]
    notes = "\n".join(report["summary"]["notes"])
    assert ("regions (its only time column is a load time (_fivetran_synced), which starts after the other "
            "inputs' replayed batches (2026-06-01 04:00, the batches end 2026-01-06 00:00)") in notes
    joined = by_name(report)["sales_regions"]
    for name in ("replay", "partial"):
        s = scenario(joined, name)
        # every sale has its region at every build: none lost, and the replayed batches brought rows
        assert (s["verdict"], s["rows"], s["reference_rows"], s["missing_keys"]) == ("safe", 120, 120, 0), name
        assert s["input_rows"] > 0, name


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_a_string_agg_without_order_by_is_nondeterministic_and_contaminates_nothing(engine, tmp_path, request):
    """The seed's rows are stored out of time order: the reference reads them in that order, a
    replay in the order its batches arrived, so `string_agg` without ORDER BY lists the same ids in
    another order. That is the model's nondeterminism, not a rerun defect: `nondeterministic`, and
    the count below it, equal, names no contamination. A real change in the same column stays drift."""
    project = tmp_path / "seed_only"
    rows = _sales_csv().splitlines()
    shuffled = [rows[0], *sorted(rows[1:], key=lambda r: (int(r.split(",")[0]) * 7919) % 120)]
    files = {**SEED_PROJECT, "seeds/sales.csv": "\n".join(shuffled) + "\n",
             "models/sales_ids.sql": ("{{ config(materialized='table') }}\n"
                                      "select sale_id % 5 as customer, string_agg(cast(sale_id as varchar), ',') as ids\n"
                                      "from {{ ref('sales') }} group by 1\n"),
             "models/sales_id_customers.sql": "select count(*) as customers from {{ ref('sales_ids') }}\n",
             # the same aggregate, plus a real difference: an id that only replays see
             "models/sales_ids_drift.sql": (
                 "{{ config(materialized='table') }}\n"
                 "select sale_id % 5 as customer, string_agg(cast(sale_id as varchar), ',') as ids\n"
                 "from {{ ref('sales') }} group by 1\nunion all select 99, "
                 "cast((select count(*) from {{ ref('sales_appended') }}) as varchar)\n")}
    _write(project, files)
    if engine == "duckdb":
        import duckdb

        duckdb.connect(str(project / "seed_only.duckdb")).close()
        write_profiles(project, "seed_only", duckdb_profile("seed_only.duckdb"))
    else:
        server = request.getfixturevalue("pg_server")
        write_profiles(project, "seed_only", postgres_profile(server, request.getfixturevalue("pg_database")))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert code == 1, stderr
    models = by_name(report)
    ids = models["sales_ids"]
    assert (ids["verdict"], ids["root_cause"]) == ("nondeterministic", True), ids["scenarios"]
    replay = scenario(ids, "replay")
    assert replay["verdict"] == "nondeterministic" and "without ORDER BY (ids)" in replay["message"], replay
    assert models["sales_id_customers"]["verdict"] == "safe"
    assert models["sales_id_customers"]["contaminated_by"] == []
    assert scenario(models["sales_ids_drift"], "replay")["verdict"] == "drift"


def test_the_determinism_scenario_runs_duckdb_with_another_thread_count(tmp_path):
    """Ties are also split between threads: the second build of the determinism scenario runs with
    another DuckDB thread count than the reference (1 where it used more, else 2)."""
    import yaml

    project = tmp_path / "seed_only"
    _write(project, {**SEED_PROJECT, "seeds/sales.csv": _sales_csv()})
    import duckdb

    duckdb.connect(str(project / "seed_only.duckdb")).close()
    write_profiles(project, "seed_only", duckdb_profile("seed_only.duckdb"))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "determinism",
                                    "--keep-sandboxes")
    note = next(n for n in (report or {}).get("summary", {}).get("notes", ()) if n.startswith("--keep-sandboxes"))
    run_dir = Path(note.split("after that): ", 1)[1].split(", ")[0]).parent.parent
    try:  # kept for a day otherwise
        assert code == 0, stderr  # (sales_broken fails only in incremental runs)
        profiles = {p.parent.name.rsplit("_", 1)[-1]: yaml.safe_load(p.read_text())["seed_only"]["outputs"]["dev"]
                    for p in (run_dir / "profiles").glob("*/profiles.yml")}
        reference = int(profiles["reference"].get("settings", {}).get("threads") or os.cpu_count() or 1)
        assert profiles["determinism"]["settings"]["threads"] == (1 if reference > 1 else 2), profiles
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_coverage_counts_the_rows_each_decisive_step_brought_also_in_worker_processes(tmp_path):
    """Each scenario of a replayed model carries the rows of its inputs in the scenario's decisive
    step (report.json `input_rows`, the HTML's "input rows tested"), and the late scenario run in a
    worker process (--threads 2) knows which rows arrive late: tested, not `untested`."""
    project = tmp_path / "seed_only"
    _write(project, {**SEED_PROJECT, "seeds/sales.csv": _sales_csv()})
    import duckdb

    duckdb.connect(str(project / "seed_only.duckdb")).close()
    write_profiles(project, "seed_only", duckdb_profile("seed_only.duckdb"))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay,backfill,late",
                                    "--late-fraction", "0.3", "--threads", "2")
    assert code == 1, stderr
    merged = by_name(report)["sales_merged"]
    rows = {s["name"]: s["input_rows"] for s in merged["scenarios"]}
    # 120 hourly sales from 2026-01-01: the first build holds the first day, then 4 daily batches of 24
    assert rows["reference"] is None and rows["replay"] == 4 * 24 and rows["backfill"] == 24, rows
    assert rows["late"] > 0, rows
    late = scenario(merged, "late")
    # rows two days late fall outside its 6-hour lookback: exercised, and lost (not `untested`)
    assert late["verdict"] == "loss" and late["missing_rows"] > 0, late
    html = (tmp_path / "out" / "report.html").read_text()
    assert '<tr class="coverage"><th' in html and "input rows tested" in html


KEEP_ADDING = """{% materialization keep_adding, default %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing = adapter.get_relation(database=this.database, schema=this.schema, identifier=this.identifier) -%}
  {% call statement('main') %}
    {% if existing is none %}create table {{ target_relation }} as {{ sql }}
    {% else %}insert into {{ target_relation }} {{ sql }}{% endif %}
  {% endcall %}
  {{ adapter.commit() }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
"""


def test_a_materialization_of_the_projects_own_is_replayed_and_an_empty_model_is_not_judged(tmp_path):
    """A custom materialization (here: insert the whole query again at every run) is replayed at
    every run like an incremental model, and judged; lint says the game day replays it, and it does.
    A model file with no SQL, which dbt builds nothing for, is named in the notes, not called an error."""
    project = tmp_path / "seed_only"
    _write(project, {**SEED_PROJECT, "seeds/sales.csv": _sales_csv(),
                     "macros/keep_adding.sql": KEEP_ADDING,
                     "models/sales_kept.sql": "{{ config(materialized='keep_adding') }}\nselect * from {{ ref('sales') }}\n",
                     "models/nothing.sql": "\n"})
    import duckdb

    duckdb.connect(str(project / "seed_only.duckdb")).close()
    write_profiles(project, "seed_only", duckdb_profile("seed_only.duckdb"))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert code == 1, stderr
    models = by_name(report)
    assert "nothing" not in models
    assert any("models with no SQL, which dbt builds nothing for (not judged): nothing" in n for n in report["summary"]["notes"])
    kept = scenario(models["sales_kept"], "replay")
    # the first build holds 24 rows (before the 4 replayed days); each of the 4 runs inserts every row again
    assert (models["sales_kept"]["verdict"], kept["verdict"]) == ("duplicates", "duplicates"), kept
    assert kept["rows"] - kept["reference_rows"] == kept["extra_rows"] > 0, kept


def test_one_table_declared_as_two_sources_is_one_input(tmp_path):
    """A package's source and the project's own for one table (one with a time column, one without),
    plus a file source a hook's text happens to name: the table is copied and replayed once, the
    models of both declarations read its batches, and the file (absent) is not copied."""
    import duckdb

    project = tmp_path / "twice"
    start = dt.datetime(2026, 1, 1)
    con = duckdb.connect(str(tmp_path / "twice.duckdb"))
    con.execute("create schema raw")
    con.execute("create table raw.orders as select i as id, i % 7 as amount, "
                "timestamp '2026-01-01' + i * interval 1 hour as ordered_at from range(120) t(i)")
    con.close()
    _write(project, {
        "dbt_project.yml": "name: twice\nversion: '1.0.0'\nconfig-version: 2\nprofile: twice\n",
        "models/sources.yml": (
            "sources:\n"
            "  - name: shop\n    schema: raw\n    tables:\n      - name: orders\n        config: {event_time: ordered_at}\n"
            "  - name: vendor\n    schema: raw\n    tables:\n      - name: orders\n"
            "  - name: files\n    meta: {external_location: \"read_parquet('/nonexistent/{name}.parquet')\"}\n"
            "    tables:\n      - name: orders\n"),
        "models/orders_merged.sql": (
            "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',\n"
            "          post_hook='select count(*) from raw.orders') }}\n"
            "select * from {{ source('shop', 'orders') }}\n{% if is_incremental() %}\n"
            "where ordered_at >= (select max(ordered_at) - interval '6 hours' from {{ this }})\n{% endif %}\n"),
        "models/orders_vendor.sql": (
            "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
            "select * from {{ source('vendor', 'orders') }}\n")})
    write_profiles(project, "twice", duckdb_profile(tmp_path / "twice.duckdb"))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert code == 1, stderr
    models = by_name(report)
    merged, vendor = scenario(models["orders_merged"], "replay"), scenario(models["orders_vendor"], "replay")
    assert (merged["verdict"], merged["rows"]) == ("safe", 120), merged
    # the vendor declaration reads the same batches: every run appends all rows that have arrived
    assert vendor["verdict"] == "duplicates" and vendor["reference_rows"] == 120, vendor
    assert start.isoformat(sep=" ") not in " ".join(report["summary"]["cutoffs"])


def test_an_in_memory_target_that_a_source_is_read_from_is_one_line_and_exit_2(tmp_path):
    project = tmp_path / "seed_only"
    _write(project, {**SEED_PROJECT, "seeds/sales.csv": _sales_csv(),
                     "models/sources.yml": ("sources:\n  - name: shop\n    schema: raw\n    tables:\n"
                                            "      - name: orders\n        config: {event_time: ordered_at}\n"),
                     "models/orders_appended.sql": (
                         "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
                         "select * from {{ source('shop', 'orders') }}\n")})
    _profile_with_an_output_for_elsewhere(project, {"type": "duckdb", "path": ":memory:", "schema": "main"})
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert (code, report) == (2, None), stderr
    assert stderr.strip().splitlines() == [
        "rerun-safety: error: source shop.orders is read from the target, an in-memory DuckDB (path ':memory:'), "
        "which holds no tables between runs: point the profile at the DuckDB file that holds it"], stderr
    # a file that does not exist yet (dbt creates it at the first run): the same, naming the file
    _profile_with_an_output_for_elsewhere(project, {"type": "duckdb", "path": "not_yet.duckdb", "schema": "main"})
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert (code, report) == (2, None), stderr
    assert stderr.strip().splitlines() == [
        f"rerun-safety: error: source shop.orders is read from the target, the DuckDB file {project / 'not_yet.duckdb'}, "
        "which does not exist yet (dbt creates it at the first run): point the profile at the DuckDB file that "
        "holds it"], stderr
    assert not (project / "not_yet.duckdb").exists()


def test_a_duckdb_file_named_like_its_schema(tmp_path):
    """raw.duckdb holding schema raw: a two-part name is ambiguous to DuckDB; the game day works."""
    import sys

    from support.common import FIXTURES

    sys.path.insert(0, str(FIXTURES / "cadence"))
    import cadence_data

    project = copy_project(FIXTURES / "cadence", tmp_path / "cadence")
    cadence_data.load_duckdb(str(tmp_path / "loaded.duckdb"))  # loading raw.duckdb itself hits the same ambiguity
    shutil.move(tmp_path / "loaded.duckdb", project / "raw.duckdb")
    (project / "profiles.yml").write_text((project / "profiles.yml").read_text().replace("cadence.duckdb", "raw.duckdb"))
    dbt_deps(project, project)
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay",
                                    "--select", "orders_recent orders_dup")
    assert code == 1, stderr
    models = by_name(report)
    assert scenario(models["orders_recent"], "replay")["verdict"] == "safe"
    assert scenario(models["orders_dup"], "replay")["verdict"] == "duplicates"


EXTERNAL_PROJECT = {
    "dbt_project.yml": "name: extp\nversion: '1.0.0'\nconfig-version: 2\nprofile: extp\n",
    "models/sources.yml": ("version: 2\nsources:\n  - name: lake\n    meta:\n"
                           "      external_location: \"data/{name}.parquet\"\n"
                           "    tables:\n      - name: events\n        config:\n          event_time: ts\n"),
    "models/ev_merged.sql": (
        "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}\n"
        "select * from {{ source('lake', 'events') }}\n"
        "{% if is_incremental() %} where ts >= (select max(ts) - interval '3 hours' from {{ this }}) {% endif %}\n"),
    "models/ev_py.py": (
        "def model(dbt, session):\n"
        "    dbt.config(materialized='incremental', incremental_strategy='append')\n"
        "    df = dbt.ref('ev_merged')\n"
        "    if dbt.is_incremental:\n"
        "        df = df.filter(f\"ts >= (select max(ts) - interval '3 hours' from {dbt.this})\")\n"
        "    return df\n"),
}


def test_an_external_location_source_and_a_python_model(tmp_path):
    """dbt-duckdb: a source read from a parquet file is copied as a table (the file is only
    read), and a Python model is replayed like a SQL model."""
    import duckdb

    from support.gameday import file_sha256

    project = tmp_path / "extp"
    _write(project, EXTERNAL_PROJECT)
    (project / "data").mkdir()
    with duckdb.connect() as con:
        con.execute(f"copy (select range::int as id, timestamp '2026-02-01' + to_hours(range::int) as ts, "
                    f"range * 1.5 as v from range(200)) to '{project / 'data' / 'events.parquet'}' (format parquet)")
    duckdb.connect(str(project / "extp.duckdb")).close()
    write_profiles(project, "extp", duckdb_profile("extp.duckdb"))
    before = file_sha256(project / "data" / "events.parquet")
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--scenarios", "replay")
    assert code == 1, stderr
    models = by_name(report)
    merged = scenario(models["ev_merged"], "replay")
    assert (merged["verdict"], merged["rows"], merged["reference_rows"]) == ("safe", 200, 200)
    # 200 hourly rows over 9 days; the first build holds 5 days (120 rows), then each of 4 daily runs
    # appends the 3-hour lookback again: the newest row and the 3 before it
    py = scenario(models["ev_py"], "replay")
    assert (py["verdict"], py["rows"], py["extra_rows"]) == ("duplicates", 216, 16)
    assert models["ev_py"]["materialized"] == "incremental"
    assert file_sha256(project / "data" / "events.parquet") == before


EXPRESSION_PROJECT = {
    "dbt_project.yml": "name: exprp\nversion: '1.0.0'\nconfig-version: 2\nprofile: exprp\n",
    # dbt allows an expression as loaded_at_field (freshness runs it); the game day needs a column
    "models/sources.yml": ("version: 2\nsources:\n  - name: shop\n    schema: main\n    tables:\n"
                           "      - name: orders\n        loaded_at_field: \"order_day::timestamp\"\n"),
    "models/orders_appended.sql": (
        "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
        "select * from {{ source('shop', 'orders') }}\n"
        "{% if is_incremental() %} where order_day >= (select max(order_day) from {{ this }}) {% endif %}\n"),
}


def test_a_loaded_at_field_expression_says_how_to_name_a_column(tmp_path):
    """`loaded_at_field: order_day::timestamp` is no column: one line naming rerun_safety.yml, exit 2,
    no report; with `time_columns: {shop.orders: order_day}` there the game day runs (and judges)."""
    import duckdb

    project = tmp_path / "exprp"
    _write(project, EXPRESSION_PROJECT)
    con = duckdb.connect(str(project / "exprp.duckdb"))
    con.execute("create table orders as select i as order_id, date '2026-01-01' + (i % 10)::int as order_day, "
                "i * 1.5 as amount from range(200) t(i)")
    con.close()
    write_profiles(project, "exprp", duckdb_profile(str(project / "exprp.duckdb"), schema="analytics"))
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--steps", "3")
    lines = [ln for ln in stderr.splitlines() if ln.startswith("rerun-safety: error")]
    assert code == 2 and report is None, stderr
    assert len(lines) == 1 and "source shop.orders: time column 'order_day::timestamp' cannot be read as a " \
        "timestamp" in lines[0], stderr
    assert lines[0].endswith("; name a timestamp column of it in rerun_safety.yml (time_columns: "
                             "{shop.orders: <column>}), which overrides dbt's configs"), lines[0]
    (project / "rerun_safety.yml").write_text("time_columns:\n  shop.orders: order_day\n")
    code, stderr, report = _gameday(project, project, tmp_path / "out", "--steps", "3")
    assert code == 1, stderr
    m = by_name(report)["orders_appended"]
    # each run re-appends the last day it holds: 20 orders a day
    assert m["verdict"] == "duplicates" and scenario(m, "replay")["extra_rows"] == 60
