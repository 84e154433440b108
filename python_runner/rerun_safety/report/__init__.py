"""Reports of a game day: one renderer per format behind one interface (`base.Renderer`).

`write_reports` writes report.json, junit.xml, report.md and report.html into an output
directory; the terminal summary lives in `report.terminal`.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..results import GamedayReport
from .base import Renderer
from .html import HtmlRenderer
from .json_report import JsonRenderer
from .junit import JunitRenderer
from .markdown import MarkdownRenderer

RENDERERS: tuple[Renderer, ...] = (JsonRenderer(), JunitRenderer(), MarkdownRenderer(), HtmlRenderer())

__all__ = ["RENDERERS", "Renderer", "write_reports"]


def write_reports(report: GamedayReport, output_dir: Path | str) -> dict[str, Path]:
    """Render every format and write it into output_dir (created if missing).

    Returns {"json": ..., "junit": ..., "markdown": ..., "html": ...}. Each file is written to a
    temporary name and renamed, so a reader (a CI upload step) never sees half a report.
    """
    out = Path(output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create the output directory {out}: {err.strerror or err}") from err
    texts = {r.key: (r.filename, r.render(report)) for r in RENDERERS}
    paths: dict[str, Path] = {}
    for key, (filename, text) in texts.items():
        paths[key] = _write(out, filename, text)
    for stale in (out / "fixes").glob("*.patch"):  # an earlier run's: never beside this run's
        stale.unlink(missing_ok=True)
    for fix in report.fixes or ():
        if fix.verified:
            paths[f"fix:{fix.model}"] = _write(out / "fixes", f"{fix.model}.patch", fix.patch)
    return paths


def _write(folder: Path, filename: str, text: str) -> Path:
    path = folder / filename
    tmp = folder / f".{filename}.{os.getpid()}.tmp"
    try:
        folder.mkdir(exist_ok=True)
        tmp.write_text(text, encoding="utf-8", newline="\n")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {path}: {err.strerror or err}") from err
    return path
