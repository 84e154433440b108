"""report.md: a pull-request comment. Headline, root causes, contaminated models, a compact table
of all models, dbt's whole error message for each model that errored (in a code block, line
breaks kept), then a few sample rows per unsafe model.

Every string that comes from the user's project or data is escaped, so a `|` in a model name or
a value cannot break a table and `<tag>` cannot become HTML.
"""
from __future__ import annotations

import re

from ..results import UNSAFE, GamedayReport, ModelVerdict, ScenarioResult, sort_worst_first, Verdict
from ..errors import printable
from .base import Renderer, baseline_lines, cause, changed_columns, counted, errors, headline, sample_cell, sample_columns, units

# GitHub rejects comments over 65,536 characters; samples are dropped first to stay under.
MAX_CHARS = 60_000
SAMPLE_ROWS = 5
SAMPLE_COLUMNS = 8

_SPECIAL = re.compile(r"([\\`*_\[\]|~])")



def md(text) -> str:
    """Escape text for GitHub markdown, inline and in table cells."""
    text = printable(str(text).replace("\r", " ").replace("\n", " "))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", text)


def _verdict(v: str) -> str:
    return f"**{md(v)}**" if v in UNSAFE else md(v)


def _worst_line(model: ModelVerdict) -> str:
    s = model.worst_scenario
    if s is None:
        return ""
    if s.verdict == Verdict.ERROR:
        return f"in `{md_code(s.name)}`: dbt failed" + (" (message under Errors)" if s.message else "")
    bits = [counted(n, label) for n, label in units(s, bool(model.key)) if n]
    if bits and s.changed_rows:
        bits[-1] += md(changed_columns(s))
    text = f"in `{md_code(s.name)}`: " + (", ".join(bits) if bits else "no row difference")
    text += f" (reference {s.reference_rows}, scenario {s.rows})"
    diff = s.differing_partitions
    if diff:
        shown = ", ".join(f"{md(p.partition)}: {p.reference_rows} → {p.rows}" for p in diff[:3])
        more = f" and {len(diff) - 3} more" if len(diff) > 3 else ""
        text += f"; partitions {shown}{more}"
    if s.volatile_columns:
        text += "; volatile columns: " + ", ".join(md(c) for c in s.volatile_columns)
    return text


def md_code(text) -> str:
    """Text for inside a code span: no backticks or newlines to break out of it."""
    return printable(str(text).replace("`", "'").replace("\r", " ").replace("\n", " "))


def fenced(text: str, info: str = "text") -> list[str]:
    """A fenced code block holding text exactly: the fence is longer than any backtick run in it."""
    text = printable(text)
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence + info, *text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), fence]


def _errors(models: list[ModelVerdict]) -> list[str]:
    """dbt's whole message for every errored scenario (one block per distinct message)."""
    out: list[str] = []
    for m, scenarios, message in errors(models):
        where = " in " + ", ".join(f"`{md_code(n)}`" for n in scenarios) if scenarios else ""
        out += [f"**{md(m.name)}**{where}:", ""] + fenced(message) + [""]
    return ["#### Errors", ""] + out if out else []


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _sample(model: ModelVerdict, s: ScenarioResult) -> list[str]:
    cols = sample_columns(s.sample)
    shown = cols[:SAMPLE_COLUMNS]
    rows = [[md(sample_cell(r, c, 40)) for c in shown] for r in s.sample[:SAMPLE_ROWS]]
    out = [f"**{md(model.name)}** · `{md_code(s.name)}` · {md(s.verdict)}", ""]
    out += _table([md(c) for c in shown], rows)
    notes = []
    if len(s.sample) > SAMPLE_ROWS:
        notes.append(f"{SAMPLE_ROWS} of {len(s.sample)} sample rows")
    if len(cols) > SAMPLE_COLUMNS:
        notes.append(f"{SAMPLE_COLUMNS} of {len(cols)} columns")
    if notes:
        out += ["", "_" + "; ".join(notes) + "; see report.html_"]
    return out + [""]


def _fixes(report: GamedayReport) -> list[str]:
    """--fix: each root cause's verified fix as a diff block, or why none was verified."""
    if not report.fixes:
        return []
    out = ["#### Fixes", ""]
    for f in report.fixes:
        if f.verified:
            out += [f"- **{md(f.model)}** ({md(f.verdict)}): {md(f.description)}. Verified: "
                    f"{', '.join(md(n) for n in f.models)} safe in every scenario that exercised them, clean build unchanged "
                    f"(`fixes/{md_code(f.model)}.patch`, `{md_code(f.path)}`)"
                    + (f". Note: {md(f.note)}" if f.note else ""), ""]
            out += ["  " + line for line in fenced(f.patch.rstrip("\n"), "diff")] + [""]
        else:
            out.append(f"- **{md(f.model)}** ({md(f.verdict)}): no fix verified"
                       + (f"; {md(f.why_none)}" if f.why_none else ""))
        out += [f"  - tried {md(t.candidate)}: {md(t.why)}" for t in f.tried]
    return out + [""]


WHERE_ROWS = 31  # differing partitions listed per model (a month of days)


