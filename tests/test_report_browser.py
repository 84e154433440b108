"""report.html in a real browser: headless Chromium (Debian's `chromium`) opens the report of the DuckDB game
day on the bundled example. The page logs no console error and loads nothing but itself; every chart marks
exactly the partitions report.json says differ, each marked day is drawn visibly (band, red bar or missing
mark, its difference above it); safe models have no marked day; and screenshots are saved as test artifacts
(in $RERUN_SAFETY_ARTIFACTS if set, else in pytest's tmp dir; README's docs/report.png is `report.png`).

The broken model `events_append_lookback` (append with a 3-day lookback, event_time set) has its doubled days
checked too: the replay marks exactly the days whose rows it appends again.

Chromium is driven through the DevTools protocol over `--remote-debugging-pipe` with the standard library
only: its plain command line cannot tell errors apart (`--enable-logging=stderr` prints console.log,
console.error and uncaught exceptions all as `INFO:CONSOLE` lines). `test_console_error_detection` proves the
detection on a page with deliberate errors.

Without Chromium the tests skip, unless RERUN_SAFETY_REQUIRE_BROWSER=1 (set by .ci/run): then they fail.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from support.gameday import by_name, scenario

BROKEN = "events_append_lookback"
WIDTH, HEIGHT = 1400, 2400
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Headless, as root, on a closed network: without the background-networking flags Chromium tries to reach
# Google hosts at start.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
                  "--disable-dev-shm-usage"]  # a small /dev/shm on CI machines must not crash the renderer


# --------------------------------------------------------------------------------------------
# A minimal DevTools protocol client over --remote-debugging-pipe: Chromium reads commands from its fd 3
# and writes replies and events to its fd 4, each message one JSON text ended by a NUL byte.


class Chromium:
    def __init__(self, exe: str, workdir: Path, timeout: float = 60.0):
        self.timeout = timeout
        self.log_path = workdir / "chromium.log"
        profile = Path(tempfile.mkdtemp(prefix="profile-", dir=workdir))
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def child_fds():  # in the child, before exec: the pipe ends become fds 3 and 4
            a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                 "--remote-debugging-pipe", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=False, preexec_fn=child_fds,
                start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from Chromium in {self.timeout:.0f} s; log:\n{self.log_tail()}")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium closed the DevTools pipe; log:\n{self.log_tail()}")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg: dict = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._w, data):]
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str, session: str, start: int) -> dict:
        """The first event `method` of `session` at or after index `start` of self.events."""
        deadline = time.monotonic() + self.timeout
        seen = start
        while True:
            for ev in self.events[seen:]:
                if ev["method"] == method and ev.get("sessionId") == session:
                    return ev
            seen = len(self.events)
            ev = self._message(deadline)
            if "method" in ev:
                self.events.append(ev)

    def open(self, url: str) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session)
        start = len(self.events)
        nav = self.send("Page.navigate", {"url": url}, session)
        assert not nav.get("errorText"), nav
        self.wait_event("Page.loadEventFired", session, start)
        page = Page(self, session, start)
        page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the process group this test started
            self.proc.wait(timeout=15)
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class Page:
    def __init__(self, browser: Chromium, session: str, start: int):
        self.browser, self.session, self.start = browser, session, start

    def evaluate(self, expression: str):
        res = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                     "awaitPromise": True}, self.session)
        if "exceptionDetails" in res:
            raise RuntimeError(f"script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def _events(self, method: str) -> list[dict]:
        return [ev["params"] for ev in self.browser.events[self.start:]
                if ev["method"] == method and ev.get("sessionId") == self.session]

    def console_errors(self) -> list[str]:
        """console.error/console.assert calls, uncaught exceptions and error log entries (failed loads, ...)."""
        errors = []
        for p in self._events("Runtime.consoleAPICalled"):
            if p["type"] in ("error", "assert"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                errors.append(f"console.{p['type']}: {text}")
        for p in self._events("Runtime.exceptionThrown"):
            d = p["exceptionDetails"]
            errors.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
        for p in self._events("Log.entryAdded"):
            if p["entry"]["level"] == "error":
                errors.append(f"log ({p['entry']['source']}): {p['entry']['text']} {p['entry'].get('url', '')}")
        return errors

    def requests(self) -> list[str]:
        return [p["request"]["url"] for p in self._events("Network.requestWillBeSent")]

    def screenshot(self, path: Path, clip: dict | None = None) -> Path:
        params: dict = {"format": "png"}
        if clip:
            params.update(clip={**clip, "scale": 1}, captureBeyondViewport=True)
        data = self.browser.send("Page.captureScreenshot", params, self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def chromium_exe() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        reason = "headless Chromium not found (Debian package `chromium`); the report's browser test needs it"
        if os.environ.get("RERUN_SAFETY_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " and RERUN_SAFETY_REQUIRE_BROWSER=1")
        pytest.skip(reason)
    return exe


@pytest.fixture(scope="module")
def browser(chromium_exe, tmp_path_factory):
    b = Chromium(chromium_exe, tmp_path_factory.mktemp("chromium"))
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def shop_duckdb(chromium_exe, shop_gameday) -> dict:
    """The DuckDB game day of examples/shop: the session's run (conftest's shop_gameday), shared with
    test_gameday_shop; run here if no test before asked for it."""
    run = shop_gameday("duckdb")
    assert run["code"] == 1, run["stderr"]
    return run


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    env = os.environ.get("RERUN_SAFETY_ARTIFACTS")
    path = Path(env) if env else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------------------------
# The detection proves itself


PROBE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>probe</title></head><body>
<p id="ok">probe</p>
<img src="http://127.0.0.1:9/not-there.png" alt="">
<script>
console.log("a plain log line");
console.warn("a warning");
console.error("deliberate console error");
setTimeout(() => { throw new Error("deliberate thrown error"); }, 0);
</script>
<script>throw new TypeError("deliberate error while loading");</script>
</body></html>
"""


