"""The terminal: a progress bar while the game day runs (stderr) and a summary at the end (stdout).

On a terminal the progress is a rich progress bar; when stderr is not a TTY (CI logs, pipes) it
prints one plain line per scenario instead of redrawing. Colour follows rich, which honours
NO_COLOR (and FORCE_COLOR / TERM=dumb).
"""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..results import UNSAFE, GamedayReport, sort_worst_first
from .base import cause, headline

VERDICT_STYLE = {"error": "bold magenta", "nondeterministic": "bold yellow", "loss": "bold red",
                 "duplicates": "bold red", "drift": "yellow", "safe": "green", "skipped": "dim"}


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
            self.console.print(Text(f"rerun-safety: {line}"), highlight=False, soft_wrap=True)


def _num(v: int) -> Text:
    return Text(f"{v:,}", style="bold red" if v else "dim")


def summary_table(report: GamedayReport) -> Table:
    table = Table(title="rerun-safety game day", title_justify="left", header_style="bold",
                  show_lines=False)
    table.add_column("model", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("root cause / contaminated by")
    table.add_column("worst scenario", no_wrap=True)
    for label in ("extra rows", "missing rows", "dup keys", "changed"):
        table.add_column(label, justify="right")
    for m in sort_worst_first(report.models):
        s = m.worst_scenario
        why = Text(cause(m), style="bold red" if m.root_cause else "yellow" if m.contaminated_by else "dim")
        nums = [_num(v) for v in (s.extra_rows, s.missing_rows, s.duplicate_keys, s.changed_rows)] \
            if s else [Text("")] * 4
        table.add_row(Text(m.name), Text(m.verdict, style=VERDICT_STYLE.get(m.verdict, "")), why,
                      Text(s.name if s else ""), *nums)
    return table


def print_summary(report: GamedayReport, paths: dict[str, Path], console: Console | None = None) -> None:
    """The verdicts worst first, the key numbers, and where the reports are."""
    console = console or Console()
    console.print(summary_table(report))
    style = "bold red" if report.unsafe else "bold green"
    console.print(Text(headline(report), style=style))
    for m in report.unsafe:
        s = m.worst_scenario
        if s is not None and s.verdict == "error" and s.message:
            console.print(Text(f"  {m.name} [{s.name}]: {s.message}", style="magenta"))
    if paths:
        console.print(Text("Reports:", style="bold"))
        for key, path in paths.items():
            console.print(Text(f"  {key:<9} {path}"), soft_wrap=True)
