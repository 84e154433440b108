"""The vars a model's incremental window reads (in its file or in the macros it calls), and the value
each must have to re-read what the replay showed arriving late: a package's lookback is often a var
read inside one of its macros, which the user sets in their own dbt_project.yml (pure text work, no I/O).

A var counts as a window's when its value is a number and a unit of time is named by the var
(`lookback_days`) or where it is used (`interval '{{ var('lookback') }} days'`, `dateadd('hour', ...)`).
Its value in effect follows dbt's order: --vars, the root project's vars for the package, the root
project's global vars, the package's own dbt_project.yml (for the package, then global), the default.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

UNITS = {"minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_CALL = re.compile(r"""\bvar\(\s*(['"])(?P<name>\w+)\1\s*(?:,\s*(?P<default>[^)]*?))?\s*\)""")
_UNIT = re.compile(r"(?<![a-z])(minute|hour|day|week)s?(?![a-z])", re.I)
_NAMED_UNIT = re.compile(r"(?:^|_)(minute|hour|day|week)s?(?:_|$)", re.I)
_WINDOWISH = re.compile(r"interval|dateadd|date_add|date_sub|datediff|timestamp_add|timestampadd|lookback|"
                        r"\bmax\s*\(|\{\{\s*this\s*\}\}|current_date|now\s*\(", re.I)


@dataclass(frozen=True)
class WindowVar:
    name: str
    default: float | None  # the var() call's default, when a number
    unit: int  # seconds in one unit of its value
    unit_name: str


def number(text: Any) -> float | None:
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text or "").strip().strip("'\"")
    try:
        return float(s)
    except ValueError:
        return None


def window_vars(texts: list[str]) -> list[WindowVar]:
    """Each var these texts (a model file and the macros it calls) read in a window of time, once."""
    out: dict[str, WindowVar] = {}
    for text in texts:
        for m in _CALL.finditer(text):
            name = m.group("name")
            if name in out:
                continue
            around = text[max(0, m.start() - 80):m.end() + 40]
            named = _NAMED_UNIT.search(name)
            used = _UNIT.search(text[m.end():m.end() + 40]) or _UNIT.search(text[max(0, m.start() - 40):m.start()])
            unit = named or used
            if unit is None or not (_WINDOWISH.search(around) or re.search(r"lookback|window|late|since", name, re.I)):
                continue
            u = unit.group(1).lower()
            out[name] = WindowVar(name, number(m.group("default")), UNITS[u], u)
    return list(out.values())


def in_effect(name: str, package: str, cli: dict, root: dict, own: dict, default: float | None) -> Any:
    """The var's value where the package's model reads it, in dbt's order."""
    scoped = (root.get("vars") or {}).get(package) if isinstance(root.get("vars"), dict) else None
    own_vars = own.get("vars") if isinstance(own.get("vars"), dict) else {}
    for where in (cli, scoped if isinstance(scoped, dict) else {},
                  {k: v for k, v in (root.get("vars") or {}).items() if not isinstance(v, dict)}
                  if isinstance(root.get("vars"), dict) else {},
                  own_vars.get(package) if isinstance(own_vars.get(package), dict) else {},
                  {k: v for k, v in own_vars.items() if not isinstance(v, dict)}):
        if name in where:
            return where[name]
    return default


def needed(var: WindowVar, lookback_seconds: float) -> int:
    """The var's value that covers this lookback, in its unit (whole units, at least 1)."""
    return max(1, math.ceil(lookback_seconds / var.unit - 1e-9))