def test_console_error_detection(browser, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(PROBE)
    page = browser.open(probe.as_uri())
    page.evaluate("new Promise(r => setTimeout(() => r(true), 200))")
    errors = page.console_errors()
    joined = "\n".join(errors)
    assert "console.error: deliberate console error" in errors, joined
    assert any(e.startswith("uncaught:") and "deliberate thrown error" in e for e in errors), joined
    assert any(e.startswith("uncaught:") and "deliberate error while loading" in e for e in errors), joined
    assert any(e.startswith("log (network)") and "127.0.0.1:9" in e for e in errors), joined
    assert not any("plain log line" in e or "a warning" in e for e in errors), joined
    assert "http://127.0.0.1:9/not-there.png" in page.requests()
    assert page.evaluate("document.getElementById('ok').textContent") == "probe"

    clean = tmp_path / "clean.html"
    clean.write_text('<!DOCTYPE html><html><body><p>fine</p><script>console.log("fine")</script></body></html>')
    page = browser.open(clean.as_uri())
    assert page.console_errors() == []
    assert page.requests() == [clean.as_uri()]


# --------------------------------------------------------------------------------------------
# The report

DOM_SCRIPT = """(() => {
  const box = el => { const r = el.getBoundingClientRect();
                      return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; };
  const shown = el => !!el && el.checkVisibility({opacityProperty: true, visibilityProperty: true});
  const onTop = el => { el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect();
                        return document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2) === el; };
  const out = {};
  // what shows without a click, then every folded block opened (as a reader would) to measure it
  const opened = new Set([...document.querySelectorAll('details.scenario')].filter(d => d.open));
  for (const d of document.querySelectorAll('details')) d.open = true;
  for (const sec of document.querySelectorAll('section.model')) {
    const m = out[sec.dataset.model] = {box: box(sec), scenarios: {}};
    for (const d of sec.querySelectorAll('details.scenario')) {
      const s = m.scenarios[d.dataset.scenario] = {open: opened.has(d), box: box(d), partitions: []};
      const table = d.querySelector('table.partitions');
      if (table) s.diff_table = {box: box(table), rows: table.querySelectorAll('tr.diff-row').length};
      const legend = d.querySelector('.legend');
      if (legend) s.legend = box(legend);
      for (const g of d.querySelectorAll('svg.chart g.partition')) {
        const bar = g.querySelector('rect.bar-scn'), ref = g.querySelector('rect.bar-ref');
        const p = {partition: g.dataset.partition, reference: +g.dataset.reference, rows: +g.dataset.rows,
                   diff: g.classList.contains('partition-diff'), fill: getComputedStyle(bar).fill};
        if (p.diff) {
          const band = g.querySelector('rect.diff-band'), miss = g.querySelector('.missing-mark');
          const label = g.querySelector('.diff-label') || g.querySelector('.diff-mark');
          Object.assign(p, {
            bar: box(bar), bar_shown: shown(bar), bar_on_top: bar.getBoundingClientRect().height >= 1 && onTop(bar),
            ref_height: ref.getBoundingClientRect().height,
            band: band && {box: box(band), shown: shown(band), fill: getComputedStyle(band).fill},
            missing_mark: miss && {box: box(miss), shown: shown(miss), stroke: getComputedStyle(miss).stroke},
            label: label && {text: label.textContent, kind: label.getAttribute('class'), shown: shown(label),
                             fill: getComputedStyle(label).fill, box: box(label)}});
        }
        s.partitions.push(p);
      }
    }
  }
  scrollTo(0, 0);
  return out;
})()"""

BAD = "rgb(220, 38, 38)"  # --bad, #dc2626: a differing partition's scenario bar, its label and marks
SCENARIO = "rgb(37, 99, 235)"  # --scn, #2563eb: an equal partition's scenario bar
BAND = "rgb(254, 226, 226)"  # --band, #fee2e2: behind a differing partition


@pytest.fixture(scope="module")
def report_page(browser, shop_duckdb):
    html_path = shop_duckdb["out"] / "report.html"
    page = browser.open(html_path.as_uri())
    return SimpleNamespace(page=page, url=html_path.as_uri(), errors=page.console_errors(),
                           requests=page.requests(), dom=page.evaluate(DOM_SCRIPT),
                           report=shop_duckdb["report"], models=by_name(shop_duckdb["report"]))


def _marked(dom: dict) -> list[tuple[str, str, dict]]:
    return [(name, sname, p) for name, m in dom.items() for sname, s in m["scenarios"].items()
            for p in s["partitions"] if p["diff"]]


def test_report_opens_without_console_errors(report_page):
    assert report_page.errors == []
    assert report_page.requests == [report_page.url]  # self-contained: loads nothing but itself
    assert report_page.page.evaluate("document.title") == "rerun-safety: shop"
    assert set(report_page.dom) == set(report_page.models)


def test_marked_partitions_are_the_differing_ones(report_page):
    """Every chart draws report.json's rows per partition and marks exactly the partitions that differ."""
    charts = 0
    for name, m in report_page.models.items():
        for s in m["scenarios"]:
            drawn = report_page.dom[name]["scenarios"][s["name"]]["partitions"]
            assert [(p["partition"], p["reference"], p["rows"]) for p in drawn] == \
                [(p["partition"], p["reference_rows"], p["rows"]) for p in s["partitions"]], (name, s["name"])
            assert {p["partition"] for p in drawn if p["diff"]} == \
                {p["partition"] for p in s["partitions"] if p["rows"] != p["reference_rows"]}, (name, s["name"])
            charts += bool(drawn)
    assert charts >= 4
    # the example's day-partitioned model that replaces whole days with a few seconds loses rows per day
    unaligned = scenario(report_page.models["events_partition_overwrite_unaligned"], "replay")
    lost = [p for p in unaligned["partitions"] if p["rows"] < p["reference_rows"]]
    assert lost and sum(p["reference_rows"] - p["rows"] for p in lost) == unaligned["missing_rows"]


def test_marked_partitions_are_visible(report_page):
    marked = _marked(report_page.dom)
    assert marked
    # each unsafe model shows one scenario without a click, the one that decided its verdict (its
    # marked days visible at once); the others' charts are one click away
    worst = {m.name: m.worst_scenario.name for m in _report_from_json(report_page.report, None).models
             if m.verdict not in ("safe", "untested", "skipped")}
    for name, m in report_page.dom.items():
        assert [s for s, v in m["scenarios"].items() if v["open"]] == ([worst[name]] if name in worst else []), name
    assert any(report_page.dom[name]["scenarios"][sname]["open"] for name, sname, _ in marked)
    for name, sname, p in marked:
        where = (name, sname, p)
        assert p["fill"] == BAD, where
        assert p["band"]["shown"] and p["band"]["fill"] == BAND, where
        assert p["band"]["box"]["width"] >= 4 and p["band"]["box"]["height"] >= 100, where
        assert p["label"]["shown"] and p["label"]["fill"] == BAD, where
        assert p["label"]["box"]["width"] > 0 and p["label"]["box"]["height"] > 0, where
        if p["label"]["kind"] == "diff-label":
            assert p["label"]["text"] == f"{p['rows'] - p['reference']:+,}", where
        else:
            assert p["label"]["kind"] == "diff-mark", where
        if p["rows"]:  # (a day left with 3 of 800 rows has a bar under a pixel high: its band and label show it)
            assert p["bar_shown"] and p["bar"]["width"] >= 2, where
            assert p["bar_on_top"] or p["bar"]["height"] < 1, where
            if p["rows"] > p["reference"]:
                assert p["bar"]["height"] > p["ref_height"] and p["bar_on_top"], where
        else:  # nothing left of the day: a red line where its bar would be
            assert p["missing_mark"]["shown"] and p["missing_mark"]["stroke"] == BAD, where
    for name, m in report_page.dom.items():
        for sname, s in m["scenarios"].items():
            assert {p["fill"] for p in s["partitions"] if not p["diff"]} <= {SCENARIO}, name
            labels = sorted((p["label"]["box"] for p in s["partitions"] if p["diff"]), key=lambda b: b["x"])
            for a, b in zip(labels, labels[1:]):  # the numbers above neighbouring days do not run together
                assert a["x"] + a["width"] <= b["x"] + 0.5, (name, sname, a, b)


def test_safe_models_have_no_marked_partition(report_page):
    safe = [name for name, m in report_page.models.items() if m["verdict"] == "safe"]
    assert len(safe) == 9 and "events_delete_insert" in safe
    assert not [(name, sname) for name, sname, _ in _marked(report_page.dom) if name in safe]
    assert report_page.page.evaluate(
        "document.querySelectorAll('section.model[data-verdict=\"safe\"] .partition-diff').length") == 0


def test_broken_model_doubled_days_are_marked(report_page):
    """events_append_lookback re-appends its 3-day lookback at each of the 4 daily batches of the replay:
    4,800 events become 13,521 rows, and the days read again hold 2-4 times their rows."""
    replay_json = scenario(report_page.models[BROKEN], "replay")
    assert (replay_json["reference_rows"], replay_json["rows"], replay_json["extra_rows"]) == (4800, 13521, 8721)
    assert replay_json["partitions"], f"no rows per day for {BROKEN}: its config must keep event_time='event_time'"
    replay = report_page.dom[BROKEN]["scenarios"]["replay"]
    drawn = replay["partitions"]
    assert sum(p["reference"] for p in drawn) == 4800 and sum(p["rows"] for p in drawn) == 13521
    marked = [p for p in drawn if p["diff"]]
    assert {p["partition"] for p in marked} == \
        {p["partition"] for p in replay_json["partitions"] if p["rows"] > p["reference_rows"]}
    assert all(p["rows"] > p["reference"] for p in marked)
    assert sum(p["rows"] - p["reference"] for p in marked) == 8721
    assert max(p["rows"] / p["reference"] for p in marked) >= 2  # a day at least doubled
    assert replay["diff_table"]["rows"] == len(marked)
    assert all(p["fill"] == BAD and p["bar_shown"] and p["bar_on_top"] for p in marked)


def _check_png(path: Path, min_width: int, min_height: int) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", path
    assert len(data) > 20_000, (path, len(data))
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= min_width and height >= min_height, (path, width, height)
    return width, height


def test_screenshot(report_page, artifacts, capsys):
    """The top of the page (verdicts, lineage, overview), and a marked chart with its model's heading: the
    broken model's replay when the report has its rows per day, else the first chart with a marked day."""
    dom = report_page.dom
    replay = dom[BROKEN]["scenarios"]["replay"]
    if any(p["diff"] for p in replay["partitions"]):
        name, sname = BROKEN, "replay"
    else:
        name, sname = min(((n, s) for n, s, _ in _marked(dom)),
                          key=lambda ns: dom[ns[0]]["scenarios"][ns[1]]["box"]["y"])
    s = dom[name]["scenarios"][sname]
    top = max(0, dom[name]["box"]["y"] - 16)
    last = s.get("diff_table", {}).get("box") or s["legend"]
    clip = {"x": 0, "y": top, "width": WIDTH, "height": last["y"] + last["height"] + 16 - top}
    chart = report_page.page.screenshot(artifacts / "report.png", clip)
    page_top = report_page.page.screenshot(artifacts / "report-top.png")
    assert _check_png(page_top, WIDTH, HEIGHT) == (WIDTH, HEIGHT)
    assert _check_png(chart, WIDTH, 300) == (WIDTH, round(clip["height"]))
    with capsys.disabled():
        print(f"\nreport screenshots: {chart} ({name}, {sname}: marked days), {page_top} (top of the page)")


def _report_from_json(data: dict, baseline: dict[str, str] | None):
    """The GamedayReport a report.json was written from (what report.html is rendered from)."""
    import dataclasses

    from rerun_safety.results import GamedayReport, ModelVerdict, PartitionCount, ScenarioResult

    def fields(cls, d: dict) -> dict:
        names = {f.name for f in dataclasses.fields(cls)}
        return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in names}

    models = []
    for m in data["models"]:
        scenarios = tuple(ScenarioResult(**{**fields(ScenarioResult, s), "partitions": tuple(
            PartitionCount(**fields(PartitionCount, p)) for p in s.get("partitions") or ())}) for s in m["scenarios"])
        models.append(ModelVerdict(**{**fields(ModelVerdict, m), "scenarios": scenarios}))
    s = data["summary"]
    return GamedayReport(data["project"], data["adapter"], data["target"], tuple(s["scenarios"]), s["steps"],
                         tuple(s["cutoffs"]), tuple(models), s["wall_time_s"], s["dbt_invocations"], s["model_time_s"],
                         data["started_at"], batch_size=s["batch_size"], notes=tuple(s["notes"]), baseline=baseline)


