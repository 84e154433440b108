"""The terminal: a progress bar while the game day runs (stderr) and a summary at the end (stdout).

On a terminal the progress is a rich progress bar; when stderr is not a TTY (CI logs, pipes) it
prints one plain line per scenario instead of redrawing. Colour follows rich, which honours
NO_COLOR (and FORCE_COLOR / TERM=dumb).

The summary on a terminal fits the window (long cells fold). When stdout is not a terminal (a CI
log, a pipe, a file; also with FORCE_COLOR) nothing is folded or cropped: every model is one line with its whole name,
verdict and cause, the table as wide as it needs, and dbt's error messages are printed whole with
their own line breaks, so a log can be grepped for a model name.
"""
from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..errors import printable
from ..results import GamedayReport, sort_worst_first, Verdict
from .base import cause, changed_columns, counted, errors, headline, units

VERDICT_STYLE = {Verdict.ERROR: "bold magenta", Verdict.NONDETERMINISTIC: "bold yellow", Verdict.LOSS: "bold red",
                 Verdict.DUPLICATES: "bold red", Verdict.DRIFT: "yellow", Verdict.SIDE_EFFECT: "magenta", Verdict.UNTESTED: "cyan", Verdict.SAFE: "green", Verdict.SKIPPED: "dim"}


class TerminalProgress:
    """Progress of a game day. The game day calls start(total, description) once, scenario(name)
    when a scenario starts and advance(description) after each unit of work (a dbt invocation).
    Every method is safe to call in any order, also outside the `with` block."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._task = None
        self._scenario = ""
        self._entered = False

    @property
    def interactive(self) -> bool:
        return self.console.is_terminal and not self.console.is_dumb_terminal

    def __enter__(self) -> TerminalProgress:
        self._entered = True
        if self.interactive:
            self._progress = Progress(
                SpinnerColumn(), TextColumn("[bold]{task.fields[scenario]}"),
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), console=self.console, transient=False)
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._progress = None
        self._entered = False

    def start(self, total_steps: int, description: str) -> None:
        if self._progress is not None:
            if self._task is None:
                self._task = self._progress.add_task(description, total=total_steps, scenario="")
            else:
                self._progress.update(self._task, total=total_steps, description=description)
        else:
            self._plain(f"{description} ({total_steps} steps)")

    def scenario(self, name: str) -> None:
        self._scenario = name
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, scenario=name)
        elif self._progress is None:
            self._plain(f"scenario {name}")

    def advance(self, description: str = "") -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, description=description)

    def _plain(self, line: str) -> None:
        if self._entered:
            self.console.print(Text(printable(f"rerun-safety: {line}")), highlight=False, soft_wrap=True)


def difference(s, keyed: bool = False) -> Text:
    """The worst scenario and its numbers that are not zero: 'rerun: 200 keys duplicated'."""
    if s is None:
        return Text("")
    parts = [counted(n, label) for n, label in units(s, keyed) if n]
    if parts and s.changed_rows:
        parts[-1] += changed_columns(s, 3)
    text = Text(printable(f"{s.name}: "))
    if parts:
        text.append(", ".join(parts), style="bold red")
    else:
        text.append({Verdict.ERROR: "failed", Verdict.UNTESTED: "not exercised"}.get(s.verdict, "no difference"), style="dim")
    return text


def summary_table(report: GamedayReport, fold: bool = True) -> Table:
    """Models worst first, with the numbers of each model's worst scenario.

    fold=True lets long cells wrap inside their column (a terminal window); fold=False keeps every
    cell on one line, whatever the width (a CI log)."""
    table = Table(title="rerun-safety game day", title_justify="left", header_style="bold",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    if fold:
        longest = max((len(m.name) for m in report.models), default=5)
        table.add_column("model", overflow="fold", min_width=min(longest, 20))
        table.add_column("verdict", no_wrap=True)
        table.add_column("cause", overflow="fold", min_width=10)
        table.add_column("worst scenario: rows vs reference", overflow="fold", min_width=14)
    else:
        for header in ("model", "verdict", "cause", "worst scenario: rows vs reference"):
            table.add_column(header, no_wrap=True, overflow="ignore")
    for m in sort_worst_first(report.models):
        why = Text(printable(cause(m)), style="bold red" if m.root_cause else "yellow" if m.contaminated_by else "dim")
        table.add_row(Text(printable(m.name)), Text(m.verdict, style=VERDICT_STYLE.get(m.verdict, "")), why,
                      difference(m.worst_scenario, bool(m.key)))
    return table


def _print_wide(console: Console, renderable) -> None:
    """Print at the renderable's natural width, even if that is wider than the console."""
    need = Measurement.get(console, console.options.update(max_width=100_000), renderable).maximum
    saved = console.width
    console.width = max(saved, need)
    try:
        console.print(renderable, crop=False)
    finally:
        console.width = saved


