"""report.html: one self-contained page for the people who read a game day's result.

Verdict summary, the lineage with the root cause and the contaminated models highlighted, and per
model and scenario the rows per partition, reference vs scenario, so a doubled or missing day
stands out. Charts and the graph are inline SVG generated here: the file loads nothing (no
scripts, fonts or styles from the network) and opens from a CI artifact as it is.

Every string from the user's project or data goes through `html.escape`. Differing partitions
carry `class="partition partition-diff"` and `data-partition` / `data-reference` / `data-rows`
so that browser tests and readers' own tooling can find them in the DOM.
"""
from __future__ import annotations

import html
import math
import re
from importlib import resources

from .. import __version__
from ..results import (Verdict, UNSAFE, VERDICT_ORDER, GamedayReport, ModelVerdict, ScenarioResult,
                       sort_worst_first)
from .base import Renderer, baseline_lines, cause, headline, sample_cell, sample_columns, units


def e(value) -> str:
    """Escape any value for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def _css() -> str:
    return resources.files(__package__).joinpath("templates/report.css").read_text(encoding="utf-8")


def _vclass(verdict: str) -> str:
    """A CSS class for a verdict; unknown verdicts cannot inject class names."""
    return "verdict-" + (verdict if verdict in VERDICT_ORDER else "skipped")


def _badge(verdict: str) -> str:
    return f'<span class="badge {_vclass(verdict)}">{e(verdict)}</span>'


def _anchor(index: int, model: ModelVerdict) -> str:
    return f"m{index}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", model.name)[:60]


# --------------------------------------------------------------------------------------------
# Lineage: a layered left-to-right DAG (layer = longest path from a root).

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 190, 40, 70, 12, 12


def _short_ref(ref: str) -> str:
    """'source.shop.raw.orders' -> 'raw.orders', 'model.shop.x' -> 'x'."""
    parts = ref.split(".")
    if parts[0] == "source" and len(parts) >= 4:
        return ".".join(parts[-2:])
    if parts[0] in ("model", "seed", "snapshot") and len(parts) >= 3:
        return parts[-1]
    return ref


def _clip(text: str, n: int = 26) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def lineage_svg(models: tuple[ModelVerdict, ...]) -> str:
    by_ref: dict[str, str] = {}
    for m in models:
        by_ref[m.unique_id] = m.unique_id
        by_ref.setdefault(m.name, m.unique_id)
    model_by_id = {m.unique_id: m for m in models}
    nodes: dict[str, ModelVerdict | None] = dict(model_by_id)
    edges: list[tuple[str, str]] = []
    for m in models:
        for ref in m.parents:
            pid = by_ref.get(ref, ref)
            nodes.setdefault(pid, None)  # a source or a model outside the selection
            if (pid, m.unique_id) not in edges and pid != m.unique_id:
                edges.append((pid, m.unique_id))
    if not nodes:
        return '<p class="meta">No models.</p>'
    parents: dict[str, list[str]] = {n: [] for n in nodes}
    for p, c in edges:
        parents[c].append(p)

    layer: dict[str, int] = {}

    def depth(n: str, seen: frozenset = frozenset()) -> int:
        if n in layer:
            return layer[n]
        if n in seen:  # a cycle should not exist in dbt; never loop on one
            return 0
        d = max((depth(p, seen | {n}) + 1 for p in parents[n]), default=0)
        layer[n] = d
        return d

    for n in nodes:
        depth(n)
    columns: dict[int, list[str]] = {}
    for n in sorted(nodes, key=lambda n: (nodes[n] is not None, _label(n, nodes[n]))):
        columns.setdefault(layer[n], []).append(n)
    # One barycentre sweep: order each column by the mean position of its parents.
    pos: dict[str, float] = {}
    for col in sorted(columns):
        if col > 0:
            columns[col].sort(key=lambda n: (
                sum(pos[p] for p in parents[n]) / len(parents[n]) if parents[n] else 0.0))
        for i, n in enumerate(columns[col]):
            pos[n] = i
    xy = {n: (PAD + col * (NODE_W + GAP_X), PAD + i * (NODE_H + GAP_Y))
          for col, ns in columns.items() for i, n in enumerate(ns)}
    width = PAD * 2 + (max(columns) + 1) * NODE_W + max(columns) * GAP_X
    height = PAD * 2 + max(len(ns) for ns in columns.values()) * (NODE_H + GAP_Y) - GAP_Y

    out = [f'<svg class="lineage-graph" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Model lineage">',
           "<defs>" + "".join(
               f'<marker id="{marker_id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" '
               f'markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{fill}"/></marker>'
               for marker_id, fill in (("arrow", "#9ca3af"), ("arrow-bad", "#dc2626"))) + "</defs>"]
    for p, c in edges:
        (x1, y1), (x2, y2) = xy[p], xy[c]
        x1, y1, y2 = x1 + NODE_W, y1 + NODE_H / 2, y2 + NODE_H / 2
        mid = (x1 + x2) / 2
        child, parent = model_by_id.get(c), nodes.get(p)
        bad = bool(child and parent and child.contaminated_by
                   and (parent.name in child.contaminated_by or parent.unique_id in child.contaminated_by
                        or (parent.contaminated_by and set(parent.contaminated_by) & set(child.contaminated_by))))
        out.append(f'<path class="edge{" contaminating" if bad else ""}" '
                   f'marker-end="url(#{"arrow-bad" if bad else "arrow"})" '
                   f'd="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2 - 2},{y2}"/>')
    position = {id(m): i for i, m in enumerate(models)}
    for n, m in nodes.items():
        x, y = xy[n]
        out.append(_node_svg(n, m, x, y, position[id(m)] if m is not None else -1))
    out.append("</svg>")
    return "\n".join(out)


def _label(ref: str, m: ModelVerdict | None) -> str:
    return m.name if m else _short_ref(ref)


def _node_svg(ref: str, m: ModelVerdict | None, x: float, y: float, index: int) -> str:
    if m is None:
        return (f'<g class="node external" data-ref="{e(ref)}"><title>{e(ref)}</title>'
                f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
                f'<text class="label" x="{x + 10}" y="{y + 25}">{e(_clip(_short_ref(ref)))}</text></g>')
    classes = ["node", _vclass(m.verdict)]
    sub = m.verdict
    if m.root_cause:
        classes.append("root-cause")
        sub += " · ROOT CAUSE"
    elif m.contaminated_by:
        classes.append("contaminated")
        sub += " · contaminated"
    tip = f"{m.name} ({m.unique_id}): {m.verdict}" + (f"; {cause(m)}" if cause(m) else "")
    return (f'<a href="#{e(_anchor(index, m))}"><g class="{" ".join(classes)}" data-model="{e(m.name)}" '
            f'data-verdict="{e(m.verdict)}"><title>{e(tip)}</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text class="label" x="{x + 10}" y="{y + 17}">{e(_clip(m.name))}</text>'
            f'<text class="sub" x="{x + 10}" y="{y + 32}">{e(sub)}</text></g></a>')


# --------------------------------------------------------------------------------------------
# Rows per partition: grouped bars, reference (grey) and scenario (blue, red where it differs).

PLOT_H, AXIS_W, LABEL_H, TOP = 120, 48, 64, 18


def _tick(v: float) -> str:
    return f"{v:,.0f}"


def partition_chart(s: ScenarioResult) -> str:
    parts = s.partitions
    if not parts:
        return '<p class="meta">No per-partition counts for this scenario.</p>'
    n = len(parts)
    # a partition's group is wide enough for its difference ("+1,600": 10.5px bold, 6-7px a
    # character) while the chart stays within 900px; narrower groups get a marker instead
    label_w = max((len(f"{p.rows - p.reference_rows:+,}") for p in parts if p.rows != p.reference_rows),
                  default=0) * 7.2 + 6
    gw = max(8.0, min(max(40.0, label_w), 900.0 / n))
    bw = max(2.0, (gw - 3) / 2)
    top = max(max(p.reference_rows, p.rows) for p in parts) or 1
    width = AXIS_W + n * gw + 10
    height = TOP + PLOT_H + LABEL_H

    def y(v: float) -> float:
        return TOP + PLOT_H - (v / top) * PLOT_H

    col = s.partition_column or "partition"
    out = [f'<svg class="chart" width="{width:.0f}" height="{height}" '
           f'viewBox="0 0 {width:.0f} {height}" role="img" '
           f'aria-label="Rows per {e(col)}: reference vs {e(s.name)}">']
    for frac in (0, 0.5, 1):
        gy = y(top * frac)
        out.append(f'<line class="grid" x1="{AXIS_W}" x2="{width - 4:.0f}" y1="{gy:.1f}" y2="{gy:.1f}"/>'
                   f'<text class="axis" x="{AXIS_W - 6}" y="{gy + 4:.1f}" text-anchor="end">'
                   f'{_tick(top * frac)}</text>')
    every = max(1, math.ceil(n / max(1, (n * gw) / 28)))
    for i, p in enumerate(parts):
        x0 = AXIS_W + i * gw
        diff = p.rows != p.reference_rows
        delta = p.rows - p.reference_rows
        ratio = f", ×{p.rows / p.reference_rows:.2f}" if p.reference_rows else ""
        tip = (f"{col} {p.partition}: reference {p.reference_rows:,}, {s.name} {p.rows:,}"
               + (f" ({delta:+,}{ratio})" if diff else ""))
        g = [f'<g class="partition{" partition-diff" if diff else ""}" data-partition="{e(p.partition)}" '
             f'data-reference="{p.reference_rows}" data-rows="{p.rows}"><title>{e(tip)}</title>']
        if diff:
            g.append(f'<rect class="diff-band" x="{x0:.1f}" y="{TOP}" width="{gw:.1f}" height="{PLOT_H}"/>')
        g.append(f'<rect class="bar-ref" x="{x0 + 1:.1f}" y="{y(p.reference_rows):.1f}" width="{bw:.1f}" '
                 f'height="{TOP + PLOT_H - y(p.reference_rows):.1f}"/>')
        g.append(f'<rect class="bar-scn" x="{x0 + 1 + bw:.1f}" y="{y(p.rows):.1f}" width="{bw:.1f}" '
                 f'height="{TOP + PLOT_H - y(p.rows):.1f}"/>')
        if diff and p.rows == 0:
            g.append(f'<line class="missing-mark" x1="{x0 + 1 + bw:.1f}" x2="{x0 + 1 + 2 * bw:.1f}" '
                     f'y1="{TOP + PLOT_H - 1}" y2="{TOP + PLOT_H - 1}"/>')
        if diff and gw >= max(14, label_w):
            g.append(f'<text class="diff-label" x="{x0 + gw / 2:.1f}" y="{TOP - 4}" text-anchor="middle">'
                     f'{delta:+,}</text>')
        elif diff:  # too narrow for a number: a marker above the partition
            cx = x0 + gw / 2
            g.append(f'<path class="diff-mark" d="M{cx - 4:.1f},{TOP - 12} L{cx + 4:.1f},{TOP - 12} '
                     f'L{cx:.1f},{TOP - 3} z"/>')
        if i % every == 0 or diff and gw >= 14:
            lx, ly = x0 + gw / 2, TOP + PLOT_H + 10
            g.append(f'<text class="axis" x="{lx:.1f}" y="{ly}" text-anchor="end" '
                     f'transform="rotate(-45 {lx:.1f} {ly})">{e(_clip(p.partition, 16))}</text>')
        g.append("</g>")
        out.append("".join(g))
    out.append("</svg>")
    legend = (f'<div class="legend">rows per {e(s.partition_column or "partition")}: '
              '<i style="background:var(--ref)"></i>reference'
              f'<i style="background:var(--scn)"></i>{e(s.name)}'
              '<i style="background:var(--bad)"></i>differs</div>')
    return f'<div class="scroll">{"".join(out)}</div>{legend}'


# --------------------------------------------------------------------------------------------


def _num(v: int) -> str:
    return f'<td class="num{" nonzero" if v else ""}">{v:,}</td>'


def _scenario_table(m: ModelVerdict) -> str:
    """Every scenario of a model in one small table: a column per scenario, its verdict and its
    numbers (rows that are zero in every scenario left out)."""
    keyed = bool(m.key)
    counted = [dict((label, n) for n, label in units(s, keyed)) for s in m.scenarios]
    labels = list(dict.fromkeys(label for c in counted for label in c))  # a side effect counts rows
    shown = [label for label in labels if any(c.get(label) for c in counted)]
    out = ['<table class="scenarios"><tr><th></th>'
           + "".join(f'<th class="num">{e(s.name)}</th>' for s in m.scenarios) + "</tr>",
           '<tr><th>verdict</th>' + "".join(f'<td class="num">{_badge(s.verdict)}</td>' for s in m.scenarios)
           + "</tr>"]
    if any(s.input_rows is not None for s in m.scenarios):  # coverage: what each scenario's decisive step brought
        out.append('<tr class="coverage"><th title="rows of its inputs in the scenario\'s decisive step: every '
                   'replayed batch, the half-committed batch, the backfilled batch, the late rows">input rows tested</th>'
                   + "".join(f'<td class="num">{"" if s.input_rows is None else f"{s.input_rows:,}"}</td>'
                             for s in m.scenarios) + "</tr>")
    for f, label in (("reference_rows", "reference rows"), ("rows", "rows")):
        out.append(f"<tr><th>{e(label)}</th>" + "".join(f'<td class="num">{getattr(s, f):,}</td>'
                                                       for s in m.scenarios) + "</tr>")
    for label in shown:
        out.append(f"<tr><th>{e(label)}</th>" + "".join(_num(c.get(label, 0)) for c in counted) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _folded(summary: str, body: list[str], cls: str) -> str:
    return f'<details class="{cls}"><summary>{e(summary)}</summary>' + "\n".join(body) + "</details>"


def _scenario_html(s: ScenarioResult, opened: bool = False) -> str:
    """One scenario: its message, chart of rows per partition, and (folded) the differing partitions
    and sample rows. Open only for the scenario that decided the model's verdict."""
    out = [f'<details class="scenario {_vclass(s.verdict)}" data-scenario="{e(s.name)}"{" open" if opened else ""}>'
           f'<summary>{e(s.name)} {_badge(s.verdict)}</summary>']
    if s.message:
        out.append(f'<div class="message">{e(s.message)}</div>')
    if s.volatile_columns:
        out.append("<p>Volatile columns (differ between two identical builds): "
                   + ", ".join(f"<code>{e(c)}</code>" for c in s.volatile_columns) + "</p>")
    if s.differing_columns:
        out.append("<p>Differing columns: "
                   + ", ".join(f"<code>{e(c)}</code>" for c in s.differing_columns) + "</p>")
    more: list[str] = []  # folded below the chart: the differing partitions, the sample rows
    labels = []
    if s.partitions:
        out.append(partition_chart(s))
        diff = s.differing_partitions
        if diff:
            rows = ['<table class="partitions"><tr><th>' + e(s.partition_column or "partition")
                    + '</th><th class="num">reference</th><th class="num">' + e(s.name)
                    + '</th><th class="num">difference</th></tr>']
            for p in diff:
                rows.append(f'<tr class="diff-row"><td class="mono">{e(p.partition)}</td>'
                            f'<td class="num">{p.reference_rows:,}</td><td class="num">{p.rows:,}</td>'
                            f'<td class="num nonzero">{p.rows - p.reference_rows:+,}</td></tr>')
            rows.append("</table>")
            more += rows
            labels.append(f"{len(diff)} differing {s.partition_column or 'partition'}(s)")
    if s.sample:
        cols = sample_columns(s.sample)
        more.append('<div class="scroll"><table class="sample"><tr>' + "".join(f"<th>{e(c)}</th>" for c in cols)
                    + "</tr>")
        for row in s.sample:
            more.append("<tr>" + "".join(f'<td class="mono">{e(sample_cell(row, c, 200))}</td>' for c in cols)
                        + "</tr>")
        more.append("</table></div>")
        labels.append(f"{len(s.sample)} sample rows")
    if more:
        out.append(_folded(", ".join(labels), more, "more"))
    out.append("</details>")
    return "\n".join(out)


