"""Reports rendered from a hand-built game day result: report.json, junit.xml, report.md,
report.html and the terminal summary. Pure Python: no dbt, no warehouse."""
from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import io
import json
import re
import xml.etree.ElementTree as ET
from html import escape as html_escape
from html.parser import HTMLParser

import pytest
from rich.console import Console

from rerun_safety.report import RENDERERS, write_reports
from rerun_safety.report.html import HtmlRenderer
from rerun_safety.report.junit import JunitRenderer
from rerun_safety.report.markdown import MarkdownRenderer, md
from rerun_safety.report.terminal import TerminalProgress, print_summary
from rerun_safety.results import GamedayReport, ModelVerdict, PartitionCount, ScenarioResult

HOSTILE = "<script>alert(1)</script>|x"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]


def _days(reference: list[int], rows: list[int]) -> tuple[PartitionCount, ...]:
    return tuple(PartitionCount(d, r, n) for d, r, n in zip(DAYS, reference, rows))


SAFE_DAYS = _days([100] * 5, [100] * 5)


def _safe(name: str, rows: int = 500, partitions=SAFE_DAYS) -> ScenarioResult:
    return ScenarioResult(name, "safe", reference_rows=rows, rows=rows, partitions=partitions,
                          partition_column="order_date" if partitions else None)


def build_report() -> GamedayReport:
    """A shop-like game day: an append model with a lookback doubles 2024-01-03 (root cause) and
    contaminates a daily aggregate; a strict watermark loses a day under `partial`; a model with
    random() is nondeterministic; one model errors; static reference data is skipped."""
    stg = ModelVerdict(
        "stg_orders", "model.shop.stg_orders", "safe", False, (), "view", None, ("order_id",),
        ("source.shop.raw.orders",), (_safe("replay"), _safe("rerun")))
    orders = ModelVerdict(
        "orders_append", "model.shop.orders_append", "duplicates", True, (), "incremental", "append",
        ("order_id",), ("model.shop.stg_orders",),
        (ScenarioResult("replay", "duplicates", reference_rows=500, rows=600, extra_rows=100,
                        duplicate_keys=100, partitions=_days([100] * 5, [100, 100, 200, 100, 100]),
                        partition_column="order_date",
                        sample=({"order_id": 7, "order_date": dt.date(2024, 1, 3),
                                 "amount": decimal.Decimal("12.50"), "note": "a|b", "_count": 2},)),
         ScenarioResult("rerun", "duplicates", reference_rows=500, rows=700, extra_rows=200,
                        duplicate_keys=200, partitions=_days([100] * 5, [100, 100, 200, 200, 100]),
                        partition_column="order_date"),
         _safe("determinism")))
    daily = ModelVerdict(
        "daily_revenue", "model.shop.daily_revenue", "drift", False, ("orders_append",), "table", None,
        ("order_date",), ("model.shop.orders_append",),
        (ScenarioResult("replay", "drift", reference_rows=5, rows=5, changed_rows=1,
                        differing_columns=("revenue",), partitions=_days([1] * 5, [1] * 5),
                        partition_column="order_date"),
         ScenarioResult("rerun", "drift", reference_rows=5, rows=5, changed_rows=2,
                        differing_columns=("revenue",)),
         _safe("determinism", rows=5, partitions=())))
    sessions = ModelVerdict(
        "sessions_watermark", "model.shop.sessions_watermark", "loss", True, (), "incremental", "append",
        ("session_id",), ("source.shop.raw.sessions",),
        (_safe("replay"),
         ScenarioResult("partial", "loss", reference_rows=500, rows=440, missing_rows=60, missing_keys=60,
                        partitions=_days([100] * 5, [100, 100, 100, 100, 40]),
                        partition_column="session_date",
                        sample=({"session_id": "s-1", "session_date": "2024-01-05", "_side": "missing"},))))
    hostile = ModelVerdict(
        HOSTILE, "model.shop.hostile", "nondeterministic", True, (), "table", None, (),
        ("model.shop.stg_orders",),
        (ScenarioResult("determinism", "nondeterministic", reference_rows=500, rows=500, changed_rows=500,
                        volatile_columns=("loaded_at",), message="columns differ between two builds: "
                        "<b>loaded_at</b>"),))
    broken = ModelVerdict(
        "broken_model", "model.shop.broken_model", "error", False, (), "incremental", "merge", ("id",),
        ("model.shop.stg_orders",),
        (ScenarioResult("replay", "error", message="Binder Error: column \"amout\" not found"),
         ScenarioResult("rerun", "skipped", message="replay failed")))
    static = ModelVerdict(
        "country_codes", "model.shop.country_codes", "skipped", False, (), "table", None, (),
        ("source.shop.raw.countries",), (), reason="static reference data: no time column")
    return GamedayReport(
        project="shop", adapter="duckdb", target="dev",
        scenarios=("reference", "replay", "rerun", "partial", "determinism"), steps=4,
        cutoffs=("2024-01-02", "2024-01-03", "2024-01-04", "2024-01-06"),
        models=(stg, orders, daily, sessions, hostile, broken, static),
        wall_time=12.34567, dbt_invocations=31, model_time=3.2, started_at="2026-11-30T04:00:00+00:00")


def build_safe_report() -> GamedayReport:
    m = ModelVerdict("orders_merge", "model.shop.orders_merge", "safe", False, (), "incremental", "merge",
                     ("order_id",), (), (_safe("replay"), _safe("rerun")))
    return GamedayReport("shop", "postgres", "ci", ("replay", "rerun"), 3, (), (m,), 1.0, 6, 0.5,
                         "2026-11-30T04:00:00+00:00")


@pytest.fixture(scope="module")
def report() -> GamedayReport:
    return build_report()