def test_the_report_is_short_and_a_baseline_folds_the_models_it_did_not_change(browser, shop_duckdb, tmp_path,
                                                                                 capsys):
    """The example's report.html is under 6,000 px tall. Rendered against a baseline where main had
    every verdict but one (a pull request that made one model worse), the models as in the baseline
    are folded into one collapsed block after the changed one, the overview says what each was, and
    the page is shorter still (both heights printed)."""
    from rerun_safety.report.html import HtmlRenderer

    height = "document.documentElement.scrollHeight"
    plain = browser.open((shop_duckdb["out"] / "report.html").as_uri()).evaluate(height)
    assert plain < 6000  # the limit: one block per model, its scenarios in one small table
    data = shop_duckdb["report"]
    verdicts = {m["name"]: m["verdict"] for m in data["models"]}
    unsafe = sorted(n for n, v in verdicts.items() if v != "safe")
    worse = unsafe[0]
    baseline = {**verdicts, worse: "safe"}
    html = tmp_path / "report.html"
    html.write_text(HtmlRenderer().render(_report_from_json(data, baseline)), encoding="utf-8")
    page = browser.open(html.as_uri())
    assert page.console_errors() == []
    folded_height = page.evaluate(height)
    with capsys.disabled():
        print(f"\nreport.html of the example: {plain:,} px tall; against a baseline with one model changed: "
              f"{folded_height:,} px")
    assert folded_height < plain, (folded_height, plain)
    shown = page.evaluate("[...document.querySelectorAll('h2 ~ section.model')].map(s => s.dataset.model)")
    folded = page.evaluate("[...document.querySelectorAll('details.as-in-baseline section.model')]"
                           ".map(s => s.dataset.model)")
    assert shown == [worse], shown
    assert sorted(folded) == sorted(n for n in verdicts if n != worse)
    assert page.evaluate("document.querySelector('details.as-in-baseline').open") is False
    assert page.evaluate("document.querySelector('details.as-in-baseline > summary').textContent") == \
        f"{len(verdicts) - 1} model(s) as in the baseline"
    cells = page.evaluate("[...document.querySelectorAll('table.overview tr')].slice(1)"
                          ".map(r => [r.cells[0].textContent, r.cells[2].textContent])")
    assert dict(cells) == {n: ("was safe" if n == worse else "same") for n in verdicts}
    assert page.evaluate("document.querySelector('ul.notes.baseline').textContent").startswith(
        f"1 model(s) worse than in the baseline: {worse}")