def _model_html(index: int, m: ModelVerdict) -> str:
    tags = ""
    if m.root_cause:
        tags = ' <span class="tag root">root cause</span>'
    elif m.contaminated_by:
        tags = ' <span class="tag contaminated">contaminated by ' + e(", ".join(m.contaminated_by)) + "</span>"
    elif m.inconclusive:
        tags = (' <span class="tag inconclusive" title="' + e(m.inconclusive) + '">attribution inconclusive</span>')
    out = [f'<section class="model {_vclass(m.verdict)}" id="{e(_anchor(index, m))}" '
           f'data-model="{e(m.name)}" data-verdict="{e(m.verdict)}">',
           f"<h3>{e(m.name)} {_badge(m.verdict)}{tags}</h3>",
           f'<p class="meta"><span><code>{e(m.unique_id)}</code></span>'
           f"<span>materialized: {e(m.materialized)}</span>"
           + (f"<span>strategy: {e(m.strategy)}</span>" if m.strategy else "")
           + (f"<span>key: <code>{e(', '.join(m.key))}</code></span>" if m.key else "")
           + "</p>"]
    if m.reason:
        out.append(f'<div class="message">{e(m.reason)}</div>')
    if m.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{e(n)}</li>" for n in m.notes) + "</ul>")
    worst = m.worst_scenario if m.verdict in UNSAFE else None
    # the scenarios' numbers beside the one that decided the verdict (its chart), side by side
    out.append('<div class="model-body">' + _scenario_table(m)
               + (_scenario_html(worst, opened=True) if worst is not None else "") + "</div>")
    others = [s for s in m.scenarios if s is not worst]
    if others:
        out.append(_folded(f"{'other scenarios' if worst is not None else 'scenarios'}: "
                           + ", ".join(s.name for s in others), [_scenario_html(s) for s in others], "others"))
    out.append("</section>")
    return "\n".join(out)


