"""dbt's partial-parse state from the user's last run, copied (never used in place: dbt writes it back)
into the folder of our own dbt invocations, so that only what changed since is parsed again; dbt
checks that it fits (its version, vars, profile, target) and parses in full when it does not."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

STATE_FILE = "partial_parse.msgpack"


def copy_partial_parse(project_dir: Path, target_dir: Path) -> None:
    """Copy <project>/<target-path>/partial_parse.msgpack (DBT_TARGET_PATH, the project's
    `target-path`, or target/) into `target_dir`; nothing when there is none or it cannot be read."""
    target = os.environ.get("DBT_TARGET_PATH")
    if not target:
        try:
            doc = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            return
        target = (doc.get("target-path") if isinstance(doc, dict) else None) or "target"
    found = project_dir / str(target) / STATE_FILE
    if not found.is_file():
        return
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, target_dir / STATE_FILE)
    except OSError:
        return  # unreadable: dbt parses in full
