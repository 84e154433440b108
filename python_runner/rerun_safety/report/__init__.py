"""Reports of a game day: one renderer per format behind one interface (`base.Renderer`).

`write_reports` writes report.json, junit.xml, report.md and report.html into an output
directory; the terminal summary lives in `report.terminal`.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..results import GamedayReport
from .base import Renderer
from .html import HtmlRenderer
from .json_report import JsonRenderer
from .junit import JunitRenderer
from .markdown import MarkdownRenderer

RENDERERS: tuple[Renderer, ...] = (JsonRenderer(), JunitRenderer(), MarkdownRenderer(), HtmlRenderer())

__all__ = ["RENDERERS", "Renderer", "write_reports"]


def write_reports(report: GamedayReport, output_dir: Path | str, project_dir: Path | str | None = None
                  ) -> dict[str, Path]:
    """Render every format and write it into output_dir (created if missing).

    Returns {"json": ..., "junit": ..., "markdown": ..., "html": ...}. Each file is written to a new
    temporary name and renamed, so a reader (a CI upload step) never sees half a report. Folders the
    project ships (the default <project>/target/rerun_safety, and fixes/ in any output folder) are
    never followed through a link: a link there is refused (safe_files).
    """
    from ..safe_files import open_dir, write_file

    out = Path(output_dir)
    texts = {r.key: (r.filename, r.render(report)) for r in RENDERERS}
    default = Path(project_dir) / "target" / "rerun_safety" if project_dir is not None else None
    what = "the output directory"
    folder = (open_dir(Path(project_dir), ("target", "rerun_safety"), what=what) if out == default
              else open_dir(out, what=what))
    paths: dict[str, Path] = {}
    try:
        for key, (filename, text) in texts.items():
            write_file(folder, filename, text, str(out / filename))
            paths[key] = out / filename
        verified = [fix for fix in report.fixes or () if fix.verified]
        if not verified and not _has_folder(folder, "fixes"):
            return paths
        fixes = open_dir(folder, ("fixes",))
        try:
            for name in os.listdir(fixes):  # an earlier run's: never beside this run's
                if name.endswith(".patch"):
                    os.unlink(name, dir_fd=fixes)
            for fix in verified:
                write_file(fixes, f"{fix.model}.patch", fix.patch, str(out / "fixes" / f"{fix.model}.patch"))
                paths[f"fix:{fix.model}"] = out / "fixes" / f"{fix.model}.patch"
        finally:
            os.close(fixes)
    finally:
        os.close(folder)
    return paths


def _has_folder(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
