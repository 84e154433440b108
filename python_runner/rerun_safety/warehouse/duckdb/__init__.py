"""DuckDB: sandboxes are files, copied whole; the diff attaches every side's file read-only."""
from __future__ import annotations

from ..adapter import Adapter


class DuckDB(Adapter):
    name = "duckdb"

    @property
    def dialect(self):
        from .dialect import DUCKDB

        return DUCKDB

    def engine(self, target_output, work_root, run_id, *, attach=False, confined=False, statement_guard=True,
               max_sandbox_size=None):
        from .engine import DuckDBEngine

        return DuckDBEngine(target_output, work_root, run_id, attach, statement_guard=statement_guard)

    def reading(self):
        from . import reading

        return reading

    def scratch(self, tp, work, run_id, catalogs, manifest, confined=False):
        from .scratch import DuckDBScratch

        return DuckDBScratch(tp, work, catalogs)
