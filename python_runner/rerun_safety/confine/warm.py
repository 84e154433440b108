"""Imported once by the fork server of confined children (confine/__init__.py): parses a one-model project
of the runner's own (no user code, no connection) on each installed adapter, so that dbt's per-process
state (its own and the adapter's macros, the adapter plugin) is in memory before any child is forked. A
child's first parse then costs what a second one does (0.3-0.4 s against 2.8 s). Nothing here starts a
thread (parsing opens no connection), so forking the server stays safe; a failure leaves the children to warm up themselves."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

def _warm(adapter: str, output: dict, root: Path) -> None:
    project = root / adapter
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(f"name: rerun_safety_warm_{adapter}\nversion: '1.0.0'\n"
                                             f"profile: warm\nconfig-version: 2\n"
                                             # dbt's static parser (dbt-extractor) starts a native thread
                                             # pool at first use: a child forked after it would hang in it
                                             "flags:\n  static_parser: false\n")
    (project / "models" / "m.sql").write_text("select 1 as x\n")
    (project / "profiles.yml").write_text(yaml.safe_dump({"warm": {"target": "w", "outputs": {"w": output}}}))
    from ..project import Project

    Project(project, str(project), None, None, root / f"work_{adapter}")


def warm_up() -> list[str]:
    """Parse the one-model project on each installed adapter; the adapters warmed."""
    warmed: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="rerun_safety_warm_"))
    try:
        from ..warehouse.dialects import ENGINES, dialect_for

        for adapter in ENGINES:
            output = dialect_for(adapter).warm_output()
            if output is None:
                continue
            try:
                __import__(f"dbt.adapters.{adapter}")
                _warm(adapter, output, root)
                warmed.append(adapter)
            except Exception:  # noqa: BLE001 - not installed, or dbt changed: the children warm up themselves
                continue
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return warmed


WARMED: list[str] = []
try:  # an exception here would stop the fork server itself (it skips only an ImportError)
    WARMED = warm_up()
except Exception:  # noqa: BLE001
    pass
