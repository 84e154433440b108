"""Imported by the confined child before its job (confine/child.py): parses a one-model project of the
runner's own (no user code, no connection) on each installed adapter, so that dbt's per-process state (its
own and the adapter's macros, the adapter plugin) is in memory before the project's parse, which then
costs what a second one does (0.3-0.4 s against 2.8 s). Nothing here starts a thread (parsing opens no
connection): Landlock and seccomp confine the calling thread and what it starts, so a thread started here
would stay unconfined. A failure leaves the child to parse in full.

The one-model projects and dbt's partial-parse state of their last parse are kept in the user's cache
folder (`$XDG_CACHE_HOME/rerun_safety`, else `~/.cache/rerun_safety`, 0700), out of reach of the confined
children (they write only beneath the work root): with that state a warm-up costs ~0.6 s instead of
~1.5 s. A state that does not fit (another dbt) is parsed in full and replaced; concurrent servers each
parse in a folder of their own and replace the state whole."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from ..partial_parse import STATE_FILE, read_partial_parse


def cache_root() -> Path | None:
    """The user's cache folder of the warm-up projects (None: no home to keep it in)."""
    base = os.environ.get("XDG_CACHE_HOME") or (str(Path.home() / ".cache") if os.environ.get("HOME") else "")
    if not base or not os.path.isabs(base):
        return None
    root = Path(base) / "rerun_safety"
    from ..warehouse.base import default_work_root

    work = default_work_root()
    if root == work or work in root.parents or root in work.parents:
        return None  # the confined children may write there
    return root


def _project(adapter: str, output: dict, folder: Path) -> Path:
    """The one-model project of `adapter` in `folder` (written once, whole: a concurrent server may read it)."""
    files = {"dbt_project.yml": f"name: rerun_safety_warm_{adapter}\nversion: '1.0.0'\nprofile: warm\n"
                                # dbt's static parser (dbt-extractor) starts a native thread pool at
                                # first use: a child forked after it would hang in it
                                "config-version: 2\nflags:\n  static_parser: false\n",
             "models/m.sql": "select 1 as x\n",
             "profiles.yml": yaml.safe_dump({"warm": {"target": "w", "outputs": {"w": output}}})}
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:12]
    project = folder / f"warm_{adapter}_{digest}"  # another version's project is another folder
    if (project / "profiles.yml").is_file():
        return project
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    new = Path(tempfile.mkdtemp(prefix=f".warm_{adapter}_", dir=folder))
    (new / "models").mkdir()
    for name, text in files.items():
        (new / name).write_text(text)
    try:
        new.rename(project)
    except OSError:  # another server wrote it first
        shutil.rmtree(new, ignore_errors=True)
    return project


def _warm(adapter: str, output: dict, root: Path, cache: Path | None) -> None:
    from ..project import Project

    project = _project(adapter, output, cache or root)
    work = root / f"work_{adapter}"
    Project(project, str(project), None, None, work)  # starts from project/target's state, if any
    state = read_partial_parse(work / "dbt_target")
    kept = project / "target" / STATE_FILE
    if cache is not None and state is not None and read_partial_parse(kept.parent) != state:
        kept.parent.mkdir(exist_ok=True)
        part = kept.with_name(f".{STATE_FILE}.{os.getpid()}")
        part.write_bytes(state)
        os.replace(part, kept)


def warm_up() -> list[str]:
    """Parse the one-model project on each installed adapter; the adapters warmed."""
    warmed: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="rerun_safety_warm_"))
    try:
        cache = cache_root()
    except Exception:  # noqa: BLE001 - no home: warm up without the cache
        cache = None
    try:
        from ..warehouse.dialects import dialect_for, engines

        for adapter in engines():
            output = dialect_for(adapter).warm_output()
            if output is None:
                continue
            try:
                __import__(f"dbt.adapters.{adapter}")
                try:
                    _warm(adapter, output, root, cache)
                except Exception:  # noqa: BLE001 - an unwritable or damaged cache: without it
                    if cache is None:
                        raise
                    _warm(adapter, output, root / "again", None)
                warmed.append(adapter)
            except Exception:  # noqa: BLE001 - not installed, or dbt changed: the children warm up themselves
                continue
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return warmed


WARMED: list[str] = []
try:  # an exception here would stop the child before its job (its preload skips any error, but not twice)
    WARMED = warm_up()
except Exception:  # noqa: BLE001
    pass
