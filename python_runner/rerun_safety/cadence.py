"""The run cadence: how often a scheduler runs the models (the game day's `--batch-size`, the lint's
`schedule`), as a fixed duration or a number of calendar months."""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from .errors import ConfigError

# a calendar unit's length in seconds, to compare windows with runs (a month as 30 days)
SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400, "month": 30 * 86400,
           "quarter": 91 * 86400, "year": 365 * 86400}



def duration(seconds: float) -> str:
    """A length in the largest unit (day, hour, minute) that divides it, as messages and SQL interval
    literals write it: '2 days', '1 hour', '90 seconds'."""
    for unit in ("day", "hour", "minute"):
        if seconds >= SECONDS[unit] and seconds % SECONDS[unit] == 0:
            n = int(seconds // SECONDS[unit])
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return "nothing" if not seconds else f"{seconds:g} seconds"


_UNITS = {"m": dt.timedelta(minutes=1), "h": dt.timedelta(hours=1), "d": dt.timedelta(days=1),
          "w": dt.timedelta(weeks=1)}
_NAMED = {"minute": "1m", "hour": "1h", "day": "1d", "week": "1w", "month": "1mo", "year": "1y"}
# Fixed-size batches are aligned to multiples of their size counted from a Monday at midnight,
# so days start at midnight, hours on the hour and weeks on Mondays.
_EPOCH = dt.datetime(1970, 1, 5)


@dataclass(frozen=True)
class Batch:
    """The simulated schedule's unit: a fixed duration, or a number of calendar months."""

    label: str
    delta: dt.timedelta | None = None
    months: int = 0

    @classmethod
    def parse(cls, text: str, option: str = "--batch-size") -> "Batch":
        raw = str(text).strip().lower()
        spec = _NAMED.get(raw, raw)
        m = re.fullmatch(r"(\d+)\s*(mo|y|m|h|d|w)", spec)
        if not m or int(m.group(1)) < 1:
            raise ConfigError(f"{option} '{text}' is not a batch: use hour, day, week, month, year, "
                              "or a duration such as 15m, 6h, 2d, 1w")
        n, unit = int(m.group(1)), m.group(2)
        label = raw if raw in _NAMED else f"{n}{unit}"
        if unit == "mo":
            return cls(label, months=n)
        if unit == "y":
            return cls(label, months=12 * n)
        return cls(label, delta=n * _UNITS[unit])

    @property
    def seconds(self) -> float:
        """Its length (a month as 30 days), to compare with a window's reach."""
        return self.months * SECONDS["month"] if self.months else self.delta.total_seconds()

    def floor(self, t: dt.datetime) -> dt.datetime:
        if self.months:
            index = (t.year * 12 + t.month - 1) // self.months * self.months
            return dt.datetime(index // 12, index % 12 + 1, 1)
        assert self.delta is not None
        return _EPOCH + ((t - _EPOCH) // self.delta) * self.delta

    def shift(self, t: dt.datetime, n: int) -> dt.datetime:
        """`t` moved by n batches (t is on a batch boundary)."""
        if self.months:
            index = t.year * 12 + t.month - 1 + n * self.months
            return t.replace(year=index // 12, month=index % 12 + 1)
        assert self.delta is not None
        return t + n * self.delta

    def count(self, lo: dt.datetime, hi: dt.datetime) -> int:
        """Whole batches from boundary lo to boundary hi."""
        if self.months:
            return ((hi.year - lo.year) * 12 + hi.month - lo.month) // self.months
        assert self.delta is not None
        return (hi - lo) // self.delta
