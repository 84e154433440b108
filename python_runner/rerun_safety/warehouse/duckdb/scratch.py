"""The lint's DuckDB scratch: empty files (one per catalog the project names) in the run's folder."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml
from sqlglot import exp

from ..scratch import Scratch, TargetProfile, create_batch, quoted_ident, create_statements, first_line, write_profile
from .dialect import DUCKDB


class DuckDBScratch(Scratch):
    mode = "scratch duckdb file"
    dialect = DUCKDB

    def __init__(self, tp: TargetProfile, work: Path, catalogs: list[str]):
        self.dir = work / "scratch_duckdb"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.catalogs = [c for c in dict.fromkeys(catalogs) if c] or ["scratch"]
        main, *others = self.catalogs
        output = {"type": "duckdb", "path": str(self.dir / f"{main}.duckdb"),
                  "schema": tp.output.get("schema", "main"), "threads": 1, "keep_open": False}
        for key in ("extensions", "settings"):
            if tp.output.get(key):
                output[key] = tp.output[key]
        if others:
            output["attach"] = [{"path": str(self.dir / f"{c}.duckdb"), "alias": c} for c in others]
        self.tp = tp
        self._profiles = write_profile(work / "scratch_profile", tp, output)

    def profiles_dir(self) -> str:
        return str(self._profiles)

    def worker_profiles_dir(self, work: Path) -> str:
        # a DuckDB file is locked by the process that opens it: the worker gets its own copy
        copy = work / "scratch_duckdb_pass2"
        shutil.copytree(self.dir, copy, dirs_exist_ok=True)
        profile = yaml.safe_load((self._profiles / "profiles.yml").read_text())
        for prof in profile.values():
            for out in prof["outputs"].values():
                out["path"] = str(copy / Path(out["path"]).name)
                for att in out.get("attach", []):
                    att["path"] = str(copy / Path(att["path"]).name)
        target = work / "scratch_profile_pass2"
        target.mkdir(parents=True, exist_ok=True)
        (target / "profiles.yml").write_text(yaml.safe_dump(profile))
        os.chmod(target / "profiles.yml", 0o600)
        return str(target)

    def _connect(self):
        import duckdb

        main, *others = self.catalogs
        con = duckdb.connect(str(self.dir / f"{main}.duckdb"))
        for c in others:
            path = exp.Literal.string(str(self.dir / f"{c}.duckdb")).sql("duckdb")
            con.execute(f"attach if not exists {path} as {quoted_ident(c).sql('duckdb')}")
        return con

    def create(self, specs):
        failed: dict[tuple[str, str], str] = {}
        specs = list(specs)
        if not specs:
            return failed
        con = self._connect()
        try:
            try:  # all in one transaction first: one commit instead of one per relation
                con.execute("begin")
                for stmt in create_batch(specs, "duckdb", with_database=True):
                    con.execute(stmt)
                con.execute("commit")
                specs = []
            except Exception:  # then one at a time, to keep those that work and say why the others fail
                con.execute("rollback")
            for spec in specs:
                # one transaction each: a query that fails here leaves the placeholder in place
                con.execute("begin")
                try:
                    for stmt in create_statements(spec, "duckdb", with_database=True):
                        con.execute(stmt)
                    con.execute("commit")
                except Exception as err:  # the model's SQL does not run here: no relation, a reason
                    con.execute("rollback")
                    failed[spec.key] = first_line(err)
            con.execute("checkpoint")
        finally:
            con.close()
        return failed

    def columns(self):
        con = self._connect()
        try:
            rows = con.execute("select table_schema, table_name, column_name, data_type "
                               "from information_schema.columns order by table_catalog, table_schema, "
                               "table_name, ordinal_position").fetchall()
        finally:
            con.close()
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for schema, name, column, kind in rows:
            out.setdefault((schema.lower(), name.lower()), []).append((column.lower(), str(kind).lower()))
        return out