class MarkdownRenderer(Renderer):
    key = "markdown"
    filename = "report.md"

    def render(self, report: GamedayReport) -> str:
        head, where, samples = self._main(report), self._where(report), self._samples(report)
        text = "\n".join(head + where + samples)
        if len(text) > MAX_CHARS:
            text = "\n".join(head + where + ["_Sample rows omitted to fit a comment; see report.html._", ""])
        if len(text) > MAX_CHARS:
            text = "\n".join(head + ["_Sample rows omitted to fit a comment; see report.html._", ""])
        if len(text) > MAX_CHARS:
            text = "\n".join(self._main(report, unsafe_only=True)
                             + ["_Sample rows omitted to fit a comment; see report.html._", ""])
        return text.rstrip("\n") + "\n"

    def _main(self, report: GamedayReport, unsafe_only: bool = False) -> list[str]:
        icon = "❌" if report.worse_than_baseline else "✅"
        out = [f"### {icon} rerun-safety game day: {md(headline(report))}", ""]
        changed = baseline_lines(report)
        if changed:  # a pull request: what it changed comes first
            out += ["#### Compared with the baseline", ""] + [f"- {md(line)}" for line in changed] + [""]
        out.append(f"Project `{md_code(report.project)}` on {md(report.adapter)} "
                   f"(target `{md_code(report.target)}`), scenarios "
                   f"{', '.join(f'`{md_code(s)}`' for s in report.scenarios)}, {report.steps} "
                   f"{md(report.batch_size)} batches.")
        out.append("")
        if report.notes:
            out += [f"- {md(n)}" for n in report.notes] + [""]
        models = sort_worst_first(report.models)
        # With a baseline (a pull request against main's last report), the sections and the table
        # show what this run changed; the models as they were in the baseline are folded away.
        same = [m for m in models if m in report.same_as_baseline]
        models = [m for m in models if m not in same]
        out += self._sections(models) + _fixes(report)
        listed = [m for m in models if m.verdict in UNSAFE] if unsafe_only else models
        title = "#### Unsafe models" if unsafe_only else "#### All models"
        if report.baseline is not None:
            title = "#### Changed since the baseline"
        out += [title, ""] + self._table(listed) + [""]
        if len(listed) < len(models):
            out += [f"_{len(models) - len(listed)} safe or skipped models not listed; see report.json._", ""]
        if same and not unsafe_only:
            out += [f"<details><summary>{len(same)} model(s) as in the baseline</summary>", ""]
            out += self._table(same) + ["", "</details>", ""]
        elif same:
            out += [f"_{len(same)} model(s) as in the baseline not listed; see report.json._", ""]
        return out

    @staticmethod
    def _sections(models: list[ModelVerdict]) -> list[str]:
        out: list[str] = []
        roots = [m for m in models if m.root_cause]
        if roots:
            out += ["#### Root causes", ""]
            for m in roots:
                fanout = [x.name for x in models if m.name in x.contaminated_by or m.unique_id in x.contaminated_by]
                line = f"- **{md(m.name)}**: {_verdict(m.verdict)} {_worst_line(m)}"
                if fanout:
                    line += ". Contaminates " + ", ".join(md(n) for n in fanout)
                out.append(line)
                out += [f"  - {md(n)}" for n in m.notes]
            out.append("")
        contaminated = [m for m in models if m.contaminated_by and not m.root_cause]
        if contaminated:
            out += ["#### Contaminated downstream", ""]
            for m in contaminated:
                out.append(f"- **{md(m.name)}**: {_verdict(m.verdict)}, contaminated by "
                           + ", ".join(f"**{md(c)}**" for c in m.contaminated_by))
            out.append("")
        others = [m for m in models if m.verdict in UNSAFE
                  and not m.root_cause and not m.contaminated_by]
        if others:
            out += ["#### Other unsafe models", ""]
            out += [f"- **{md(m.name)}**: {_verdict(m.verdict)} {_worst_line(m)}"
                    + (f" (attribution inconclusive: {md(m.inconclusive)})" if m.inconclusive else "") for m in others]
            out.append("")
        return out + _errors(models)

    @staticmethod
    def _table(models: list[ModelVerdict]) -> list[str]:
        rows = []
        for m in models:
            s = m.worst_scenario
            nums = [f"{n:,}" + ((" key" if n == 1 else " keys") if n and label.startswith("keys") and i < 2 else "")
                    for i, (n, label) in enumerate(units(s, bool(m.key)))] if s else ["", "", "", ""]
            rows.append([md(m.name), _verdict(m.verdict), md(cause(m)),
                         md(s.name) if s else ""] + nums)
        return _table(["Model", "Verdict", "Cause", "Worst scenario", "Missing", "Extra",
                       "Dup keys", "Changed rows"], rows)

    @staticmethod
    def _where(report: GamedayReport) -> list[str]:
        """Where each unsafe model's worst scenario differs, partition by partition (a day, by the model's
        time column): one folded table per model (root causes first), the first 31 differing partitions."""
        out: list[str] = []
        for m in sort_worst_first(report.unsafe):
            s = m.worst_scenario
            if m in report.same_as_baseline or s is None or not s.differing_partitions:
                continue
            diff = s.differing_partitions
            rows = [[md(p.partition), f"{p.reference_rows:,}", f"{p.rows:,}", f"{p.rows - p.reference_rows:+,}"]
                    for p in diff[:WHERE_ROWS]]
            out += [f"**{md(m.name)}** in `{md_code(s.name)}`, by {md(s.partition_column or 'partition')}:", ""]
            out += _table([md(s.partition_column or "partition"), "Reference", "Scenario", "Difference"], rows)
            if len(diff) > WHERE_ROWS:
                out.append(f"_and {len(diff) - WHERE_ROWS} more; see report.html._")
            out.append("")
        if out:
            out = ["<details><summary>Where: rows per partition</summary>", ""] + out + ["</details>", ""]
        return out

    def _samples(self, report: GamedayReport) -> list[str]:
        out: list[str] = []
        for m in sort_worst_first(report.unsafe):
            if m in report.same_as_baseline:
                continue  # as in the baseline: folded away with its table row
            s = next((x for x in sorted(m.scenarios, key=lambda x: x is not m.worst_scenario)
                      if x.sample), None)
            if s is not None:
                out += _sample(m, s)
        if out:
            out = ["<details><summary>Sample rows</summary>", ""] + out + ["</details>", ""]
        return out