@pytest.fixture(scope="module")
def written(report, tmp_path_factory):
    out = tmp_path_factory.mktemp("reports") / "nested" / "rerun_safety"
    return write_reports(report, out)


# ---------------------------------------------------------------------------------------------
# write_reports


def test_write_reports_writes_the_four_files(written):
    assert {k: p.name for k, p in written.items()} == {
        "json": "report.json", "junit": "junit.xml", "markdown": "report.md", "html": "report.html"}
    out = written["json"].parent
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html", "report.json", "report.md"]
    assert [r.key for r in RENDERERS] == ["json", "junit", "markdown", "html"]


def test_write_reports_into_a_file_path_is_a_config_error(report, tmp_path):
    from rerun_safety.errors import ConfigError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot create the output directory"):
        write_reports(report, blocker / "out")


# ---------------------------------------------------------------------------------------------
# report.json


def test_json_follows_the_contract(written):
    data = json.loads(written["json"].read_text(encoding="utf-8"))
    assert [m["name"] for m in data["models"]] == [
        "stg_orders", "orders_append", "daily_revenue", "sessions_watermark", HOSTILE, "broken_model",
        "country_codes"]
    orders = data["models"][1]
    assert {k: orders[k] for k in ("name", "unique_id", "verdict", "root_cause", "contaminated_by")} == {
        "name": "orders_append", "unique_id": "model.shop.orders_append", "verdict": "duplicates",
        "root_cause": True, "contaminated_by": []}
    replay = orders["scenarios"][0]
    assert {k: replay[k] for k in ("name", "verdict", "reference_rows", "rows", "extra_rows", "missing_rows",
                                   "duplicate_keys", "changed_rows")} == {
        "name": "replay", "verdict": "duplicates", "reference_rows": 500, "rows": 600, "extra_rows": 100,
        "missing_rows": 0, "duplicate_keys": 100, "changed_rows": 0}
    # Sample values from the warehouse become plain JSON: dates ISO, decimals exact strings.
    assert replay["sample"] == [{"order_id": 7, "order_date": "2024-01-03", "amount": "12.50",
                                 "note": "a|b", "_count": 2}]
    assert replay["partitions"][2] == {"partition": "2024-01-03", "reference_rows": 100, "rows": 200}
    daily = data["models"][2]
    assert (daily["verdict"], daily["root_cause"], daily["contaminated_by"]) == ("drift", False,
                                                                                 ["orders_append"])
    assert data["models"][6]["reason"] == "static reference data: no time column"
    s = data["summary"]
    assert s["verdicts"] == {"error": 1, "nondeterministic": 1, "loss": 1, "duplicates": 1, "drift": 1,
                             "side_effect": 0, "untested": 0, "safe": 1, "skipped": 1}
    assert (s["models"], s["unsafe"], s["exit_code"]) == (7, 5, 1)
    assert s["root_causes"] == ["orders_append", "sessions_watermark", HOSTILE]
    assert s["contaminated"] == ["daily_revenue"]
    assert (s["wall_time_s"], s["dbt_invocations"], s["steps"]) == (12.346, 31, 4)
    assert (data["project"], data["adapter"], data["target"]) == ("shop", "duckdb", "dev")


def test_json_turns_nan_and_odd_values_into_valid_json():
    from rerun_safety.report.json_report import JsonRenderer

    s = ScenarioResult("replay", "drift", sample=({"x": float("nan"), "y": float("inf"), "b": b"\x00\x01",
                                                   "t": dt.datetime(2024, 1, 3, 4, 5, 6)},))
    m = ModelVerdict("m", "model.p.m", "drift", True, (), "table", None, (), (), (s,))
    rep = GamedayReport("p", "duckdb", "dev", ("replay",), 2, (), (m,), 0.0, 1, 0.0, "now")
    text = JsonRenderer().render(rep)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["models"][0]["scenarios"][0]["sample"] == [
        {"x": None, "y": None, "b": "AAE=", "t": "2024-01-03T04:05:06"}]


# ---------------------------------------------------------------------------------------------
# junit.xml


def test_junit_counts_and_cases(written):
    root = ET.parse(written["junit"]).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    cases = suite.findall("testcase")
    # 2 + 3 + 3 + 2 + 1 + 2 scenarios, and one case for the model without scenarios.
    assert len(cases) == 14
    for el in (root, suite):
        assert (el.get("tests"), el.get("failures"), el.get("errors"), el.get("skipped")) == ("14", "6", "1", "2")
    outcome = {}
    for c in cases:
        kinds = [child.tag for child in c if child.tag in ("failure", "error", "skipped")]
        outcome[(c.get("classname"), c.get("name"))] = kinds[0] if kinds else "passed"
    assert outcome == {
        ("model.shop.stg_orders", "replay"): "passed", ("model.shop.stg_orders", "rerun"): "passed",
        ("model.shop.orders_append", "replay"): "failure", ("model.shop.orders_append", "rerun"): "failure",
        ("model.shop.orders_append", "determinism"): "passed",
        ("model.shop.daily_revenue", "replay"): "failure", ("model.shop.daily_revenue", "rerun"): "failure",
        ("model.shop.daily_revenue", "determinism"): "passed",
        ("model.shop.sessions_watermark", "replay"): "passed",
        ("model.shop.sessions_watermark", "partial"): "failure",
        ("model.shop.hostile", "determinism"): "failure",
        ("model.shop.broken_model", "replay"): "error", ("model.shop.broken_model", "rerun"): "skipped",
        ("model.shop.country_codes", "gameday"): "skipped",
    }
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["project"] == "shop" and props["adapter"] == "duckdb"


