"""dbt-duckdb external models write only into sandboxes: their files, a SIGKILL in the middle, and a
plugin's store that is never called there. Real DuckDB files, real dbt, real signals."""
from __future__ import annotations

import os
import signal
from pathlib import Path


from support.gameday import file_sha256, load_report
from support.reliability import (add_external_models, leftover_folders, payments_target, phase, project_files,
                                 spawn_gameday, wait_until)


def external_target(tmp: Path):
    """The payments fixture on DuckDB plus two external models (support.reliability.add_external_models)."""
    target = payments_target("duckdb", tmp)
    return target, add_external_models(target)


EXTERNAL_SELECT = ("--select", "payments_merged", "--select", "payments_export", "--select", "payments_export_root")


def test_external_models_write_only_into_sandboxes(tmp_path):
    target, export = external_target(tmp_path / "proj")
    before = project_files(target.project)
    assert str(Path("exports") / "payments.parquet") in before
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", *EXTERNAL_SELECT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert project_files(target.project) == before  # the export byte-identical, no csv in the working directory
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
    before = project_files(target.project)
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2",
                         *EXTERNAL_SELECT)
    assert wait_until(lambda: phase(tmp_path / "run") == "scenario", 240, proc, step=0.01), proc.communicate()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert project_files(target.project) == before
    assert file_sha256(export) == before[str(Path("exports") / "payments.parquet")]


PLUGIN = '''"""A dbt-duckdb plugin whose store() writes outside the warehouse (as Glue, SQLAlchemy or Excel ones do)."""
from pathlib import Path


from dbt.adapters.duckdb.plugins import BasePlugin


class Plugin(BasePlugin):
    def store(self, target_config):
        with open(Path(__file__).with_name("registered.txt"), "a") as fh:
            fh.write(f"{target_config.relation} {target_config.location.path}\\n")
'''


def test_external_model_plugin_store_is_not_called_in_sandboxes(tmp_path):
    """An external model with `plugin=` hands its relation to the plugin's store() after the write (e.g.
    registering it in a catalog): the game day keeps the file and its view in the sandbox, and never
    calls the store."""
    from support.common import write_profiles


    target = payments_target("duckdb", tmp_path / "proj")
    (target.project / "prod_store.py").write_text(PLUGIN)
    write_profiles(target.profiles, "payments",
                   dict(target.output, module_paths=[str(target.project)],
                        plugins=[{"module": "prod_store", "alias": "catalog"}]), target="local")
    (target.project / "models" / "payments_registered.sql").write_text(
        "{{ config(materialized='external', plugin='catalog') }}\n"
        "select account_id, payment_no from {{ ref('payments_merged') }}\n")
    before = project_files(target.project)
    proc = spawn_gameday(target, tmp_path / "run", "--steps", "2", "--scenarios", "replay",
                         "--select", "payments_merged", "--select", "payments_registered")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert not (target.project / "registered.txt").exists()
    assert project_files(target.project) == before
    models = {m["name"]: m for m in load_report(proc.out_dir)["models"]}
    assert models["payments_registered"]["verdict"] == "safe"
    assert models["payments_registered"]["scenarios"][0]["reference_rows"] == 600
