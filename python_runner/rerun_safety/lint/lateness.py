"""`lint --with-data`: how late each timed source's rows arrive, observed in the user's target.

A source that declares when its rows were loaded beside when they happened (`loaded_at_field` beside
`config: {event_time: ...}`, or `meta: {rerun_safety: {loaded_at: ...}}`) is read with one aggregate
query, read-only (DuckDB: the file attached read-only; PostgreSQL: a READ ONLY transaction): the rows
with both times, the 99th percentile and the largest of load time minus event time. The rule
window-shorter-than-lateness compares an incremental window's reach on the event time with it.
Without --with-data nothing here runs and the lint opens no connection to the target.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from ..errors import ConfigError, first_line
from ..warehouse.dialects import dialect_for
from ..warehouse.engines import database_errors, reader_for
from ..warehouse.scratch import TargetProfile


@dataclass(frozen=True)
class Observed:
    """A source's lateness, as its rows in the target show it."""

    source: str  # source_name.table_name
    event: str
    load: str
    rows: int  # rows with both times
    p99: float | None  # seconds from event time to load time, 99th percentile
    latest: float | None  # the largest


def observe(manifest, load_times: dict[str, tuple[str, str, str]], wanted: set[str], target: TargetProfile,
            compiled_in: str | None = None) -> tuple[dict[str, Observed], list[str]]:
    """source unique_id -> what its rows show, for the `wanted` sources of `load_times`; and a note for
    each one that could not be read (named, with the engine's first line). `compiled_in`: the scratch
    database the manifest names where the profile's own database is meant."""
    out: dict[str, Observed] = {}
    notes: list[str] = []
    dialect = dialect_for(target.adapter_type)
    try:
        reader = reader_for(target.adapter_type)
    except ConfigError as err:
        return {}, [f"--with-data: {first_line(err)}"]
    errors = (ConfigError, *database_errors())
    with ExitStack() as stack:
        for uid in sorted(wanted & set(load_times)):
            name, event, load = load_times[uid]
            src = manifest.sources[uid]
            try:
                place = reader.location(target.output, _catalog(src, target, compiled_in), name)
                ((con, table),) = reader.open_sides([(place, str(src.schema), str(src.identifier))], None,
                                                    target.output, stack)
                sql = dialect.lateness_query(table, event, load)
                if sql is None:
                    notes.append(f"--with-data: {name} not read (no lateness query on {target.adapter_type})")
                    continue
                rows, p99, latest = con.fetchone(sql)
            except errors as err:
                notes.append(f"--with-data: {name} not read ({first_line(err)})")
                continue
            out[uid] = Observed(name, event, load, int(rows or 0), None if p99 is None else float(p99),
                                None if latest is None else float(latest))
    return out, notes


def _catalog(src, target: TargetProfile, compiled_in: str | None) -> str | None:
    """The source's database as the reader takes it: none where it is the target's own."""
    from pathlib import Path

    database = str(src.database or "")
    own = {str(target.output.get("dbname") or target.output.get("database") or "").lower(),
           Path(str(target.output.get("path") or "")).stem.lower(), str(compiled_in or "").lower()} - {""}
    return None if not database or database.lower() in own else database