def test_junit_failures_carry_the_numbers(written):
    suite = ET.parse(written["junit"]).getroot().find("testsuite")

    def case(cls, name):
        return next(c for c in suite.findall("testcase") if c.get("classname") == cls and c.get("name") == name)

    f = case("model.shop.orders_append", "replay").find("failure")
    assert f.get("type") == "duplicates"
    # counted as a user counts: keys (the model has one), each difference once
    assert f.get("message") == "duplicates: 100 keys duplicated (reference 500 rows, scenario 600 rows); root cause"
    assert "  2024-01-03: 100 -> 200" in f.text
    assert "2024-01-02" not in f.text
    loss = case("model.shop.sessions_watermark", "partial").find("failure")
    assert loss.get("message").startswith("loss: 60 keys missing (reference")
    assert "60 keys missing" in loss.text
    assert case("model.shop.daily_revenue", "replay").find("failure").get("message").endswith(
        "; contaminated by orders_append")
    err = case("model.shop.broken_model", "replay").find("error")
    assert err.get("message") == 'error: Binder Error: column "amout" not found'
    skipped = case("model.shop.country_codes", "gameday").find("skipped")
    assert skipped.get("message") == "static reference data: no time column"


def test_junit_strips_characters_xml_cannot_hold():
    s = ScenarioResult("replay", "error", message="bad byte \x00 and \x1b[31m colour")
    m = ModelVerdict("m", "model.p.m", "error", False, (), "table", None, (), (), (s,))
    rep = GamedayReport("p", "duckdb", "dev", ("replay",), 2, (), (m,), 0.0, 1, 0.0, "now")
    root = ET.fromstring(JunitRenderer().render(rep).encode("utf-8"))
    assert root.find("testsuite/testcase/error").get("message") == "error: bad byte \ufffd and \ufffd[31m colour"


def test_junit_all_safe_has_no_failures():
    root = ET.fromstring(JunitRenderer().render(build_safe_report()).encode("utf-8"))
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("2", "0", "0", "0")


# ---------------------------------------------------------------------------------------------
# report.md


def test_markdown_root_causes_before_contamination(written):
    text = written["markdown"].read_text(encoding="utf-8")
    lines = text.splitlines()
    # the model dbt failed on is counted apart: not judged, so not "unsafe"
    assert lines[0] == ("### ❌ rerun-safety game day: 4 of 7 models are unsafe; root causes: orders\\_append "
                        "(duplicates), sessions\\_watermark (loss), &lt;script&gt;alert(1)&lt;/script&gt;\\|x "
                        "(nondeterministic); 1 model could not be judged, dbt failed on it (error): broken\\_model.")
    i_root, i_cont, i_table = (lines.index("#### Root causes"), lines.index("#### Contaminated downstream"),
                               lines.index("#### All models"))
    assert i_root < i_cont < i_table
    roots = lines[i_root + 2:i_cont - 1]
    assert [re.match(r"- \*\*(.+?)\*\*", r).group(1) for r in roots] == [
        "&lt;script&gt;alert(1)&lt;/script&gt;\\|x", "sessions\\_watermark", "orders\\_append"]
    assert roots[2] == ("- **orders\\_append**: **duplicates** in `rerun`: 200 keys duplicated "
                        "(reference 500, scenario 700); partitions 2024-01-03: 100 → 200, 2024-01-04: 100 → 200. "
                        "Contaminates daily\\_revenue")
    assert lines[i_cont + 2] == "- **daily\\_revenue**: **drift**, contaminated by **orders\\_append**"


def test_markdown_table_escapes_pipes_and_has_one_row_per_model(written):
    lines = written["markdown"].read_text(encoding="utf-8").splitlines()
    start = lines.index("#### All models") + 2
    table = lines[start:lines.index("", start)]
    assert len(table) == 2 + 7
    # Every row has exactly 9 unescaped pipes (8 columns), the hostile name included.
    assert [len(re.findall(r"(?<!\\)\|", row)) for row in table] == [9] * 9
    hostile = next(r for r in table if "alert" in r)
    assert hostile.startswith("| &lt;script&gt;alert(1)&lt;/script&gt;\\|x | **nondeterministic** | root cause |")
    assert "<script>" not in "\n".join(lines)
    assert table[2] == "| broken\\_model | **error** |  | replay | 0 | 0 | 0 | 0 |"


def test_markdown_samples_for_unsafe_models(written):
    text = written["markdown"].read_text(encoding="utf-8")
    samples = text[text.index("<details><summary>Sample rows</summary>"):]
    assert "**orders\\_append** · `replay` · duplicates" in samples
    assert "| order\\_id | order\\_date | amount | note | \\_count |" in samples
    assert "| 7 | 2024-01-03 | 12.50 | a\\|b | 2 |" in samples
    assert "**sessions\\_watermark** · `partial` · loss" in samples
    assert "stg\\_orders" not in samples


def test_markdown_all_safe_headline():
    text = MarkdownRenderer().render(build_safe_report())
    assert text.splitlines()[0] == "### ✅ rerun-safety game day: All 1 judged models are safe to run twice."
    assert "Root causes" not in text and "Sample rows" not in text


def test_md_escape():
    assert md("a|b_c*d`e\nf<g>&") == "a\\|b\\_c\\*d\\`e f&lt;g&gt;&amp;"


# ---------------------------------------------------------------------------------------------
# report.html


