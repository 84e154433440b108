"""The engine layer is closed: an engine is one `Adapter` class and one entry in `registry.ADAPTERS`.

The worked example: `FakeDuck`, an engine named `fakeduck` that keeps its sandboxes as DuckDB files.
Registered, and nothing else changed, the profile check accepts it, the dialect, engine and reader
factories hand out its parts, and a snapshot, a clone, a connection, a diff and a cleanup work on it."""
from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest
import yaml

from rerun_safety.diff_command import run_diff
from rerun_safety.errors import ConfigError
from rerun_safety.profiles import load_target_output
from rerun_safety.warehouse import registry
from rerun_safety.warehouse.base import Engine, SourceTable
from rerun_safety.warehouse.dialects import dialect_for, engines
from rerun_safety.warehouse.duckdb import DuckDB
from rerun_safety.warehouse.duckdb.engine import DuckDBEngine
from rerun_safety.warehouse.duckdb.scratch import DuckDBScratch
from rerun_safety.warehouse.engines import engine_for, reader_for, scratch_for
from rerun_safety.warehouse.scratch import TargetProfile


class FakeDuckEngine(DuckDBEngine):
    """DuckDB's sandboxes under another adapter's name."""


class FakeDuck(DuckDB):
    name = "fakeduck"

    def engine(self, target_output, work_root, run_id, *, attach=False, confined=False, statement_guard=True,
               max_sandbox_size=None):
        return FakeDuckEngine(target_output, work_root, run_id, attach, statement_guard=statement_guard)


@pytest.fixture
def fakeduck(tmp_path):
    registry.register(FakeDuck())
    try:
        path = tmp_path / "user.duckdb"
        con = duckdb.connect(str(path))
        con.execute("create schema raw")
        con.execute("create table raw.orders as select range as id, range % 3 as kind from range(10)")
        con.execute("create table raw.orders_copy as select * from raw.orders where id <> 4")
        con.close()
        yield {"type": "fakeduck", "path": str(path), "schema": "main", "threads": 1}
    finally:
        registry.unregister("fakeduck")


def test_one_class_and_one_entry_make_an_engine(fakeduck, tmp_path):
    assert "fakeduck" in engines() and registry.adapter("fakeduck").name == "fakeduck"
    assert dialect_for("fakeduck") == "duckdb"  # its SQL is DuckDB's
    (tmp_path / "profiles.yml").write_text(yaml.safe_dump({"p": {"target": "dev", "outputs": {"dev": fakeduck}}}))
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: p\nversion: '1'\nconfig-version: 2\n")
    assert load_target_output(tmp_path, tmp_path, None, {})[2]["type"] == "fakeduck"

    engine = engine_for(fakeduck, tmp_path / "work", "fake1")
    assert isinstance(engine, FakeDuckEngine) and isinstance(engine, Engine) and engine.statement_guard
    src = SourceTable("source.p.raw.orders", "raw.orders", None, "raw", "orders", "id", "event_time")
    snapshot = engine.create_snapshot([src])
    clone = engine.clone(snapshot, "scenario")
    with engine.connect(clone) as con:
        assert con.fetchall("select count(*), sum(id) from rerun_safety_snapshot.raw__orders") == [(10, 45)]
    assert engine.user_relations()[("raw", "orders")] == ("raw", "orders")
    assert engine.notes == [] and engine.budget_tripped() is None
    engine.cleanup()
    engine.close()
    assert not (tmp_path / "work" / "rerun_safety_sbx_fake1").exists()

    # the diff reads it through the same entry
    assert reader_for("fakeduck").location(fakeduck, None, "raw.orders") == str(Path(fakeduck["path"]).resolve())
    diff = run_diff("raw.orders", "raw.orders_copy", key=("id",), project_dir=str(tmp_path),
                    profiles_dir=str(tmp_path)).diff
    assert (diff.reference_rows, diff.rows, diff.missing_keys, diff.extra_keys) == (10, 9, 1, 0)
    # and the lint's scratch catalog is DuckDB's (the method it inherits)
    tp = TargetProfile("p", "dev", fakeduck)
    assert isinstance(scratch_for("fakeduck", tp, tmp_path / "lint", "r", ["user"], None), DuckDBScratch)


def test_an_engine_not_in_the_table_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^adapter 'fakeduck' is not supported \(supported: duckdb, postgres, spark\)$"):
        engine_for({"type": "fakeduck", "path": str(tmp_path / "x.duckdb")}, tmp_path, "r")
    with pytest.raises(ConfigError, match="diff reads duckdb, postgres and spark targets"):
        reader_for("fakeduck")
    with pytest.raises(ConfigError, match="lint supports duckdb and postgres targets; this target is 'fakeduck'"):
        scratch_for("fakeduck", None, tmp_path, "r", [], None)


def test_what_an_engine_need_not_offer_has_a_declared_answer(tmp_path):
    """An adapter with a name only: the game day, the diff and the lint each say it is not offered."""
    class Bare(registry.Adapter):
        name = "bare"

    registry.register(Bare())
    try:
        assert dialect_for("bare") == "bare" and registry.adapter("bare").errors() == ()
        assert registry.adapter("bare").target_columns({}) == []
        with pytest.raises(ConfigError, match="adapter 'bare' is not supported by the game day"):
            engine_for({"type": "bare"}, tmp_path, "r")
        with pytest.raises(ConfigError, match="diff reads duckdb, postgres and spark targets"):
            reader_for("bare")
    finally:
        registry.unregister("bare")
    assert "bare" not in engines() and os.listdir(tmp_path) == []
