"""Atomicity under SIGKILL: a dbt process killed at several points during the strategy's
statement leaves the target exactly as before or exactly as after, never in between."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _po_project import make_project, model_sql

WORKER = Path(__file__).resolve().parent / "_po_kill_worker.py"
# Row counts: big enough that the statement runs for a measurable fraction of a second.
SIZES = {"duckdb": (600_000, 300_000), "postgres": (300_000, 150_000)}
# Kill delays as fractions of the statement's measured duration (past 1.0: during/after COMMIT).
FRACTIONS = [0.0, 0.25, 0.5, 1.5, 3.0]
MIN_MID_STATEMENT = 3

FINGERPRINT = "select p, count(*), sum(v), sum(id) from {t} group by p order by p"


class Warehouse:
    """Restores the pristine 'before' state for each trial."""

    def __init__(self, project):
        self.project = project
        self.engine = project.engine
        self.pristine = project.root / "pristine.duckdb"
        self.template = f"{project.dbname}_tpl" if self.engine == "postgres" else None

    def freeze(self):
        if self.engine == "duckdb":
            self.project.sql("checkpoint")
            shutil.copy(self.project.db_path, self.pristine)
        else:
            server = self.project.pg_server
            conn = server.connect()
            try:
                conn.cursor().execute(f'alter database "{self.project.dbname}" rename to "{self.template}"')
            finally:
                conn.close()
            self.restore()

    def restore(self):
        if self.engine == "duckdb":
            wal = Path(str(self.project.db_path) + ".wal")
            if wal.exists():
                wal.unlink()
            shutil.copy(self.pristine, self.project.db_path)
        else:
            server = self.project.pg_server
            server.drop_database(self.project.dbname)
            conn = server.connect()
            try:
                conn.cursor().execute(
                    f'create database "{self.project.dbname}" template "{self.template}" strategy file_copy')
            finally:
                conn.close()

    def drop(self):
        if self.engine == "postgres":
            self.project.pg_server.drop_database(self.project.dbname)
            self.project.pg_server.drop_database(self.template)


def _selected_engines(request) -> list[str]:
    """The engines of this module's selected tests."""
    return sorted({item.callspec.params["killable"] for item in request.session.items
                   if item.module is request.module and hasattr(item, "callspec")})


@pytest.fixture(scope="module")
def kill_setups(request, tmp_path_factory):
    """A project, a warehouse with the data and a worker per selected engine. The workers start together:
    each imports dbt and parses its project (several seconds) while the data is generated and while the
    other engine's trials run."""
    started = []
    try:
        for engine in _selected_engines(request):
            pg = request.getfixturevalue("pg_server") if engine == "postgres" else None
            project = make_project(tmp_path_factory.mktemp(f"kill_{engine}"), engine,
                                   {"po_kill": model_sql("partition_key='p'")}, pg_server=pg, parse=False)
            worker = subprocess.Popen([sys.executable, str(WORKER), str(project.root), "po_kill"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
            started.append((engine, project, Warehouse(project), worker))
        setups = {}
        for engine, project, warehouse, worker in started:
            before, after = _make_data(project)
            warehouse.freeze()
            setups[engine] = (project, warehouse, worker, before, after)
        for engine, _, _, worker in started:
            ready = json.loads(worker.stdout.readline() or "{}")
            assert ready.get("ready"), (engine, ready)
        yield setups
    finally:
        for _, _, warehouse, worker in started:
            worker.stdin.close()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            warehouse.drop()


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def killable(request, kill_setups):
    return kill_setups[request.param]


def _make_data(project):
    """The target as a previous run left it (10 partitions) and the next batch (partitions 0-4);
    return the fingerprints of the target before and after the replacement."""
    total, batch = SIZES[project.engine]
    if project.engine == "duckdb":
        target_rows, batch_rows = f"range({total})", f"range({batch})"
    else:
        target_rows, batch_rows = f"generate_series(0, {total - 1})", f"generate_series(0, {batch - 1})"
    project.sql([
        f"create table po_kill as select i as id, i % 10 as p, i as v from {target_rows} t(i)",
        f"create table raw_po_kill as select i as id, i % 5 as p, -i as v from {batch_rows} t(i)",
    ])
    before = project.sql(FINGERPRINT.format(t="po_kill"), fetch=True)
    after = project.sql(FINGERPRINT.format(
        t="(select * from po_kill where p not in (select distinct p from raw_po_kill) "
          "union all select * from raw_po_kill) x"), fetch=True)
    assert before != after
    return before, after


def trial(project, warehouse, worker, delay):
    warehouse.restore()
    worker.stdin.write(f"{delay}\n")
    worker.stdin.flush()
    outcome = json.loads(worker.stdout.readline())
    state = project.sql(FINGERPRINT.format(t="po_kill"), fetch=True)
    return outcome, state


def test_sigkill_during_statement_leaves_before_or_after(killable, capsys):
    project, warehouse, worker, before, after = killable
    outcome, state = trial(project, warehouse, worker, -1)
    assert outcome["exit"] == 0, outcome
    assert state == after
    seconds = outcome["statement_seconds"]
    assert seconds, outcome
    split = {"before": 0, "after": 0}
    mid_statement = 0
    # planned kill points, then (on a slow machine) early kills until enough hit the statement
    delays = [f * seconds for f in FRACTIONS]
    extra = 0
    while delays:
        delay = delays.pop(0)
        outcome, state = trial(project, warehouse, worker, delay)
        assert outcome["saw_marker"], outcome
        assert state in (before, after), f"partial state after a kill {delay:.2f}s into the statement: {outcome}"
        split["before" if state == before else "after"] += 1
        if outcome["killed"] and not outcome["statement_done_before_kill"]:
            mid_statement += 1
        if not delays and mid_statement < MIN_MID_STATEMENT and extra < 4:
            extra += 1
            delays.append(0.0)
    trials = split["before"] + split["after"]
    with capsys.disabled():
        print(f"\n[kill trials {project.engine}] statement {seconds:.2f}s; {trials} kills: "
              f"{split['before']} before, {split['after']} after; {mid_statement} killed mid-statement")
    assert mid_statement >= MIN_MID_STATEMENT
