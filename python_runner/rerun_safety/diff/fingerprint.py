"""A relation's multiset fingerprint: its row count and the exact sum of its row hashes.

Two relations with the same rows (in any order, duplicates counted) have the same fingerprint; the
game day keeps one of each reference output where it must later show that another build (a
verified fix's) produces the same outputs, without both relations in one warehouse. Floats are
rounded to the comparison's tolerance first (floats.round_float_sql), as the diff hashes them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sqlglot import exp

from .floats import check_float_tolerance, float_tolerance_of, round_float_sql
from .sql import quote_id


def fingerprint_sql(table: exp.Table, columns: Sequence[tuple[str, str]], dialect,
                    float_tolerance: float | None = None) -> str:
    """`select count(*), sum(row hash), sum(hash of each column)...` of `table` over these (column,
    data type) pairs, the columns in the order given."""
    tolerance = check_float_tolerance(float_tolerance)
    items = []
    for name, data_type in columns:
        q = quote_id(name, dialect)
        loose = float_tolerance_of(data_type, tolerance)
        if loose is not None:
            items.append((round_float_sql(q, str(dialect), loose), "double precision"))
        elif dialect.hashed_as_text(data_type.lower()):
            items.append((f"cast({q} as {dialect.text_type})", "text"))
        else:
            items.append((q, data_type.lower()))
    sums = [dialect.int_sum(dialect.typed_row_hash(items)),
            *(dialect.int_sum(dialect.typed_row_hash([item])) for item in items)]
    return f"select count(*), {', '.join(sums)} from {table.sql(dialect=str(dialect))}"


@dataclass(frozen=True)
class Fingerprint:
    rows: int
    whole: str  # the sum of the row hashes over every column
    columns: tuple[tuple[str, str], ...]  # (column, the sum of its values' hashes)

    def same(self, other: "Fingerprint", volatile: Sequence[str] = ()) -> bool:
        """The same rows; where `volatile` columns (nondeterministic in the first place) are named, the
        same count and the same multiset of values in each other column (a weaker check: those
        columns differ between any two builds)."""
        if self.rows != other.rows:
            return False
        if self.whole == other.whole and self.columns == other.columns:
            return True
        skip = {c.lower() for c in volatile}
        if not skip:
            return False
        mine = {c.lower(): v for c, v in self.columns if c.lower() not in skip}
        theirs = {c.lower(): v for c, v in other.columns if c.lower() not in skip}
        return mine == theirs

    def differing_columns(self, other: "Fingerprint") -> list[str]:
        theirs = dict(other.columns)
        return [c for c, v in self.columns if theirs.get(c) != v] + [c for c in theirs if c not in dict(self.columns)]


def fingerprint(con, table: exp.Table, columns: Sequence[tuple[str, str]],
                float_tolerance: float | None = None) -> Fingerprint:
    """The fingerprint of `table` over these (column, data type) pairs, read on `con`."""
    columns = sorted(columns, key=lambda c: c[0].lower())
    row = con.fetchone(fingerprint_sql(table, columns, con.dialect, float_tolerance))
    return Fingerprint(int(row[0]), str(row[1]), tuple((c, str(v)) for (c, _), v in zip(columns, row[2:])))


def unique_keys(con, table: exp.Table, keys: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Those of `keys` (tuples of columns) that hold `table` unique with no NULL in them, in the order
    given, leaving out a key that holds one found before: one aggregate per key over the groups that
    repeat or hold a NULL."""
    d, src = con.dialect, table.sql(dialect=str(con.dialect))
    out = []
    for key in keys:
        if any(set(found) <= set(key) for found in out):
            continue  # a unique key and more: unique too, and no better a key
        cols = ", ".join(quote_id(c, d) for c in key)
        nulls = " or ".join(f"{quote_id(c, d)} is null" for c in key)
        row = con.fetchone(f"select count(*) from (select 1 as one from {src} group by {cols} "
                           f"having count(*) > 1 or max(case when {nulls} then 1 else 0 end) = 1) repeated")
        if int(row[0]) == 0:
            out.append(tuple(key))
    return out
