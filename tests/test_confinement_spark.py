"""Confinement by privilege on Spark's `method: session`: the game day's Spark runs in its confined process,
on a copy of the user's catalog in the run folder (warehouse/spark/own_catalog.py). The user's catalog is an
embedded Derby metastore and a warehouse folder, made by a Spark process of their own before the run; a hook
writes a folder of the user's by its path (no parser foresees that); after the game day every file of theirs
is byte-identical and the hook is named a side effect that the kernel refused."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.spark import confined_session_project, require_spark

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux's")]

BIN = Path(sys.executable).parent

def _files(root: Path) -> dict[str, str]:
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(root.rglob("*")) if f.is_file()}


def test_a_confined_session_game_day_runs_on_its_own_catalog_and_leaves_the_users_files(tmp_path):
    require_spark()
    user, project = confined_session_project(tmp_path)
    before = _files(user)
    assert any(f.startswith("metastore_db/") for f in before) and any(f.startswith("warehouse/raw.db/events/")
                                                                     for f in before)
    out = tmp_path / "out"
    run = subprocess.run([str(BIN / "rerun-safety"), "gameday", "--project-dir", str(project), "--profiles-dir",
                          str(project), "--output-dir", str(out), "--vars", json.dumps({"outside": str(user)}),
                          "--batch-size", "day", "--steps", "2", "--scenarios", "rerun"],
                         capture_output=True, text=True, cwd=project)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    # the user's metastore, tables and folder byte for byte: no export, no sandbox database
    assert _files(user) == before
    assert not (user / "export").exists()
    report = json.loads((out / "report.json").read_text())
    models = {m["name"]: m for m in report["models"]}
    assert {n: m["verdict"] for n, m in models.items()} == {"ev_append": "duplicates", "ev_exported": "side_effect"}
    rerun = next(s for s in models["ev_append"]["scenarios"] if s["name"] == "rerun")
    # 2 batch runs, each twice, every one appending the day it re-reads again
    assert rerun["extra_rows"] == 5668, rerun
    assert models["ev_exported"]["reason"].startswith(
        f"writes a file outside the sandbox (refused there by the kernel): {user / 'export'}; hook: ")
    assert report["confinement"]["confined"] is True
    notes = report["summary"]["notes"]
    # a network namespace with only its own loopback (the JVM and its gateway), no Unix socket: nothing open
    confined = [n for n in notes if n.startswith("confined by the kernel (Linux Landlock ABI ")]
    assert len(confined) == 1 and "NOT confined" not in confined[0], notes
    assert f"Spark (method: session) ran on the run's own copy of the catalog ({user / 'metastore_db'}): the " \
           "user's tables were read where they are, and nothing but the run folder could be written" in notes
    # Spark's own log stays off the terminal: the failed tasks' stacks are not printed
    assert "java.io.IOException" not in run.stderr + run.stdout


def test_a_session_on_a_metastore_service_is_refused_in_one_line(tmp_path):
    """A Hive metastore that is not a file of this machine would hold the sandboxes' databases: refused before
    Spark starts, unless --unconfined."""
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: remote_meta\nversion: '1.0'\nconfig-version: 2\n"
                                             "profile: remote_meta\n")
    (project / "models" / "m.sql").write_text("select 1 as x\n")
    (project / "profiles.yml").write_text(json.dumps({"remote_meta": {"target": "dev", "outputs": {"dev": {
        "type": "spark", "method": "session", "host": "localhost", "schema": "analytics",
        "server_side_parameters": {"spark.hadoop.hive.metastore.uris": "thrift://metastore.example:9083"}}}}}))
    run = subprocess.run([str(BIN / "rerun-safety"), "gameday", "--project-dir", str(project), "--profiles-dir",
                          str(project), "--output-dir", str(tmp_path / "out")], capture_output=True, text=True,
                         cwd=project)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines == ["rerun-safety: error: cannot confine the project's code: Spark's method: session: its Hive "
                     "metastore is a service (spark.hadoop.hive.metastore.uris), which would hold the sandboxes' "
                     "databases; pass --unconfined to run without that protection (the reports will say so)"], lines
    assert not (tmp_path / "out").exists()


def test_the_users_metastore_is_found_as_derby_finds_it(tmp_path, monkeypatch):
    from rerun_safety.warehouse.spark.own_catalog import derby_folder, gap, own_catalog

    url = "spark.hadoop.javax.jdo.option.ConnectionURL"
    home = {"spark.driver.extraJavaOptions": "-Xmx1g -Dderby.system.home=/srv/spark"}
    assert derby_folder({}, tmp_path) == tmp_path / "metastore_db"
    assert derby_folder(home, tmp_path) == Path("/srv/spark/metastore_db")
    assert derby_folder({url: "jdbc:derby:;databaseName=meta;create=true", **home}, tmp_path) == Path("/srv/spark/meta")
    assert derby_folder({url: "jdbc:derby:/abs/meta;create=true"}, tmp_path) == Path("/abs/meta")
    assert derby_folder({"javax.jdo.option.ConnectionURL": "jdbc:derby:rel"}, tmp_path) == tmp_path / "rel"
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert gap({url: "jdbc:derby:;databaseName=meta"}) is None
    assert gap({"spark.sql.catalogImplementation": "in-memory", "hive.metastore.uris": "thrift://x:9083"}) is None
    assert gap({url: "jdbc:postgresql://db/hive"}) == ("its Hive metastore is a database outside this machine's "
                                                       "files (jdbc:postgresql://db/hive)")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "hive-site.xml").write_text("<configuration><property><name>hive.metastore.uris</name>"
                                        "<value>thrift://x:9083</value></property></configuration>")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert gap({}) == f"{conf / 'hive-site.xml'} names a Hive metastore that would hold the sandboxes' databases"
    # the copy leaves the user's lock files behind; the session's folders are the run's
    user = tmp_path / "metastore_db"
    (user / "seg0").mkdir(parents=True)
    (user / "seg0" / "c10.dat").write_bytes(b"x")
    (user / "db.lck").write_bytes(b"lock")
    own = own_catalog({url: "jdbc:derby:;databaseName=metastore_db", "spark.log.level": "WARN"}, tmp_path / "run",
                      tmp_path)
    copy = tmp_path / "run" / "spark" / "metastore_db"
    assert own.copied_from == user and (copy / "seg0" / "c10.dat").read_bytes() == b"x" and not (copy / "db.lck").exists()
    assert own.parameters[url] == f"jdbc:derby:;databaseName={copy};create=true"
    assert own.parameters["spark.sql.warehouse.dir"] == str(tmp_path / "run" / "spark" / "warehouse")
    assert own.parameters["spark.log.level"] == "WARN"
    assert own.parameters["spark.driver.extraJavaOptions"].endswith(
        f"-Dderby.system.home={tmp_path / 'run' / 'spark'} -Djava.io.tmpdir={tmp_path / 'run' / 'spark' / 'tmp'} "
        "-XX:-UsePerfData")