def _overview(report: GamedayReport, order: list[ModelVerdict]) -> str:
    index = {id(m): i for i, m in enumerate(report.models)}
    base = report.baseline
    out = ['<table class="overview"><tr><th>model</th><th>verdict</th>'
           + ("<th>baseline</th>" if base is not None else "") + '<th>cause</th>'
           '<th>worst scenario</th><th class="num">extra</th><th class="num">missing</th>'
           '<th class="num">dup keys</th><th class="num">changed</th></tr>']
    for m in order:
        s = m.worst_scenario
        nums = "".join(_num(v) for v in (s.extra_rows, s.missing_rows, s.duplicate_keys, s.changed_rows)) \
            if s else '<td></td>' * 4
        was = ""
        if base is not None:
            old = base.get(m.name)
            was = f"<td>{'same' if old == m.verdict else (f'was {e(old)}' if old else 'new')}</td>"
        out.append(f'<tr><td><a href="#{e(_anchor(index[id(m)], m))}">{e(m.name)}</a></td>'
                   f"<td>{_badge(m.verdict)}</td>{was}<td>{e(cause(m))}</td><td>{e(s.name) if s else ''}</td>"
                   f"{nums}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _fixes(report: GamedayReport) -> list[str]:
    """--fix: one line per root cause (its verified fix, or none), opened for the change, the proof, the
    patch and what else was tried."""
    if report.fixes is None:
        return []
    if not report.fixes:
        return ["<h2>Fixes</h2><p>No root cause to fix.</p>"]
    out = ['<h2>Fixes</h2><ul class="fixes">']
    for f in report.fixes:
        tried = "".join(f"<li>tried {e(t.candidate)}: {e(t.why)}</li>" for t in f.tried)
        if f.verified:
            head = f"<b>{e(f.model)}</b> ({e(f.verdict)}): verified fix: {e(f.candidate)}"
            body = (f"{e(f.description)}. Verified: {e(', '.join(f.models))} safe in every scenario that exercised "
                    f"them, clean build unchanged (fixes/{e(f.model)}.patch)" + (f". Note: {e(f.note)}" if f.note else "")
                    + f'<pre class="patch">{e(f.patch)}</pre>')
        else:
            head = f"<b>{e(f.model)}</b> ({e(f.verdict)}): no fix verified"
            body = e(f.why_none) if f.why_none else ""
        body += f"<ul>{tried}</ul>" if tried else ""
        out.append(f'<li class="{"verified" if f.verified else "none"}"><details><summary>{head}</summary>'
                   f"{body}</details></li>")
    return out + ["</ul>"]


def _details(report: GamedayReport, order: list[ModelVerdict]) -> list[str]:
    """Each model's block, worst first; with a baseline, the models whose verdict is the baseline's
    come last, folded into one collapsed block (what a pull request did not change)."""
    index = {id(m): i for i, m in enumerate(report.models)}
    same = {id(m) for m in report.same_as_baseline}
    shown = [m for m in order if id(m) not in same]
    out = [_model_html(index[id(m)], m) for m in shown if m.verdict != Verdict.SAFE]
    safe = [_model_html(index[id(m)], m) for m in shown if m.verdict == Verdict.SAFE]
    if safe:  # nothing to look at: one line, opened on request
        out.append(_folded(f"{len(safe)} safe model(s)", safe, "safe-models"))
    folded = [_model_html(index[id(m)], m) for m in order if id(m) in same]
    if folded:
        out.append(_folded(f"{len(folded)} model(s) as in the baseline", folded, "as-in-baseline"))
    return out


class HtmlRenderer(Renderer):
    key = "html"
    filename = "report.html"

    def render(self, report: GamedayReport) -> str:
        summary = report.summary()
        order = sort_worst_first(report.models)
        cards = "".join(
            f'<div class="card {_vclass(v)}{"" if n else " zero"}"><span class="n">{n}</span>{e(v)}</div>'
            for v, n in summary["verdicts"].items())
        cutoffs = report.cutoffs
        meta = [("project", report.project), ("adapter", report.adapter), ("target", report.target),
                ("started", report.started_at), ("scenarios", ", ".join(report.scenarios)),
                ("batch", report.batch_size), ("steps", report.steps),
                ("window", f"{cutoffs[0]} → {cutoffs[-1]}" if cutoffs else ""),
                ("wall time", f"{report.wall_time:.1f} s"), ("dbt invocations", report.dbt_invocations),
                ("model time", f"{report.model_time:.1f} s")]
        meta_html = " ".join(f"<span>{e(k)}: <b>{e(v)}</b></span>" for k, v in meta if v != "")
        body = [
            f"<header><h1>rerun-safety game day: {e(report.project)}</h1>",
            f'<p class="meta">{meta_html}</p>',
            f'<p class="headline" data-exit-code="{summary["exit_code"]}">{e(headline(report))}</p>',
            ('<ul class="notes baseline">' + "".join(f"<li>{e(line)}</li>" for line in baseline_lines(report))
             + "</ul>" if report.baseline is not None else ""),
            ('<ul class="notes run-notes">' + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>"
             if report.notes else ""),
            "</header>",
            f'<h2>Verdicts</h2><div class="cards">{cards}</div>',
            "<h2>Lineage</h2>",
            '<div class="legend"><i style="background:#fee2e2;border:2px solid var(--bad)"></i>root cause'
            '<i style="background:#ffedd5;border:1px dashed #ea580c"></i>contaminated'
            '<i style="background:var(--bad)"></i>contamination path</div>',
            f'<div class="lineage scroll">{lineage_svg(report.models)}</div>',
            *_fixes(report),
            "<h2>Models</h2>", _overview(report, order),
            "<h2>Details</h2>",
            *_details(report, order),
            f"<footer>rerun-safety {e(__version__)}</footer>",
        ]
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>rerun-safety: {e(report.project)}</title>"
                f"<style>\n{_css()}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")
