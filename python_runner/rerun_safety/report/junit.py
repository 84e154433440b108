"""junit.xml: one test case per model and scenario, so CI systems show unsafe models as failures.

classname is the model's unique_id and name the scenario. Unsafe verdicts are <failure> elements
whose message and body carry the numbers; `error` is <error> with dbt's whole message; `skipped`
and `untested` (nothing was exercised, so not a pass) are <skipped>.

A nondeterministic model is one test case, the scenario that found it (two builds of the same
input differ), failing once with the reason: its other scenarios differ from a reference that is
itself not reproducible, so they would only repeat the same failure under other names.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..results import UNSAFE, GamedayReport, ModelVerdict, ScenarioResult, Verdict
from .base import Renderer, cause, numbers

# Characters XML 1.0 forbids even when escaped; they can occur in sample data or dbt messages.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

#: Test case name for a model that has no scenario results (e.g. skipped before any ran).
NO_SCENARIO = "gameday"


def _clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def _body(model: ModelVerdict, s: ScenarioResult) -> str:
    lines = [f"model: {model.name} ({model.unique_id})",
             f"scenario: {s.name}", f"verdict: {s.verdict}", numbers(s, bool(model.key))]
    if cause(model):
        lines.append(cause(model))
    if s.volatile_columns:
        lines.append("volatile columns: " + ", ".join(s.volatile_columns))
    if s.differing_columns:
        lines.append("differing columns: " + ", ".join(s.differing_columns))
    diff = s.differing_partitions
    if diff:
        lines.append(f"partitions that differ ({s.partition_column or 'partition'}: reference -> scenario):")
        lines.extend(f"  {p.partition}: {p.reference_rows} -> {p.rows}" for p in diff)
    if s.message:
        lines.append(s.message)
    return "\n".join(lines)


def _message(model: ModelVerdict, s: ScenarioResult) -> str:
    text = f"{s.verdict}: {numbers(s, bool(model.key))}"
    if model.root_cause:
        text += "; root cause"
    elif model.contaminated_by:
        text += "; contaminated by " + ", ".join(model.contaminated_by)
    elif model.inconclusive:
        text += "; attribution inconclusive: " + model.inconclusive
    if s.message and s.verdict == Verdict.ERROR:
        text = f"error: {s.message}"
    return text


def _cases(model: ModelVerdict) -> tuple[ScenarioResult | None, ...]:
    """The scenarios that become test cases: all of them, but only the deciding one for a
    nondeterministic model; (None,) for a model without scenario results."""
    if model.verdict == Verdict.NONDETERMINISTIC and model.worst_scenario is not None:
        return (model.worst_scenario,)
    return model.scenarios or (None,)


def _nondeterministic(parent: ET.Element, model: ModelVerdict, s: ScenarioResult) -> None:
    """The one failure of a nondeterministic model: why, which columns, which scenarios it covers."""
    others = [x.name for x in model.scenarios if x is not s]
    reason = s.message or model.reason or "two builds of the same input differ"
    if s.volatile_columns:
        reason += "; volatile columns: " + ", ".join(s.volatile_columns)
    message = f"nondeterministic: {reason}"
    if model.root_cause:
        message += "; root cause"
    elif model.contaminated_by:
        message += "; contaminated by " + ", ".join(model.contaminated_by)
    elif model.inconclusive:
        message += "; attribution inconclusive: " + model.inconclusive
    body = _body(model, s)
    if others:
        body += ("\nnot judged separately (their reference is not reproducible): " + ", ".join(others))
    el = ET.SubElement(parent, "failure", message=_clean(message), type="nondeterministic")
    el.text = _clean(body)


def _testcase(parent: ET.Element, model: ModelVerdict, s: ScenarioResult | None) -> str:
    """Append one <testcase>; returns its outcome: passed, failure, error or skipped."""
    tc = ET.SubElement(parent, "testcase", classname=_clean(model.unique_id),
                       name=_clean(s.name if s else NO_SCENARIO), time="0")
    verdict = s.verdict if s else model.verdict
    if verdict == Verdict.SKIPPED:
        reason = (s.message if s and s.message else model.reason) or "skipped"
        ET.SubElement(tc, "skipped", message=_clean(reason))
        return "skipped"
    if verdict == Verdict.UNTESTED:  # nothing was exercised: not a pass
        reason = (s.message if s and s.message else model.reason) or "its inputs received no new rows"
        ET.SubElement(tc, "skipped", message=_clean(f"untested: {reason}"))
        return "skipped"
    if s is None:
        # A model with a verdict but no scenario detail: report the model-level verdict.
        if verdict == Verdict.SAFE:
            return "passed"
        tag = "error" if verdict == Verdict.ERROR else "failure"
        el = ET.SubElement(tc, tag, message=_clean(f"{verdict}: {model.reason or cause(model)}"),
                           type=verdict)
        el.text = _clean(model.reason)
        return tag
    if model.verdict == Verdict.NONDETERMINISTIC:
        _nondeterministic(tc, model, s)
        return "failure"
    if verdict == Verdict.ERROR:
        el = ET.SubElement(tc, "error", message=_clean(_message(model, s)), type="error")
        el.text = _clean(_body(model, s))
        return "error"
    if verdict in UNSAFE:
        el = ET.SubElement(tc, "failure", message=_clean(_message(model, s)), type=verdict)
        el.text = _clean(_body(model, s))
        return "failure"
    return "passed"


class JunitRenderer(Renderer):
    key = "junit"
    filename = "junit.xml"

    def render(self, report: GamedayReport) -> str:
        root = ET.Element("testsuites", name="rerun-safety")
        suite = ET.SubElement(root, "testsuite", name=_clean(f"rerun_safety.gameday.{report.project}"),
                              timestamp=_clean(report.started_at), time=f"{report.wall_time:.3f}")
        props = ET.SubElement(suite, "properties")
        for name, value in (("project", report.project), ("adapter", report.adapter),
                            ("target", report.target), ("scenarios", ",".join(report.scenarios)),
                            ("steps", str(report.steps))):
            ET.SubElement(props, "property", name=name, value=_clean(value))
        for f in report.fixes or ():  # --fix: what to change, beside the failures
            ET.SubElement(props, "property", name=_clean(f"fix:{f.model}"),
                          value=_clean(f"verified: {f.description} (fixes/{f.model}.patch)" if f.verified
                                       else "no fix verified" + (f": {f.why_none}" if f.why_none else "")))
        counts = {"passed": 0, "failure": 0, "error": 0, "skipped": 0}
        for model in report.models:
            for s in _cases(model):
                counts[_testcase(suite, model, s)] += 1
        total = sum(counts.values())
        for el in (root, suite):
            el.set("tests", str(total))
            el.set("failures", str(counts["failure"]))
            el.set("errors", str(counts["error"]))
            el.set("skipped", str(counts["skipped"]))
        root.set("time", f"{report.wall_time:.3f}")
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