class _Dom(HTMLParser):
    """Just enough of a DOM for assertions: every start tag with its attributes, and all text."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def with_class(self, cls):
        return [a for _, a in self.tags if cls in (a.get("class") or "").split()]


@pytest.fixture(scope="module")
def dom(written):
    d = _Dom()
    d.feed(written["html"].read_text(encoding="utf-8"))
    return d


def test_html_is_self_contained(written):
    text = written["html"].read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "http://" not in text and "https://" not in text and "//cdn" not in text
    assert not re.search(r"<script\b", text)
    assert not re.search(r"<link\b", text)
    assert not re.search(r"""(src|href)=["'](?!#)""", text)  # only in-page anchors
    assert "@import" not in text and "url(" not in re.sub(r"url\(#arrow(-bad)?\)", "", text)


def test_html_marks_exactly_the_differing_partitions(dom):
    diffs = [(a["data-partition"], a["data-reference"], a["data-rows"]) for a in dom.with_class("partition-diff")]
    # Models worst first: sessions_watermark (loss) before orders_append (duplicates); within a model,
    # the scenario that decided its verdict first (orders_append: rerun, 2 days doubled), then the others.
    assert diffs == [("2024-01-05", "100", "40"),                           # sessions_watermark partial
                     ("2024-01-03", "100", "200"), ("2024-01-04", "100", "200"),  # orders_append rerun
                     ("2024-01-03", "100", "200")]                          # orders_append replay
    assert len(dom.with_class("partition")) == 5 * 8  # 8 scenarios have partition counts
    # Each scenario section names its scenario; only the one that decided a model's verdict is open.
    sessions = [a for a in dom.with_class("scenario") if a.get("data-scenario") == "partial"]
    assert len(sessions) == 1 and "open" in sessions[0]
    opened = [a.get("data-scenario") for a in dom.with_class("scenario") if "open" in a]
    assert opened == ["replay", "determinism", "partial", "rerun", "rerun"], opened


def test_html_lineage_highlights_root_cause_and_contamination(dom):
    roots = [a["data-model"] for a in dom.with_class("root-cause")]
    assert roots == ["orders_append", "sessions_watermark", HOSTILE]
    assert [a["data-model"] for a in dom.with_class("contaminated") if "node" in a["class"]] == ["daily_revenue"]
    assert len(dom.with_class("contaminating")) == 1  # the edge orders_append -> daily_revenue
    assert sorted(a["data-ref"] for a in dom.with_class("external")) == [
        "source.shop.raw.countries", "source.shop.raw.orders", "source.shop.raw.sessions"]
    assert len(dom.with_class("edge")) == 7


def test_html_escapes_user_strings(written, dom):
    text = written["html"].read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|x" in text
    assert "<b>loaded_at</b>" not in text and "&lt;b&gt;loaded_at&lt;/b&gt;" in text
    assert [t for t, _ in dom.tags if t == "script"] == []
    assert {a["data-verdict"] for a in dom.with_class("model")} == {
        "safe", "duplicates", "drift", "loss", "nondeterministic", "error", "skipped"}


def test_html_summary_counts_and_sections_worst_first(dom):
    cards = dom.with_class("card")
    assert len(cards) == 9  # one per verdict, side_effect and untested included
    sections = [a["data-model"] for t, a in dom.tags if t == "section"]
    # the safe model last, folded into one line with the other safe ones
    assert sections == ["broken_model", HOSTILE, "sessions_watermark", "orders_append", "daily_revenue",
                        "country_codes", "stg_orders"]
    assert "1 safe model(s)" in "".join(dom.text)
    assert "Binder Error: column \"amout\" not found" in "".join(dom.text)


def test_html_without_partitions_still_renders():
    text = HtmlRenderer().render(build_safe_report().__class__(
        "p", "duckdb", "dev", ("replay",), 2, (), (), 0.0, 0, 0.0, "now"))
    assert "No models." in text


# ---------------------------------------------------------------------------------------------
# Terminal


def _console(width=160, **kw):
    return Console(record=True, width=width, force_terminal=False, color_system=None, **kw)


def test_print_summary_lists_every_model_worst_first(report, written):
    console = _console()
    print_summary(report, written, console=console)
    out = console.export_text()
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(" ─")) + 1
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[start:start + 7]]
    # model, verdict, cause (empty cells collapse), worst scenario with its non-zero numbers
    assert rows == [
        ["broken_model", "error", "replay: failed"],
        [HOSTILE, "nondeterministic", "root cause", "determinism: 500 rows changed"],
        ["sessions_watermark", "loss", "root cause", "partial: 60 keys missing"],
        ["orders_append", "duplicates", "root cause", "rerun: 200 keys duplicated"],
        ["daily_revenue", "drift", "contaminated by orders_append", "rerun: 2 rows changed (revenue)"],
        ["stg_orders", "safe", "replay: no difference"],
        ["country_codes", "skipped", "static reference data: no time column"]]
    assert "contaminated by orders_append" in out
    assert "4 of 7 models are unsafe; root causes:" in out and "1 model could not be judged, dbt failed on it (error): broken_model" in out
    assert str(written["html"]) in out and str(written["junit"]) in out
    assert 'broken_model [replay]: Binder Error: column "amout" not found' in out


