"""What the diff takes and returns: the sides, the result, the error."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass

from sqlglot import exp

from ..errors import DiffError  # noqa: F401 - the diff's error, re-exported
from ..warehouse.base import Connection


@dataclass(frozen=True)
class DiffResult:
    """`reference` is the left side, `current` the right side.

    extra_rows / missing_rows: rows only in current / only in reference, as multisets.
    Keyed: missing_keys / extra_keys are keys only in reference / only in current;
    duplicate_keys are keys with more than one row in current and more rows there than in
    reference (reference_duplicate_keys the other way round); changed_rows are keys with one row
    on each side whose rows differ; changed_keys are keys with the same number of rows on both
    sides whose rows differ.
    """
    reference_rows: int
    rows: int
    identical: bool
    extra_rows: int = 0
    missing_rows: int = 0
    extra_copies: int = 0  # extra rows that are exact copies of reference rows
    duplicate_keys: int = 0
    missing_keys: int = 0
    extra_keys: int = 0
    changed_rows: int = 0
    keyed: bool = False
    schema_message: str = ""
    differing_columns: tuple[str, ...] = ()
    sample: tuple[dict, ...] = ()
    partitions: tuple[tuple[str, int, int], ...] = ()
    partition_column: str | None = None
    reference_duplicate_keys: int = 0
    changed_keys: int = 0
    type_changes: tuple[str, ...] = ()
    bucketing: str = ""  # range | hash | rowhash | column | key (keyed.py)
    buckets: int = 0
    buckets_differing: int = 0
    differing_partitions: tuple[tuple[str, int, int], ...] = ()
    float_tolerance: float = 0.0  # the relative tolerance the float columns were compared with


@dataclass(frozen=True)
class Side:
    """One relation to compare: a connection, a table (optionally catalog-qualified), a filter."""
    con: Connection
    table: exp.Table
    where: exp.Expression | None = None
    display: str = ""

    @property
    def label(self) -> str:
        return self.display or ".".join(p.name for p in self.table.parts)


def jsonable(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    return str(value)
