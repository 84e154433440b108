"""Regenerates the seed CSVs of this project (deterministic). Run: python seeds/_generate.py"""
import csv
import datetime as dt
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(name, header, rows):
    with open(HERE / name, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow(["" if v is None else v for v in r])


def dedup_rows():
    rows = [
        (1, "2026-01-01 10:00:00", "a", 1.5), (1, "2026-01-02 10:00:00", "b", 2.0), (1, "2026-01-02 10:00:00", "a", 3.0),
        (2, "2026-01-03 00:00:00", None, 5.0), (2, "2026-01-03 00:00:00", "c", 5.0), (2, "2026-01-03 00:00:00", "c", 4.0),
        (3, None, "z", 1.0), (3, "2026-01-01 00:00:00", "y", 2.0),
        (4, None, "a", 1.0), (4, None, "a", None),
        (None, "2026-01-05 00:00:00", "q", 7.0), (None, "2026-01-05 00:00:00", "q", 7.0), (None, "2026-01-04 00:00:00", "r", 8.0),
        (5, "2026-01-06 00:00:00", "x", 1.0), (5, "2026-01-06 00:00:00", "x", 1.0),
        (6, None, None, None),
        (7, "2026-01-07 00:00:00", "k", 10.0), (7, "2026-01-07 00:00:00", "k", 9.5), (7, "2026-01-07 00:00:00", "k", None),
    ]
    rng = random.Random(7)
    for key in range(10, 40):
        for _ in range(5):
            rows.append((key, "2026-01-10 00:00:00", rng.choice(["a", "b", None]), rng.choice([1.0, 2.25, None])))
    return rows


def dedup_expected(rows):
    # order_by desc NULLs last, then the other columns asc NULLs last.
    def sort_key(r):
        ts, status, amount = r[1], r[2], r[3]
        return ((ts is None), "" if ts is None else "".join(chr(255 - ord(c)) for c in ts),
                status is None, status or "", amount is None, amount or 0.0)
    best = {}
    for r in rows:
        if r[0] not in best or sort_key(r) < sort_key(best[r[0]]):
            best[r[0]] = r
    return sorted(best.values(), key=lambda r: (r[0] is None, r[0] or 0))


def events():
    rows = []
    start = dt.date(2026, 1, 1)
    event_id = 0
    for d in range(40):
        day = start + dt.timedelta(days=d)
        for i in range(20 + (d * 7) % 9):
            event_id += 1
            ts = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=37 * i + 5)
            rows.append((event_id, ts.strftime("%Y-%m-%d %H:%M:%S"), day.isoformat(), (event_id % 7) + 1))
    return rows


if __name__ == "__main__":
    d = dedup_rows()
    write("data_deduplicate.csv", ["id", "updated_at", "status", "amount"], d)
    write("data_deduplicate_expected.csv", ["id", "updated_at", "status", "amount"], dedup_expected(d))
    write("data_events.csv", ["event_id", "event_at", "event_date", "amount"], events())
    write("data_equal_multiset.csv", ["name", "qty"], [("x", 1), ("x", 1), ("y", 2), (None, None)])
    write("data_equal_multiset_expected.csv", ["name", "qty"], [("x", 1), ("y", 2), ("y", 2), (None, None)])
    write("data_unique_key.csv", ["a", "b", "label"],
          [(1, None, "p"), (1, None, "q"), (2, None, "r"), (3, 3, "s"), (3, 3, "t"), (4, 4, "u"), (5, 5, "v")])
