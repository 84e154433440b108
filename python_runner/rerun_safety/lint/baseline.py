"""`rerun-safety lint --baseline <lint JSON>`: which findings are new against a previous run's
(main's) JSON. A finding is known by its fingerprint: its model, its rule, and the SQL it points at as
sqlglot prints it (comments dropped, whitespace collapsed), never its line: a comment-only change moves
lines, not fingerprints."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ConfigError
from .findings import ERROR, Finding, LintResult, fingerprint, message_key  # noqa: F401 - the baseline's keys

_WHERE = re.compile(r"\s*\([^()]*?(:\d+)?\)\s*$")  # the "(path:line)" make_finding appends


def of(finding: Finding) -> str:
    return finding.fingerprint or fingerprint(finding.model, finding.rule, message_key(finding.message, finding.path))


def load(path: str | Path) -> set[str]:
    """The fingerprints in a lint JSON (`--format json`); a finding written without one (an older lint's)
    is known by its model, rule and message without its place. One clear line on a bad file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"--baseline {path}: cannot read it ({err.strerror or err})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(f"--baseline {path}: not JSON ({str(err).splitlines()[0]})") from None
    items = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(f, dict) for f in items):
        raise ConfigError(f"--baseline {path}: not a lint JSON (no list of findings; write it with "
                          "`rerun-safety lint --format json`)")
    out = set()
    for f in items:
        if f.get("fingerprint"):
            out.add(str(f["fingerprint"]))
        elif f.get("model") and f.get("rule"):
            out.add(fingerprint(f["model"], f["rule"], message_key(str(f.get("message", "")), f.get("path") or "")))
    return out


@dataclass(frozen=True)
class Compared:
    result: LintResult
    known: int  # findings already in the baseline
    new_errors: int

    @property
    def fails(self) -> bool:
        return self.new_errors > 0

    def summary(self) -> dict:
        return {"known": self.known, "new": sum(1 for f in self.result.findings if f.new),
                "new_errors": self.new_errors}

    def line(self) -> str:
        new = sum(1 for f in self.result.findings if f.new)
        return (f"baseline: {self.known} finding(s) already in --baseline, {new} new "
                f"({self.new_errors} new error(s))")


def compare(result: LintResult, known: set[str]) -> Compared:
    """The result with each finding marked new or not (Finding.new); the lint fails on a new error only."""
    marked = tuple(replace(f, new=of(f) not in known) for f in result.findings)
    return Compared(replace(result, findings=marked), sum(1 for f in marked if not f.new),
                    sum(1 for f in marked if f.new and f.severity == ERROR))
