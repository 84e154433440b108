"""Agreement between `rerun-safety lint` and the game day on the same projects: for each pair of a
lint JSON (`rerun-safety lint --format json`) and a game day's report.json, per model, whether the lint
errs where the game day finds a defect (a root cause: loss, duplicates, drift, nondeterministic,
side_effect) and only there.

    .venv/bin/python benchmarks/lint_vs_gameday.py LINT.json REPORT.json [LINT2.json REPORT2.json ...]

Models the game day did not judge (untested, error, or not in its report) are counted apart, never as
agreement. Prints, per project and overall: both unsafe, both safe, lint only (a false alarm if the game
day is right), game day only (a miss), the lint's precision and recall against the game day, and the
agreement (the share of judged models where both say the same).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

DEFECTS = {"loss", "duplicates", "drift", "nondeterministic", "side_effect"}
JUDGED = DEFECTS | {"safe"}


def lint_errors(doc: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in doc.get("findings", []):
        if f.get("severity") == "error" and f.get("new") is not False:
            out.setdefault(f["model"], []).append(f["rule"])
    return out


def verdicts(report: dict) -> dict[str, str]:
    """model -> 'unsafe' (a root cause of a defect), 'safe', or None (not judged, or only contaminated)."""
    out = {}
    for m in report.get("models", []):
        v = m.get("verdict")
        if v not in JUDGED:
            continue
        if v in DEFECTS and not m.get("root_cause", True):
            continue  # contaminated from above: the lint judges the model that causes it
        out[m["name"]] = "unsafe" if v in DEFECTS else "safe"
    return out


def compare(lint_doc: dict, report: dict) -> dict:
    errs, judged = lint_errors(lint_doc), verdicts(report)
    linted = set(lint_doc.get("models", [])) or set(errs)
    row = {"both_unsafe": [], "both_safe": [], "lint_only": [], "gameday_only": [], "not_judged": []}
    for model in sorted(linted | set(judged)):
        game = judged.get(model)
        if game is None or model not in linted:
            row["not_judged"].append(model)
        elif model in errs:
            row["both_unsafe" if game == "unsafe" else "lint_only"].append(model)
        else:
            row["gameday_only" if game == "unsafe" else "both_safe"].append(model)
    return row


def ratios(row: dict) -> dict:
    tp, fp, fn, tn = (len(row[k]) for k in ("both_unsafe", "lint_only", "gameday_only", "both_safe"))
    judged = tp + fp + fn + tn
    return {"precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None,
            "agreement": (tp + tn) / judged if judged else None, "judged": judged}


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print("usage: lint_vs_gameday.py LINT.json REPORT.json [LINT2.json REPORT2.json ...]", file=sys.stderr)
        return 2
    total = {k: [] for k in ("both_unsafe", "both_safe", "lint_only", "gameday_only", "not_judged")}
    for lint_path, report_path in zip(argv[::2], argv[1::2]):
        try:
            row = compare(json.loads(Path(lint_path).read_text()), json.loads(Path(report_path).read_text()))
        except (OSError, ValueError) as err:
            print(f"{lint_path} / {report_path}: {err}", file=sys.stderr)
            return 2
        r = ratios(row)
        print(f"{Path(report_path).parent.name or report_path}: judged {r['judged']}, both unsafe "
              f"{len(row['both_unsafe'])}, both safe {len(row['both_safe'])}, lint only {len(row['lint_only'])} "
              f"{row['lint_only'][:5]}, game day only {len(row['gameday_only'])} {row['gameday_only'][:5]}; "
              f"precision {_fmt(r['precision'])}, recall {_fmt(r['recall'])}, agreement {_fmt(r['agreement'])}")
        for k in total:
            total[k] += row[k]
    r = ratios(total)
    print(f"overall: judged {r['judged']}, precision {_fmt(r['precision'])}, recall {_fmt(r['recall'])}, "
          f"agreement {_fmt(r['agreement'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
