"""Lint results: frozen dataclasses with `to_dict()`; renderers take these and never recompute."""
from __future__ import annotations

import hashlib

from dataclasses import asdict, dataclass, field

ERROR = "error"
WARNING = "warning"
INFO = "info"  # a note: never fails the lint


def fingerprint(model: str, rule: str, what: str) -> str:
    """16 hex digits of sha1(model, rule, what): `what` is the construct's key (its SQL), else the message
    without where it is; whitespace collapsed."""
    text = " ".join(str(what).split())
    return hashlib.sha1(f"{model}\x1f{rule}\x1f{text}".encode()).hexdigest()[:16]


def message_key(message: str, path: str = "") -> str:
    """A message without the `(path[:line])` at its end."""
    if path and message.endswith(")"):
        start = message.rfind(f" ({path}")
        if start >= 0:
            return message[:start]
    return message



@dataclass(frozen=True)
class Finding:
    """One rule hit on one model."""

    rule: str
    model: str
    severity: str
    message: str
    hint: str = ""
    unique_id: str = ""
    path: str = ""
    line: int | None = None
    branch: str = ""  # "full" (full-refresh SQL), "incremental" (is_incremental() true), "config"
    fingerprint: str = ""  # model, rule and the SQL it points at (lint.baseline), not its line
    new: bool | None = None  # with --baseline: not in the baseline

    def __post_init__(self) -> None:
        if not self.fingerprint:
            object.__setattr__(self, "fingerprint", fingerprint(self.model, self.rule,
                                                                 message_key(self.message, self.path)))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LintResult:
    """Everything `rerun-safety lint` found, plus how long each phase took."""

    findings: tuple[Finding, ...]
    models: tuple[str, ...] = ()
    suppressed: tuple[Finding, ...] = ()
    incremental_mode: str = ""
    timings: dict = field(default_factory=dict, compare=False)
    confinement: str = ""  # how the project's code was confined while it compiled (confine.Confinement.note)
    notes: tuple[str, ...] = ()  # what the lint could not do (a source --with-data could not read, say)
    skipped: tuple[tuple[str, str], ...] = ()  # (model, why): analysis past --model-budget, not linted

    @property
    def has_errors(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)

    def counts(self) -> dict:
        return {
            "models": len(self.models),
            "errors": sum(f.severity == ERROR for f in self.findings),
            "warnings": sum(f.severity == WARNING for f in self.findings),
            "info": sum(f.severity == INFO for f in self.findings),
            "suppressed": len(self.suppressed),
            "skipped": len(self.skipped),
        }

    def to_dict(self) -> dict:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "models": list(self.models),  # every model linted, as dbt names it (orders.v2)
            "suppressed": [f.to_dict() for f in self.suppressed],
            "summary": {**self.counts(), "incremental_branch": self.incremental_mode,
                        "confinement": self.confinement, "notes": list(self.notes),
                        "skipped": [{"model": m, "reason": why} for m, why in self.skipped]},
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


def _register() -> None:
    from ..confine.wire import register

    register(LintResult, Finding)


_register()