def _on_a_tty(console: Console) -> bool:
    """True when the console writes to a real terminal window. FORCE_COLOR makes rich call a pipe a
    terminal (for colour); the layout asks the file itself."""
    try:
        return console.is_terminal and console.file.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def fix_lines(report: GamedayReport, paths: dict[str, Path]) -> list[tuple[str, str]]:
    """--fix: per root cause, its verified fix and patch, or why none was verified."""
    if report.fixes is None:
        return []
    if not report.fixes:
        return [("Fixes: no root cause to fix", "bold")]
    verified = [f for f in report.fixes if f.verified]
    out = [(f"Fixes: {len(verified)} of {len(report.fixes)} root causes have a verified fix", "bold")]
    for f in report.fixes:
        if f.verified:
            patch = paths.get(f"fix:{f.model}")
            out.append((f"  {f.model} ({f.verdict}): {f.description}; verified: {', '.join(f.models)} safe in "
                        f"every scenario that exercised them, clean build unchanged" + (f"; patch: {patch}" if patch else "")
                        + (f"; note: {f.note}" if f.note else ""), "green"))
        else:
            out.append((f"  {f.model} ({f.verdict}): no fix verified" + (f"; {f.why_none}" if f.why_none else ""),
                        "yellow"))
        for t in f.tried:
            out.append((f"    tried {t.candidate}: {t.why}", "dim"))
    return out


def print_summary(report: GamedayReport, paths: dict[str, Path], console: Console | None = None) -> None:
    """The verdicts worst first, the key numbers, dbt's error messages, and where the reports are."""
    console = console or Console()
    log = not _on_a_tty(console)  # a CI log or a pipe, even with FORCE_COLOR: never fold or crop
    confinement = report.extra.get("confinement")
    if confinement and not confinement.get("confined") and report.notes:  # before anything else
        console.print(Text(printable(report.notes[0]), style="bold yellow"), soft_wrap=log)
    if log:
        _print_wide(console, summary_table(report, fold=False))
    else:
        console.print(summary_table(report))
    style = "bold red" if report.unsafe else "bold green"
    console.print(Text(printable(headline(report)), style=style), soft_wrap=log)
    for note in report.notes:
        console.print(Text(printable(f"  note: {note}", keep_newlines=False), style="dim"), soft_wrap=log)
    for m, scenarios, message in errors(sort_worst_first(report.models)):
        label = printable(f"{m.name} [{', '.join(scenarios)}]" if scenarios else m.name)
        lines = printable(message).splitlines() or [""]
        text = Text(f"  {label}: {lines[0]}", style="magenta")
        for line in lines[1:]:
            text.append(f"\n    {line}")
        console.print(text, soft_wrap=log)
    for line, style in fix_lines(report, paths):
        console.print(Text(printable(line), style=style), soft_wrap=log)
    if report.cost is not None:
        console.print(Text(report.cost.line(), style="dim"), soft_wrap=log)
    if paths:
        console.print(Text("Reports:", style="bold"))
        for key, path in [(k, p) for k, p in paths.items() if not k.startswith("fix:")]:
            console.print(Text(printable(f"  {key:<9} {path}")), soft_wrap=True)