def test_print_summary_colours_verdicts_unless_no_color(report, monkeypatch):
    colour = re.compile(r"\x1b\[(?:[0-9;]*;)?3[0-7]m")  # a foreground colour

    def terminal_output() -> str:
        buf = io.StringIO()
        print_summary(report, {}, console=Console(file=buf, width=160, force_terminal=True,
                                                  color_system="standard"))
        return buf.getvalue()

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[1;31mduplicates" in terminal_output()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = terminal_output()
    assert not colour.search(plain)
    assert "\x1b[1mduplicates" in plain  # bold stays: NO_COLOR is about colour only


def test_progress_is_plain_when_not_a_terminal():
    console = _console()
    with TerminalProgress(console=console) as progress:
        assert progress.interactive is False
        progress.start(6, "game day")
        progress.scenario("replay")
        progress.advance("dbt run step 1")
        progress.scenario("rerun")
        progress.advance("dbt run step 1")
    assert console.export_text().splitlines() == [
        "rerun-safety: game day (6 steps)", "rerun-safety: scenario replay", "rerun-safety: scenario rerun"]


def test_progress_bar_on_a_terminal_counts_steps():
    console = Console(record=True, width=120, force_terminal=True, color_system=None)
    with TerminalProgress(console=console) as progress:
        assert progress.interactive is True
        progress.advance("before start is ignored")
        progress.start(3, "game day")
        progress.scenario("replay")
        for i in range(3):
            progress.advance(f"step {i}")
        task = progress._progress.tasks[0]
        assert (task.completed, task.total, task.fields["scenario"]) == (3, 3, "replay")
    assert "3/3" in console.export_text()


def test_progress_methods_are_safe_outside_the_block():
    p = TerminalProgress(console=_console())
    p.start(2, "x")
    p.scenario("replay")
    p.advance("y")
    assert p.console.export_text() == ""


def test_html_long_range_marks_the_doubled_and_the_missing_day():
    start = dt.date(2024, 1, 1)
    parts = tuple(PartitionCount(str(start + dt.timedelta(d)), 1000, 2000 if d == 40 else 0 if d == 77 else 1000)
                  for d in range(120))
    s = ScenarioResult("replay", "duplicates", reference_rows=120_000, rows=120_000, extra_rows=1000,
                       missing_rows=1000, partitions=parts, partition_column="event_date")
    m = ModelVerdict("events", "model.x.events", "duplicates", True, (), "incremental", "append", (), (), (s,))
    d = _Dom()
    d.feed(HtmlRenderer().render(GamedayReport("x", "duckdb", "dev", ("replay",), 4, (), (m,), 1.0, 1, 1.0, "now")))
    assert [(a["data-partition"], a["data-rows"]) for a in d.with_class("partition-diff")] == [
        ("2024-02-10", "2000"), ("2024-03-18", "0")]
    assert len(d.with_class("partition")) == 120
    assert len(d.with_class("diff-mark")) == 2  # bars too narrow for numbers get a marker
    assert len(d.with_class("missing-mark")) == 1


def _tty_output(report, width: int) -> str:
    """print_summary into a real pseudo-terminal of the given width, as a person at a terminal sees it."""
    import os
    import pty
    import threading

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    with os.fdopen(slave, "w", encoding="utf-8") as tty:
        console = Console(file=tty, width=width, color_system=None)
        assert console.is_terminal and tty.isatty()
        print_summary(report, {}, console=console)
    reader.join(5)
    os.close(master)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def test_print_summary_fits_an_80_column_terminal(report):
    out = _tty_output(report, 80)
    assert max(len(line) for line in out.splitlines()) <= 80
    flat = re.sub(r"\s+", " ", out)
    for text in ("sessions_watermark loss root cause partial: 60", "orders_append duplicates root cause rerun: 200 keys duplicated",
                 "daily_revenue drift contaminated by"):
        assert text in flat


LONG_NAME = "fct_customer_lifetime_value_by_acquisition_channel_and_region_daily_snapshot"  # 76 characters
LONG_REASON = ("static reference data: no time column found in any of its 14 upstream relations, "
               "so there is nothing to replay in batches")
DBT_ERROR = ("Runtime Error in model broken_model (models/broken_model.sql)\n"
             "  Binder Error: Referenced column \"amout\" not found in FROM clause!\n"
             "  Candidate bindings: \"amount\", \"order_id\", \"order_date\", \"customer_id\"\n"
             "  LINE 12: select amout from orders where order_date >= '2024-01-01' "
             + "and a_condition_that_goes_on = 1 " * 24 + "\n"
             "  compiled code at target/run/shop/models/broken_model.sql")


def long_report() -> GamedayReport:
    """build_report() plus a model with a 76-character name contaminated by another long name, a
    skipped model with a long reason, and a model whose two scenarios failed with a long,
    multi-line dbt error (over 1,000 characters)."""
    base = build_report()
    errored = ModelVerdict(
        "broken_model", "model.shop.broken_model", "error", False, (), "incremental", "merge", ("id",), (),
        (ScenarioResult("replay", "error", message=DBT_ERROR), ScenarioResult("rerun", "error", message=DBT_ERROR),
         ScenarioResult("partial", "skipped", message="replay failed")))
    long_model = ModelVerdict(
        LONG_NAME, f"model.shop.{LONG_NAME}", "drift", False, ("orders_append", LONG_NAME + "_upstream"),
        "table", None, (), (), (ScenarioResult("rerun", "drift", 10, 10, changed_rows=3),))
    skipped = ModelVerdict("country_codes", "model.shop.country_codes", "skipped", False, (), "table", None, (), (),
                           (), reason=LONG_REASON)
    models = tuple(m for m in base.models if m.name not in ("broken_model", "country_codes"))
    return dataclasses.replace(base, models=models + (errored, long_model, skipped))


def _assert_uncropped(out: str) -> None:
    lines = out.splitlines()
    # one table line per model, each with the whole name, verdict and cause on it
    row = next(line for line in lines if line.lstrip().startswith(LONG_NAME))
    assert re.split(r"\s{2,}", row.strip()) == [
        LONG_NAME, "drift", f"contaminated by orders_append, {LONG_NAME}_upstream", "rerun: 3 rows changed"]
    row = next(line for line in lines if line.lstrip().startswith("country_codes"))
    assert re.split(r"\s{2,}", row.strip()) == ["country_codes", "skipped", LONG_REASON]
    assert max(len(line) for line in lines) > 200  # wider than any CI log's COLUMNS: nothing folded
    assert "…" not in out
    # dbt's message whole, its line breaks kept, named once for the two scenarios that failed alike
    start = lines.index(next(line for line in lines if "broken_model [replay, rerun]: " in line))
    shown = [lines[start].split("broken_model [replay, rerun]: ", 1)[1]] + [
        line[4:] for line in lines[start + 1:start + len(DBT_ERROR.splitlines())]]
    assert shown == DBT_ERROR.splitlines()
    assert sum(1 for line in lines if "broken_model [" in line) == 1


def test_print_summary_into_a_pipe_never_crops(monkeypatch):
    """The CLI's call, print_summary(report, paths), with stdout a StringIO and the 80 columns a CI
    runner reports; FORCE_COLOR (colour in CI logs) must not bring folding back."""
    rep = long_report()
    for force in (None, "1"):
        if force:
            monkeypatch.setenv("FORCE_COLOR", force)
        monkeypatch.setenv("COLUMNS", "80")
        buf = io.StringIO()
        monkeypatch.setattr("sys.stdout", buf)
        print_summary(rep, {"json": "/ci/out/report.json"})
        monkeypatch.undo()
        out = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())
        _assert_uncropped(out)
        assert ("\x1b[" in buf.getvalue()) is bool(force)


