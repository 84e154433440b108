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
