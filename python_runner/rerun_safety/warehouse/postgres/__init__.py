"""PostgreSQL: sandboxes are databases of the user's server (from template0), reached as a role of the
run's own when confined; the diff reads in READ ONLY transactions."""
from __future__ import annotations

from ..adapter import Adapter


class Postgres(Adapter):
    name = "postgres"

    @property
    def dialect(self):
        from .dialect import POSTGRES

        return POSTGRES

    def engine(self, target_output, work_root, run_id, *, attach=False, confined=False, statement_guard=True,
               max_sandbox_size=None):
        from .engine import PostgresEngine

        return PostgresEngine(target_output, work_root, run_id, attach, confined=confined,
                              max_sandbox_size=max_sandbox_size, statement_guard=statement_guard)

    def reading(self):
        from . import reading

        return reading

    def scratch(self, tp, work, run_id, catalogs, manifest, confined=False):
        from .scratch import PostgresScratch

        scratch = PostgresScratch(tp, work, run_id, own_role=confined)
        scratch.prepare_manifest(manifest)
        return scratch
