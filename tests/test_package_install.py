"""Installing the package into a fresh dbt project (local: <repo root>) on DuckDB and on Spark: it
parses and builds, brings no nodes from this repository's test or fixture projects, and creates
nothing in the warehouse beyond the user's model until the ledger is turned on."""
from __future__ import annotations

from pathlib import Path

import duckdb
import yaml

from support.spark import require_spark, spark_profile, spark_query, unique_schema
from support.common import REPO_ROOT, duckdb_profile, write_profiles

FOREIGN_PREFIXES = ("tests/", "integration_tests/", "examples/", "python_runner/")


def _invoke(project, args):
    from dbt.cli.main import dbtRunner

    return dbtRunner().invoke([*args, "--project-dir", str(project), "--profiles-dir", str(project)])


def _tables(path):
    con = duckdb.connect(str(path))
    try:
        return sorted(r[0] for r in con.execute(
            "select table_schema || '.' || table_name from information_schema.tables "
            "where table_catalog = current_database()").fetchall())
    finally:
        con.close()


def _user_project(tmp_path: Path) -> Path:
    """A user's project with one model that installs the package (local: the repository)."""
    project = tmp_path / "user_project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "user_project", "version": "1.0.0", "config-version": 2, "profile": "user_project"}))
    (project / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    (project / "models" / "orders.sql").write_text("select 1 as order_id, 'new' as status")
    return project


def test_plain_install_parses_builds_and_creates_only_the_users_model(tmp_path):
    project = _user_project(tmp_path)
    warehouse = tmp_path / "user.duckdb"
    write_profiles(project, "user_project", duckdb_profile(warehouse, keep_open=False))

    assert _invoke(project, ["deps"]).success
    parsed = _invoke(project, ["parse"])
    assert parsed.success, parsed.exception
    manifest = parsed.result

    ours = [n for n in manifest.nodes.values() if n.package_name == "rerun_safety"]
    foreign = [n.unique_id for n in ours if n.original_file_path.startswith(FOREIGN_PREFIXES)]
    assert foreign == []
    # the only package model (the ledger view) is disabled, and the package adds no hook to the
    # user's runs (the ledger's on-run-start hook is the user's to add)
    assert [n.unique_id for n in ours] == []
    disabled = {uid for uid in manifest.disabled}
    assert "model.rerun_safety.rerun_safety_run_ledger" in disabled
    assert "model.user_project.orders" in manifest.nodes
    assert any(m.package_name == "rerun_safety" and m.name == "deduplicate" for m in manifest.macros.values())

    built = _invoke(project, ["build"])
    assert built.success, built.exception
    assert [(r.node.unique_id, str(r.status)) for r in built.result.results] == [
        ("model.user_project.orders", "success")]
    assert _tables(warehouse) == ["main.orders"]

    # Turning the ledger on is what creates the ledger table and its view: the check above can fail.
    # The ledger table goes to the schema named by rerun_safety_ledger_schema, created if missing.
    on = _invoke(project, ["build", "--vars", "{rerun_safety_ledger_enabled: true, rerun_safety_ledger_schema: audit}"])
    assert on.success, on.exception
    assert _tables(warehouse) == ["audit.rerun_safety_ledger", "main.orders", "main.rerun_safety_run_ledger"]


def _spark_tables(schema):
    """The schema's tables and views, without the session's temporary views (listed in every schema)."""
    return sorted(r[1] for r in spark_query(f"show tables in {schema}") if not r[2])


def test_plain_install_parses_and_builds_on_spark(tmp_path):
    """Spark has no database above the schema: the disabled ledger model must not give its
    relation one (dbt parse failed with "Field path of type Path in SparkRelation has invalid
    value"), and turning the ledger on builds it there too."""
    require_spark()
    project = _user_project(tmp_path)
    schema, audit = unique_schema("install"), unique_schema("install_audit")
    write_profiles(project, "user_project", spark_profile(schema))

    assert _invoke(project, ["deps"]).success
    parsed = _invoke(project, ["parse"])
    assert parsed.success, parsed.exception
    assert "model.rerun_safety.rerun_safety_run_ledger" in parsed.result.disabled
    assert [n.unique_id for n in parsed.result.nodes.values() if n.package_name == "rerun_safety"] == []

    built = _invoke(project, ["build"])
    assert built.success, built.exception
    assert [(r.node.unique_id, str(r.status)) for r in built.result.results] == [
        ("model.user_project.orders", "success")]
    assert _spark_tables(schema) == ["orders"]
    assert spark_query(f"show schemas like '{audit}'") == []

    on = _invoke(project, ["build", "--vars", f"{{rerun_safety_ledger_enabled: true, rerun_safety_ledger_schema: {audit}}}"])
    assert on.success, on.exception
    assert _spark_tables(schema) == ["orders", "rerun_safety_run_ledger"]
    assert _spark_tables(audit) == ["rerun_safety_ledger"]
    assert spark_query(f"select count(*) from {schema}.rerun_safety_run_ledger") == [(0,)]
