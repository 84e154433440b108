"""benchmarks/lint_vs_gameday.py: the agreement of lint errors with game-day verdicts, on the JSON both write."""
from __future__ import annotations

import importlib.util
import json

from support.common import REPO_ROOT

_spec = importlib.util.spec_from_file_location("lint_vs_gameday", REPO_ROOT / "benchmarks" / "lint_vs_gameday.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

LINT = {"models": ["a", "b", "c", "d", "e", "f"], "findings": [
    {"model": "a", "rule": "append-reread", "severity": "error"},
    {"model": "b", "rule": "dedup-order-not-total", "severity": "error"},
    {"model": "c", "rule": "dedup-order-not-total", "severity": "warning"},
    {"model": "f", "rule": "limit-without-order", "severity": "error", "new": False}]}
REPORT = {"models": [
    {"name": "a", "verdict": "duplicates", "root_cause": True},
    {"name": "b", "verdict": "safe"},
    {"name": "c", "verdict": "loss", "root_cause": True},
    {"name": "d", "verdict": "safe"},
    {"name": "e", "verdict": "untested"},
    {"name": "f", "verdict": "drift", "root_cause": False}]}


def test_agreement_counts_each_judged_model_once(tmp_path, capsys):
    row = bench.compare(LINT, REPORT)
    assert {k: v for k, v in row.items()} == {"both_unsafe": ["a"], "both_safe": ["d"], "lint_only": ["b"],
                                              "gameday_only": ["c"], "not_judged": ["e", "f"]}
    assert bench.ratios(row) == {"precision": 0.5, "recall": 0.5, "agreement": 0.5, "judged": 4}
    lint, report = tmp_path / "lint.json", tmp_path / "report.json"
    lint.write_text(json.dumps(LINT))
    report.write_text(json.dumps(REPORT))
    assert bench.main([str(lint), str(report)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "overall: judged 4, precision 0.50, recall 0.50, agreement 0.50"
    assert bench.main([str(lint)]) == 2
    report.write_text("{")
    assert bench.main([str(lint), str(report)]) == 2