def test_print_summary_into_a_real_pipe_never_crops(tmp_path):
    """The same through an OS pipe, in a fresh interpreter, as `rerun-safety gameday | tee log` runs it."""
    import pickle
    import subprocess
    import sys

    data = tmp_path / "report.pickle"
    data.write_bytes(pickle.dumps(long_report()))
    code = ("import pickle, sys; from rerun_safety.report.terminal import print_summary; "
            "print_summary(pickle.loads(open(sys.argv[1], 'rb').read()), {})")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["COLUMNS"] = "80"
    proc = subprocess.run([sys.executable, "-c", code, str(data)], stdout=subprocess.PIPE, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0
    _assert_uncropped(proc.stdout)


def test_on_a_terminal_long_names_fold_but_nothing_is_lost():
    out = _tty_output(long_report(), 100)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    # read the folded table column by column: the model and cause cells hold the whole text
    head = next(i for i, line in enumerate(lines) if re.search(r"\bmodel\b.*\bverdict\b.*\bcause\b", line))
    cols = {name: lines[head].index(name) for name in ("model", "verdict", "cause")}
    body = lines[head + 2:lines.index(next(line for line in lines if "models are unsafe" in line))]
    models = "".join(line[cols["model"]:cols["verdict"]].strip() for line in body)
    causes = " ".join(line[cols["cause"]:].split("  ")[0].strip() for line in body)
    assert LONG_NAME in models
    assert LONG_REASON.replace(" ", "") in causes.replace(" ", "")
    assert DBT_ERROR.replace(" ", "").replace("\n", "") in re.sub(r"\s+", "", out)


def test_junit_nondeterministic_model_fails_once():
    s_det = ScenarioResult("determinism", "nondeterministic", 500, 500, changed_rows=500,
                           volatile_columns=("loaded_at", "batch_id"),
                           message="columns differ between two builds of the same input")
    s_replay = ScenarioResult("replay", "drift", 500, 500, changed_rows=480)
    s_rerun = ScenarioResult("rerun", "drift", 500, 500, changed_rows=490)
    noisy = ModelVerdict("noisy", "model.p.noisy", "nondeterministic", True, (), "table", None, (), (),
                         (s_replay, s_rerun, s_det))
    drift = ModelVerdict("below", "model.p.below", "drift", False, ("noisy",), "table", None, (), (),
                         (ScenarioResult("replay", "drift", 5, 5, changed_rows=1),
                          ScenarioResult("rerun", "drift", 5, 5, changed_rows=2)))
    rep = GamedayReport("p", "duckdb", "dev", ("replay", "rerun", "determinism"), 3, (), (noisy, drift),
                        0.0, 1, 0.0, "now")
    root = ET.fromstring(JunitRenderer().render(rep).encode("utf-8"))
    cases = root.findall("testsuite/testcase")
    assert [(c.get("classname"), c.get("name"), [x.tag for x in c]) for c in cases] == [
        ("model.p.noisy", "determinism", ["failure"]),
        ("model.p.below", "replay", ["failure"]), ("model.p.below", "rerun", ["failure"])]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "3", "0")
    f = cases[0].find("failure")
    assert f.get("type") == "nondeterministic"
    assert f.get("message") == ("nondeterministic: columns differ between two builds of the same input; "
                                "volatile columns: loaded_at, batch_id; root cause")
    assert f.text.endswith("not judged separately (their reference is not reproducible): replay, rerun")


def test_whole_dbt_error_in_every_report(tmp_path):
    rep = long_report()
    paths = write_reports(rep, tmp_path)
    assert len(DBT_ERROR) > 1000
    # junit: the <error> of each failed scenario carries the whole message, attribute and body
    suite = ET.parse(paths["junit"]).getroot().find("testsuite")
    errs = [c for c in suite.findall("testcase") if c.get("classname") == "model.shop.broken_model"
            and c.find("error") is not None]
    assert [c.get("name") for c in errs] == ["replay", "rerun"]
    for c in errs:
        assert c.find("error").get("message") == "error: " + DBT_ERROR
        assert c.find("error").text.endswith(DBT_ERROR)
    # markdown: a code block holding the message line for line, once for both scenarios
    text = paths["markdown"].read_text()
    block = "**broken\\_model** in `replay`, `rerun`:\n\n```text\n" + DBT_ERROR + "\n```"
    assert text.count(block) == 1
    assert text.index("#### Errors") < text.index("#### All models")
    # html: the message in the scenario's message box, escaped but whole
    page = paths["html"].read_text()
    assert page.count(f'<div class="message">{html_escape(DBT_ERROR)}</div>') == 2


