"""The renderer interface and the few formatting helpers the renderers share.

Renderers turn a finished `GamedayReport` into text. They only format: every number, verdict,
root cause and contamination they show comes from the report as the game day decided it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from ..results import GamedayReport, ModelVerdict, ScenarioResult, Verdict


class Renderer(ABC):
    """One output format. `render` is pure: the same report always gives the same text."""

    #: Key in the dict `write_reports` returns.
    key: ClassVar[str]
    #: File name inside the output directory.
    filename: ClassVar[str]

    @abstractmethod
    def render(self, report: GamedayReport) -> str:
        """The whole file's text."""


def units(s: ScenarioResult, keyed: bool) -> list[tuple[int, str]]:
    """A scenario's difference as a user counts it, every count shown once: with a key, keys missing,
    keys extra, keys duplicated and rows changed (a changed key is one changed row, not also a missing
    and an extra one); without, rows missing and extra beside the rows changed. Zeros included, in
    this order."""
    changed = s.changed_rows
    if keyed and s.verdict != Verdict.SIDE_EFFECT:  # a side effect counts the rows of the relation its hook writes
        return [(s.missing_keys, "keys missing"), (s.extra_keys, "keys extra"), (s.duplicate_keys, "keys duplicated"),
                (changed, "rows changed")]
    return [(max(s.missing_rows - changed, 0), "rows missing"), (max(s.extra_rows - changed, 0), "rows extra"),
            (s.duplicate_keys, "keys duplicated"), (changed, "rows changed")]


def counted(n: int, label: str) -> str:
    """'1,204 rows missing', '1 row missing'."""
    return f"{n:,} {label.replace('rows ', 'row ', 1).replace('keys ', 'key ', 1) if n == 1 else label}"


def changed_columns(s: ScenarioResult, limit: int = 6) -> str:
    """' (status, assignee)': the columns the changed rows differ in, or ''."""
    if not (s.changed_rows and s.differing_columns):
        return ""
    cols = list(s.differing_columns)
    shown = ", ".join(cols[:limit]) + (f" and {len(cols) - limit} more" if len(cols) > limit else "")
    return f" ({shown})"


def numbers(s: ScenarioResult, keyed: bool = False) -> str:
    """The key numbers of a scenario in one line, as every format shows them."""
    parts = [counted(n, label) for n, label in units(s, keyed) if n]
    if parts and s.changed_rows:
        parts[-1] += changed_columns(s)
    return f"{', '.join(parts) or 'no row difference'} (reference {s.reference_rows:,} rows, scenario {s.rows:,} rows)"


OVERLAP_ONLY = ", only when two runs overlap"


def cause(model: ModelVerdict) -> str:
    """'root cause', 'contaminated by a, b', the skip or untested reason, or ''; and the columns that
    are nondeterministic beside a data defect ('; also nondeterministic: a, b')."""
    text = ""
    if model.root_cause:
        text = "root cause" + OVERLAP_ONLY * model.overlap_only
    elif model.contaminated_by:
        text = "contaminated by " + ", ".join(model.contaminated_by) + OVERLAP_ONLY * model.overlap_only
    elif model.inconclusive:
        text = "attribution inconclusive: " + model.inconclusive
    elif model.verdict in (Verdict.SKIPPED, Verdict.UNTESTED) and model.reason:
        text = model.reason
    if model.nondeterministic_columns and model.verdict != Verdict.NONDETERMINISTIC:
        also = "also nondeterministic: " + ", ".join(model.nondeterministic_columns)
        text = f"{text}; {also}" if text else also
    return text


def errors(models) -> list[tuple[ModelVerdict, tuple[str, ...], str]]:
    """(model, scenario names, dbt's whole message) for every model that errored, in the given
    order: one entry per distinct message (several scenarios often fail alike), or the model's
    reason when no scenario carries a message."""
    out: list[tuple[ModelVerdict, tuple[str, ...], str]] = []
    for m in models:
        if m.verdict != Verdict.ERROR:
            continue
        by_message: dict[str, list[str]] = {}
        for s in m.scenarios:
            if s.verdict == Verdict.ERROR and s.message:
                by_message.setdefault(s.message, []).append(s.name)
        if not by_message and m.reason:
            by_message[m.reason] = []
        out.extend((m, tuple(names), message) for message, names in by_message.items())
    return out


def baseline_lines(report: GamedayReport) -> list[str]:
    """With --baseline (main's last report): what this run changed, worst first. Empty without one."""
    if report.baseline is None:
        return []
    worse = report.worse_than_baseline
    before = [m for m in report.unsafe if m not in worse]
    fixed = report.fixed_since_baseline

    def was(m) -> str:
        old = report.baseline.get(m.name)
        return f"{m.name} ({m.verdict}; " + (f"was {old})" if old else "not in the baseline)")

    lines = [f"{len(worse)} model(s) worse than in the baseline" + (": " + ", ".join(map(was, worse)) if worse else "")]
    if fixed:
        lines.append(f"{len(fixed)} fixed: " + ", ".join(f"{m.name} (was {report.baseline[m.name]})" for m in fixed))
    if before:
        lines.append(f"{len(before)} unsafe as in the baseline: " + ", ".join(m.name for m in before))
    return lines


def headline(report: GamedayReport) -> str:
    """One line: how many models are unsafe and which are the root causes."""
    n = len(report.models)
    unsafe = report.unsafe
    if not unsafe:
        # untested models were never exercised: they are not counted as safe
        others = [(sum(1 for m in report.models if m.verdict == v), v) for v in (Verdict.UNTESTED, Verdict.SKIPPED)]
        tail = ", ".join(f"{k} {v}" for k, v in others if k)
        judged = n - sum(k for k, _ in others)
        return f"All {judged} judged models are safe to run twice{f' ({tail})' if tail else ''}."
    # a model dbt could not run in a scenario was not judged: counted apart from the unsafe ones
    errors = [m for m in unsafe if m.verdict == Verdict.ERROR]
    judged = [m for m in unsafe if m.verdict != Verdict.ERROR]
    roots = [m for m in report.root_causes if m.verdict != Verdict.ERROR]
    parts = []
    if judged:
        text = f"{len(judged)} of {n} models are unsafe"
        if roots:
            text += "; root cause" + ("s" if len(roots) > 1 else "") + ": " + ", ".join(
                f"{m.name} ({m.verdict})" for m in roots)
        parts.append(text)
    if errors:
        parts.append(f"{len(errors)}{'' if judged else f' of {n}'} model{'s' if len(errors) > 1 else ''} could not "
                     f"be judged, dbt failed on {'them' if len(errors) > 1 else 'it'} (error): "
                     + ", ".join(m.name for m in errors))
    untested = sum(1 for m in report.models if m.verdict == Verdict.UNTESTED)
    if untested:
        parts.append(f"{untested} untested")
    return "; ".join(parts) + "."


def sample_columns(sample) -> list[str]:
    """Columns of sample rows, in order of first appearance, the shortest rows first: a changed key
    of a wide keyed model is sampled as its key and the columns that differ, and those lead."""
    cols: dict[str, None] = {}
    for row in sorted(sample, key=len):
        for k in row:
            cols.setdefault(str(k), None)
    return list(cols)


def sample_cell(row: dict, column: str, limit: int = 80) -> str:
    """A sample row's value as short display text; empty where the row lacks the column (a changed
    key of a wide keyed model is sampled as its key and the columns that differ)."""
    return cell(row[column], limit) if column in row else ""


def cell(value, limit: int = 80) -> str:
    """A sample value as short display text (NULL for None)."""
    if value is None:
        return "NULL"
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
