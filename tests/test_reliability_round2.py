"""Reliability, round two: no write outside a sandbox (dbt-duckdb external models), literals from data
safe under standard_conforming_strings=off, a CREATEDB-only role, private work roots, secrets only
through the environment. Real DuckDB files, a real PostgreSQL server, real dbt and real signals."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import uuid
from pathlib import Path

import duckdb
import pytest

from gameday_support import file_sha256, load_report
from test_reliability_support import (CHEAP, PREFIX, leftover_databases, leftover_folders, payments_target, phase,
                                      spawn_gameday, wait_until, work_root)


# ------------------------------------------------------------------ 1. external models stay in the sandbox

def _files(root: Path) -> dict[str, str]:
    """Every file under `root` (dbt's own folders left out) with its sha256."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] not in ("target", "logs", "dbt_packages"):
            out[str(rel)] = file_sha256(path)
    return out


def external_target(tmp: Path):
    """The payments fixture on DuckDB plus two external models downstream of its incremental merge model:
    one with a `location` (the user's export, present before the game day), one written to
    `external_root` (the profile's default, the working directory)."""
    target = payments_target("duckdb", tmp)
    export = target.project / "exports" / "payments.parquet"
    export.parent.mkdir()
    with duckdb.connect() as con:  # the user's own export from an earlier dbt run
        con.execute(f"copy (select range as payment_no from range(4800)) to '{export}' (format parquet)")
    models = target.project / "models"
    (models / "payments_export.sql").write_text(
        f"{{{{ config(materialized='external', location='{export}') }}}}\n"
        "select account_id, payment_no, \"Amount EUR\" from {{ ref('payments_merged') }}\n")
    (models / "payments_export_root.sql").write_text(
        "{{ config(materialized='external', format='csv') }}\n"
        "select account_id, count(*) as payments from {{ ref('payments_merged') }} group by 1\n")
    return target, export


EXTERNAL_SELECT = ("--select", "payments_merged", "--select", "payments_export", "--select", "payments_export_root")


def test_external_models_write_only_into_sandboxes(tmp_path):
    target, export = external_target(tmp_path / "proj")
    before = _files(target.project)
    assert str(Path("exports") / "payments.parquet") in before
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", *EXTERNAL_SELECT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert _files(target.project) == before  # the export byte-identical, no csv in the working directory
    assert not (target.project / "payments_export_root.csv").exists()
    models = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    for name in ("payments_export", "payments_export_root"):  # judged like tables
        assert models[name]["verdict"] == "safe", models[name]
        scen = {s["name"]: s for s in models[name]["scenarios"]}
        assert scen["replay"]["rows"] == scen["replay"]["reference_rows"] > 0
        assert set(scen) == {"reference", "replay", "rerun"}
    assert models["payments_export"]["scenarios"][0]["reference_rows"] == 600
    assert leftover_folders(tmp_path / "run") == []


def test_external_model_file_survives_sigkill(tmp_path):
    target, export = external_target(tmp_path / "proj")
    before = _files(target.project)
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2",
                         *EXTERNAL_SELECT)
    assert wait_until(lambda: phase(tmp_path / "run") == "scenario", 240, proc, step=0.01), proc.communicate()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _files(target.project) == before
    assert file_sha256(export) == before[str(Path("exports") / "payments.parquet")]


# ------------------------------------------------------------------ 2. literals from data, any server setting

# A partition value that, pasted into a '...' literal with only its quotes doubled, ends the literal
# when standard_conforming_strings is off (the backslash escapes the first quote), creates a table,
# and turns the delete of the batch's partitions into one that deletes nothing.
CRAFTED = ("\\' as text)) returning 1) select 1; create table public.rs_injected (i int); "
           "with rerun_safety_deleted_1 as (delete from public.po_inject as DBT_INTERNAL_DEST where false --")


@pytest.mark.parametrize("setting", ["off", "on"])
def test_partition_values_from_data_are_safe_without_standard_conforming_strings(tmp_path, pg_server, setting):
    """The user's own `dbt run` of a partition_overwrite model on a database where the setting is off (the
    injection) or on (the same values, backslashes included, replaced exactly)."""
    from collections import Counter
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "strategy"))
    from _po_project import make_project, model_sql

    po = make_project(tmp_path, "postgres", {"po_inject": model_sql("partition_key='p'")}, pg_server=pg_server)
    try:
        conn = pg_server.connect()
        conn.cursor().execute(f'alter database "{po.dbname}" set standard_conforming_strings = {setting}')
        conn.close()
        assert po.sql("show standard_conforming_strings", fetch=True) == [(setting,)]
        po.fill_raw("po_inject", "p text, v int", [("a", 1), ("b", 2), (CRAFTED, 3)])
        po.run("po_inject")  # the first build: no strategy yet
        po.fill_raw("po_inject", "p text, v int", [("b", 20), (CRAFTED, 30), ("it's", 40)])
        po.run("po_inject")  # replaces the partitions 'b', CRAFTED and "it's" through literals
        assert po.sql("select to_regclass('public.rs_injected') is null", fetch=True) == [(True,)]
        assert po.rows("po_inject") == Counter([("a", 1), ("b", 20), (CRAFTED, 30), ("it's", 40)])
        po.fill_raw("po_inject", "p text, v int", [(CRAFTED, 31), ("it's", 41)])
        po.run("po_inject")
        assert po.rows("po_inject") == Counter([("a", 1), ("b", 20), (CRAFTED, 31), ("it's", 41)])
    finally:
        po.drop_warehouse()