def test_markdown_error_block_cannot_be_closed_by_the_message():
    msg = "Compilation Error\n```\nselect 1\n```\n<b>not html</b> | not a table"
    m = ModelVerdict("m", "model.p.m", "error", False, (), "table", None, (), (),
                     (ScenarioResult("replay", "error", message=msg),))
    text = MarkdownRenderer().render(GamedayReport("p", "duckdb", "dev", ("replay",), 2, (), (m,), 0.0, 1, 0.0, "now"))
    assert "````text\n" + msg + "\n````" in text


def test_markdown_drops_samples_to_fit_a_comment():
    from rerun_safety.report.markdown import MAX_CHARS

    sample = tuple({"id": i, "payload": "x" * 40} for i in range(5))
    models = tuple(
        ModelVerdict(f"model_{i:03d}", f"model.p.model_{i:03d}", "duplicates", True, (), "incremental", "append",
                     ("id",), (), (ScenarioResult("rerun", "duplicates", 10, 20, extra_rows=10, duplicate_keys=10, sample=sample),))
        for i in range(300))
    rep = GamedayReport("p", "duckdb", "dev", ("rerun",), 2, (), models, 0.0, 1, 0.0, "now")
    text = MarkdownRenderer().render(rep)
    assert len(text) <= MAX_CHARS
    assert "Sample rows omitted to fit a comment; see report.html." in text
    assert "| model\\_299 | **duplicates** | root cause | rerun | 0 | 0 | 10 | 0 |" in text
    assert "payload" not in text


def test_markdown_lists_only_unsafe_models_when_the_project_is_huge():
    from rerun_safety.report.markdown import MAX_CHARS

    safe = tuple(ModelVerdict(f"safe_model_with_a_long_name_{i:04d}", f"model.p.s{i}", "safe", False, (), "table",
                              None, (), (), (_safe("replay", partitions=()),)) for i in range(1500))
    bad = ModelVerdict("orders", "model.p.orders", "duplicates", True, (), "incremental", "append", (), (),
                       (ScenarioResult("rerun", "duplicates", 10, 20, extra_rows=10),))
    rep = GamedayReport("p", "duckdb", "dev", ("replay",), 2, (), (bad,) + safe, 0.0, 1, 0.0, "now")
    text = MarkdownRenderer().render(rep)
    assert len(text) <= MAX_CHARS
    assert "#### Unsafe models" in text and "#### All models" not in text
    assert "| orders | **duplicates** | root cause | rerun | 0 | 10 | 0 | 0 |" in text
    assert "_1500 safe or skipped models not listed; see report.json._" in text
    assert "safe\\_model" not in text


