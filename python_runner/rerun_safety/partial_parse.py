"""dbt's partial-parse state from the user's last run, copied (never used in place: dbt writes it back)
into the folder of our own dbt invocations, so that only what changed since is parsed again; dbt
checks that it fits (its version, vars, profile, target) and parses in full when it does not."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

STATE_FILE = "partial_parse.msgpack"


def _target_path(project_dir: Path) -> Path | None:
    """<project>/<target-path>: DBT_TARGET_PATH, the project's `target-path`, or target/."""
    target = os.environ.get("DBT_TARGET_PATH")
    if not target:
        try:
            doc = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            return None
        target = (doc.get("target-path") if isinstance(doc, dict) else None) or "target"
    return project_dir / str(target)


def read_partial_parse(target_dir: Path) -> bytes | None:
    """The partial-parse state a parse left in `target_dir` (None: none)."""
    try:
        return (target_dir / STATE_FILE).read_bytes()
    except OSError:
        return None


def write_partial_parse(project_dir: Path, state: bytes) -> None:
    """Give a copy of a project the partial-parse state of the original's parse (dbt accepts it in
    another folder and checks that it fits, as for the user's own), so its parse reads only what changed."""
    target = _target_path(project_dir)
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        (target / STATE_FILE).write_bytes(state)


def copy_partial_parse(project_dir: Path, target_dir: Path) -> None:
    """Copy <project>/<target-path>/partial_parse.msgpack (DBT_TARGET_PATH, the project's
    `target-path`, or target/) into `target_dir`; nothing when there is none or it cannot be read."""
    target = _target_path(project_dir)
    if target is None:
        return
    found = target / STATE_FILE
    if not found.is_file():
        return
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, target_dir / STATE_FILE)
    except OSError:
        return  # unreadable: dbt parses in full
