"""Text rendering of a `LintResult`: findings grouped by model, ANSI colour only when asked."""
from __future__ import annotations

from ..errors import printable
from .findings import LintResult

_COLORS = {"error": "31", "warning": "33", "info": "36", "model": "1", "dim": "2", "ok": "32"}


def _paint(text: str, style: str, color: bool) -> str:
    return f"\033[{_COLORS[style]}m{text}\033[0m" if color else text


def render_text(result: LintResult, color: bool = False) -> str:
    lines: list[str] = []
    by_model: dict[str, list] = {}
    for f in result.findings:
        by_model.setdefault(f.model, []).append(f)
    for model, findings in by_model.items():
        path = printable(findings[0].path or "")
        lines.append(_paint(printable(model), "model", color) + (f"  {_paint(path, 'dim', color)}" if path else ""))
        for f in findings:
            sev = _paint(f"{f.severity:<7}", f.severity if f.severity in _COLORS else "dim", color)
            known = "  (in --baseline)" if f.new is False else ""
            lines.append(f"  {sev} {f.rule}  {printable(f.message)}{known}")
            if f.hint and f.severity != "info":
                lines.append(_paint(f"          fix: {printable(f.hint)}", "dim", color))
        lines.append("")
    c = result.counts()
    def n(count: int, word: str) -> str:
        return f"{count} {word}{'' if count == 1 else 's'}"

    summary = (f"{n(c['models'], 'model')} linted: {n(c['errors'], 'error')}, {n(c['warnings'], 'warning')}"
               f", {c['suppressed']} suppressed")
    if c.get("info"):
        summary += f", {c['info']} info"
    if c.get("skipped"):
        summary += f", {c['skipped']} skipped"
    if result.incremental_mode:
        summary += f" (incremental branches: {result.incremental_mode})"
    for note in result.notes:
        lines.append(_paint(f"note: {printable(note)}", "dim", color))
    if result.confinement:  # above the summary, which stays the last line
        lines.append(_paint(f"note: {printable(result.confinement)}", "dim", color))
    lines.append(_paint(summary, "error" if c["errors"] else ("warning" if c["warnings"] else "ok"), color))
    return "\n".join(lines)