def test_untested_is_never_shown_as_safe(tmp_path):
    reason = "its inputs (raw.events) received no new rows in any replayed batch, so its incremental runs changed nothing"
    untested = ModelVerdict("events_archive", "model.p.events_archive", "untested", False, (), "incremental", "append",
                            (), (), (ScenarioResult("replay", "untested", 10, 10, message=reason),
                                     ScenarioResult("rerun", "untested", 10, 10, message=reason)), reason=reason)
    safe = ModelVerdict("orders", "model.p.orders", "safe", False, (), "incremental", "merge", (), (),
                        (_safe("replay", partitions=()),))
    rep = GamedayReport("p", "duckdb", "dev", ("replay", "rerun"), 2, (), (untested, safe), 0.0, 1, 0.0, "now")
    paths = write_reports(rep, tmp_path)
    root = ET.parse(paths["junit"]).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("3", "0", "2")
    skipped = [c.find("skipped").get("message") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert skipped == [f"untested: {reason}"] * 2
    assert paths["markdown"].read_text().splitlines()[0] == (
        "### ✅ rerun-safety game day: All 1 judged models are safe to run twice (1 untested).")
    console = _console()
    print_summary(rep, {}, console=console)
    rows = [re.split(r"\s{2,}", line.strip()) for line in console.export_text().splitlines()]
    assert ["events_archive", "untested", reason, "replay: not exercised"] in rows
    assert 'class="card verdict-untested"><span class="n">1</span>untested' in paths["html"].read_text()


def test_a_baseline_shows_what_the_run_changed_first(tmp_path):
    """With --baseline (main's last report), the pull-request comment starts with what this run changed:
    the models worse than in main, those fixed, those unsafe as before; the HTML and JSON say the same."""
    base = build_report()
    baseline = {"stg_orders": "safe", "orders_append": "duplicates", "daily_revenue": "drift",
                "sessions_watermark": "safe", "broken_model": "error", "country_codes": "skipped",
                "gone_model": "loss"}
    # hostile is new; sessions_watermark got worse (safe -> loss); stg_orders stayed safe
    stg = next(m for m in base.models if m.name == "stg_orders")
    report = dataclasses.replace(base, baseline={**baseline, "stg_orders": "duplicates"})
    md_text = MarkdownRenderer().render(report)
    section = md_text.split("#### Compared with the baseline\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[0] == (f"- 2 model(s) worse than in the baseline: sessions\\_watermark (loss; was safe), "
                          f"{md(HOSTILE)} (nondeterministic; not in the baseline)")
    assert section[1] == "- 1 fixed: stg\\_orders (was duplicates)"
    assert section[2] == "- 3 unsafe as in the baseline: orders\\_append, daily\\_revenue, broken\\_model"
    assert md_text.index("#### Compared with the baseline") < md_text.index("#### Root causes")
    assert md_text.startswith("### ❌")
    # only what this run changed is listed; the models as in the baseline are folded into one block
    top, folded = md_text.split("<details><summary>4 model(s) as in the baseline</summary>", 1)
    changed = top.split("#### Changed since the baseline\n\n", 1)[1].split("\n\n", 1)[0]
    assert [row.split(" | ")[0].lstrip("| ") for row in changed.splitlines()[2:]] == \
        [md(HOSTILE), "sessions\\_watermark", "stg\\_orders"]
    assert "orders\\_append" not in top.split("#### Compared with the baseline", 1)[1].split("Project `", 1)[1]
    folded = folded.split("</details>", 1)[0]
    assert [row.split(" | ")[0].lstrip("| ") for row in folded.strip().splitlines()[2:]] == \
        ["broken\\_model", "orders\\_append", "daily\\_revenue", "country\\_codes"]
    assert "**orders\\_append** · `replay`" not in md_text  # its sample rows are folded away too
    assert "**sessions\\_watermark** · `partial` · loss" in md_text
    summary = report.summary()
    assert summary["baseline"]["fixed"] == ["stg_orders"] and summary["exit_code"] == 1
    html = HtmlRenderer().render(report)
    assert html.count('<li>2 model(s) worse than in the baseline: ') == 1
    # nothing worse: a green comment, even with unsafe models inherited from main
    calm = dataclasses.replace(base, baseline={m.name: m.verdict for m in base.models})
    assert MarkdownRenderer().render(calm).startswith("### ✅")
    assert "- 0 model(s) worse than in the baseline" in MarkdownRenderer().render(calm)
    assert stg.verdict == "safe"


def test_a_sampled_changed_key_shows_blanks_not_null_for_columns_it_lacks():
    """A wide keyed model's changed key is sampled as its key and the columns that differ; a key on
    one side only as its whole row. Those columns lead; a column a row lacks is blank, NULL is NULL."""
    sample = ({"_diff": "missing", "id": 1, "c0": None, "c42": 5},
              {"_diff": "extra", "id": 3, "c42": 19}, {"_diff": "missing", "id": 3, "c42": 18})
    m = ModelVerdict("wide", "model.p.wide", "drift", True, (), "incremental", "merge", ("id",), (),
                     (ScenarioResult("rerun", "drift", 10, 10, changed_rows=1, sample=sample),))
    rep = GamedayReport("p", "duckdb", "dev", ("rerun",), 2, (), (m,), 0.0, 1, 0.0, "now")
    text = MarkdownRenderer().render(rep)
    assert "| \\_diff | id | c42 | c0 |" in text
    assert "| extra | 3 | 19 |  |" in text and "| missing | 3 | 18 |  |" in text
    assert "| missing | 1 | 5 | NULL |" in text
    page = HtmlRenderer().render(rep)
    rows = re.findall(r"<tr><td class=\"mono\">(.*?)</tr>", page)
    cells = [re.findall(r'<td class="mono">(.*?)</td>', '<td class="mono">' + r) for r in rows]
    assert cells == [["missing", "1", "5", "NULL"], ["extra", "3", "19", ""], ["missing", "3", "18", ""]]


def test_every_report_names_nondeterministic_columns_beside_a_data_defect(tmp_path):
    """A drift with a nondeterministic column beside it: JSON carries both; the terminal, Markdown,
    HTML and JUnit say both. A model nondeterministic alone does not repeat it."""
    drift = ScenarioResult("replay", "drift", reference_rows=4, rows=4, changed_rows=2, extra_rows=2, missing_rows=2,
                           differing_columns=("names", "total"))
    order = ScenarioResult("determinism", "nondeterministic", reference_rows=4, rows=4, changed_rows=3,
                           extra_rows=3, missing_rows=3, differing_columns=("names",), volatile_columns=("names",))
    both = ModelVerdict("inc_batches", "model.p.inc_batches", "drift", True, (), "incremental", "merge", ("id",), (),
                        (drift, order), nondeterministic_columns=("names",))
    alone = ModelVerdict("lists", "model.p.lists", "nondeterministic", True, (), "table", None, (), (), (order,),
                         nondeterministic_columns=("names",))
    rep = GamedayReport("p", "duckdb", "dev", ("reference", "replay", "determinism"), 2, (), (both, alone), 0.0, 1,
                        0.0, "now")
    paths = write_reports(rep, tmp_path)
    models = {m["name"]: m for m in json.loads(paths["json"].read_text())["models"]}
    assert (models["inc_batches"]["verdict"], models["inc_batches"]["nondeterministic_columns"]) == ("drift", ["names"])
    assert (models["lists"]["verdict"], models["lists"]["nondeterministic_columns"]) == ("nondeterministic", ["names"])
    said = "root cause; also nondeterministic: names"
    for key in ("markdown", "html", "junit"):
        text = paths[key].read_text()
        assert text.count(said) >= 1, key
        assert "lists" in text and text.count("also nondeterministic") == text.count(said), key
    console = _console()
    print_summary(rep, paths, console=console)
    assert said in console.export_text()


def test_markdown_says_per_partition_where_each_unsafe_model_differs(written):
    text = written["markdown"].read_text(encoding="utf-8")
    where = text[text.index("<details><summary>Where: rows per partition</summary>"):]
    where = where[:where.index("</details>")]
    assert ("**sessions\\_watermark** in `partial`, by session\\_date:\n\n| session\\_date | Reference | Scenario | "
            "Difference |\n|---|---|---|---|\n| 2024-01-05 | 100 | 40 | -60 |") in where
    assert "| 2024-01-03 | 100 | 200 | +100 |\n| 2024-01-04 | 100 | 200 | +100 |" in where
    assert "2024-01-02" not in where  # a partition that matched is not listed
    assert where.index("sessions\\_watermark") < where.index("orders\\_append")  # worst first
