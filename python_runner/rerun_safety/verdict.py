"""From diffs to verdicts: per scenario, per model, and the root cause / contamination graph."""
from __future__ import annotations

from typing import Mapping

from .diff import DiffResult
from .results import UNSAFE, worst


def scenario_verdict(scenario: str, diff: DiffResult) -> str:
    """Name what a difference means. Loss outranks duplicates, duplicates outrank drift."""
    if diff.identical:
        return "safe"
    if scenario == "determinism":
        return "nondeterministic"
    if diff.schema_message:
        return "drift"
    if diff.keyed:
        if diff.missing_keys:
            return "loss"
        if diff.duplicate_keys:
            return "duplicates"
        return "drift"
    # Without a key, a changed row is one extra (its new version, not a copy of a reference row)
    # and one missing row; missing rows beyond those changed versions were lost, even when copies
    # of other rows make the table larger than the reference.
    changed_versions = diff.extra_rows - diff.extra_copies
    if diff.missing_rows > changed_versions:
        return "loss"
    if diff.extra_copies:
        return "duplicates"
    return "drift"


def differs(verdict: str) -> bool:
    return verdict in UNSAFE


def root_causes(verdicts: Mapping[str, Mapping[str, str]], parents: Mapping[str, tuple[str, ...]],
                isolated: Mapping[str, set[str]] | None = None) -> tuple[set[str], dict[str, set[str]]]:
    """verdicts[model][scenario]; parents[model] are the judged models it reads; isolated[model]
    the scenarios in which it still differed when replayed with its broken ancestors kept right.

    A model that differs in a scenario where every parent matches, or that differs in isolation,
    is a root cause. A model that differs below a root cause (in the same scenario) is
    contaminated by it.
    """
    roots: set[str] = set()
    root_in: dict[str, set[str]] = {}
    for model, scenarios in (isolated or {}).items():
        if scenarios:
            roots.add(model)
            root_in.setdefault(model, set()).update(scenarios)
    for model, by_scenario in verdicts.items():
        for scenario, v in by_scenario.items():
            if differs(v) and not any(differs(verdicts.get(p, {}).get(scenario, "safe"))
                                      for p in parents.get(model, ())):
                roots.add(model)
                root_in.setdefault(model, set()).add(scenario)

    def ancestors(model: str) -> set[str]:
        seen: set[str] = set()
        stack = list(parents.get(model, ()))
        while stack:
            p = stack.pop()
            if p not in seen:
                seen.add(p)
                stack.extend(parents.get(p, ()))
        return seen

    contaminated: dict[str, set[str]] = {}
    for model, by_scenario in verdicts.items():
        bad = {s for s, v in by_scenario.items() if differs(v)}
        if not bad:
            continue
        for anc in ancestors(model):
            if anc in roots and bad & root_in.get(anc, set()):
                contaminated.setdefault(model, set()).add(anc)
    return roots, contaminated


def model_verdict(scenario_verdicts: Mapping[str, str]) -> str:
    return worst(scenario_verdicts.values())
