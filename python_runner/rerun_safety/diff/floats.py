"""Float columns: equal within a relative tolerance (see the package's docstring).

The tolerance, the rounding of floats before hashing, and the pairing of rows that the rounded
row hash left unmatched.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Protocol, Sequence

from ..warehouse.dialects import dialect_for
from .results import DiffError


class _FloatPlan(Protocol):
    """What the float pairing reads of a diff plan (diff/plan.py's _Plan)."""

    floats: Sequence[tuple[str, float]]
    key: Sequence[str]


# Float column types (information_schema spelling, lower case) of both engines.
_FLOAT64 = {"double", "double precision", "float8"}
_FLOAT32 = {"float", "real", "float4"}
DEFAULT_FLOAT_TOLERANCE = 1e-9
FLOAT_ABS_FLOOR = 1.0  # below this magnitude the tolerance is absolute
REAL_MIN_TOLERANCE = 2.0 ** -20  # 32-bit floats: eight times their machine epsilon


def check_float_tolerance(value: float | None) -> float:
    """The tolerance to use: None is DEFAULT_FLOAT_TOLERANCE, 0 is exact; a number in [0, 1)."""
    if value is None:
        return DEFAULT_FLOAT_TOLERANCE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise DiffError(f"float tolerance must be a number >= 0 and < 1 (0 compares floats exactly); got {value!r}")
    return float(value)


def float_tolerance_of(data_type: str, tolerance: float) -> float | None:
    """The tolerance of a column of this type: None for a type that is not a float (exact)."""
    t = data_type.lower()
    if tolerance <= 0 or (t not in _FLOAT64 and t not in _FLOAT32):
        return None
    return max(tolerance, REAL_MIN_TOLERANCE) if t in _FLOAT32 else tolerance


def round_float_sql(expr: str, dialect: str, tolerance: float) -> str:
    """`expr` (a float) rounded to a grid no wider than `tolerance` * max(|x|, 1), as a double.

    p = 1 + ceil(-log2 tolerance) significant bits: the spacing of p-bit numbers is at most
    2^(1-p) <= tolerance of their magnitude. |x| >= 1: a Veltkamp split (g = x * (2^(53-p) + 1);
    g + (x - g) is x rounded to p bits, three operations, no logarithm). |x| < 1: (x + M) - M with
    M = 1.5 * 2^(53-p) rounds to multiples of 2^(1-p), the grid of [1, 2). Infinities, NaN and
    magnitudes over 1e300 (where the split would overflow) stay as they are.
    """
    double = dialect_for(dialect).double_type
    x = f"cast({expr} as {double})"
    bits = 1 + math.ceil(-math.log2(tolerance))
    if bits >= 53:
        return x
    c = f"cast({float(2 ** (53 - bits) + 1)!r} as {double})"
    m = f"cast({1.5 * 2.0 ** (53 - bits)!r} as {double})"
    return (f"(case when abs({x}) < 1 then ({x} + {m}) - {m} "
            f"when abs({x}) < 1e300 then ({x} * {c}) + ({x} - {x} * {c}) else {x} end)")


def floats_close(a, b, tolerance: float) -> bool:
    """The float equality of the diff: NULL only equals NULL, NaN equals NaN, inf only itself."""
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if a == b or (a != a and b != b):
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= tolerance * max(abs(a), abs(b), FLOAT_ABS_FLOOR)


@dataclass
class LooseRow:
    """A row unmatched by the row hash: side (0 left), bucket, row hash, key, hash of the exact
    columns, floats, left rows of its row-hash group, rows of its key per side, PostgreSQL ctid."""
    s: int
    b: int
    h: int
    key: tuple
    nh: int
    floats: tuple
    lc: int
    kl: int
    kr: int
    tid: str | None = None
    alone: bool = False  # no row of the other side can pair with it (read for the samples)
    open: bool = False  # its key has such a row: the key stays changed


def _float_class(v) -> object:
    """Values that only equal themselves (NULL, NaN, infinities) form their own class; finite is one."""
    if v is None:
        return None
    v = float(v)
    return "finite" if math.isfinite(v) else ("nan" if v != v else v)


def float_sort_key(v) -> tuple:
    return (v is None, v is not None and v != v, 0.0 if v is None or v != v else float(v))


def pair_floats(plan: _FloatPlan, rows: list[LooseRow], out: dict) -> tuple[list, list]:
    """Pair unmatched left and right rows whose exact columns agree and floats are within tolerance.

    Adjusts the counts in `out` for every pair and returns the picks (bucket, row hash[, ctid]) of
    the rows that stay unmatched, left and right. Candidates are found by the first float (sorted, searched within its tolerance),
    then every float is checked.
    """
    tols = [t for _c, t in plan.floats]
    t0 = tols[0]
    groups: dict[tuple, tuple[list, list]] = {}
    rest: list[LooseRow] = [r for r in rows if r.alone]
    for r in rows:
        if not r.alone:
            groups.setdefault((r.key, r.nh, _float_class(r.floats[0])), ([], []))[r.s].append(r)
    for (_k, _nh, cls), (ls, rs) in groups.items():
        if not ls or not rs:
            rest += ls + rs
            continue
        if cls == "finite":
            rs.sort(key=lambda r: float(r.floats[0]))
            firsts = [float(r.floats[0]) for r in rs]
        used = [False] * len(rs)
        for lrow in ls:
            if cls == "finite":
                a = float(lrow.floats[0])
                width = t0 * max(abs(a), FLOAT_ABS_FLOOR) / (1 - t0) * (1 + 1e-9)
                lo, hi = bisect.bisect_left(firsts, a - width), bisect.bisect_right(firsts, a + width)
            else:
                lo, hi = 0, len(rs)
            for j in range(lo, hi):
                if not used[j] and all(floats_close(x, y, t) for x, y, t in zip(lrow.floats, rs[j].floats, tols)):
                    used[j] = True
                    out["only_l"] -= 1
                    out["only_r"] -= 1
                    out["copies_r"] -= rs[j].lc > 0
                    break
            else:
                rest.append(lrow)
        rest += [r for j, r in enumerate(rs) if not used[j]]
    if plan.key:
        open_keys = {r.key for r in rest} | {r.key for r in rows if r.open}
        for key, (kl, kr) in {r.key: (r.kl, r.kr) for r in rows}.items():
            if key not in open_keys:  # every row of the key found its pair: the key is unchanged
                out["changed_rows"] -= kl == 1 and kr == 1
                out["changed_keys"] -= kl == kr
    rest.sort(key=lambda r: (r.b, r.h))
    picks = [[(r.b, r.h) if r.tid is None else (r.b, r.h, r.tid) for r in rest if r.s == s] for s in (0, 1)]
    return picks[0], picks[1]
