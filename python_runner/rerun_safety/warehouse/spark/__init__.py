"""Spark: sandboxes are databases of one catalog (a session of this process, or a Thrift server); the
diff reads through DESCRIBE and SHOW. The lint does not compile on Spark."""
from __future__ import annotations

from ..adapter import Adapter


class Spark(Adapter):
    name = "spark"

    @property
    def dialect(self):
        from .dialect import SPARK

        return SPARK

    def engine(self, target_output, work_root, run_id, *, attach=False, confined=False, statement_guard=True,
               max_sandbox_size=None):
        from .engine import SparkEngine

        return SparkEngine(target_output, work_root, run_id, attach, confined=confined,
                           statement_guard=statement_guard)

    def reading(self):
        from . import reading

        return reading
