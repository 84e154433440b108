"""`Adapter`: the one class an engine adds, named by dbt's adapter type and registered once in
`registry.ADAPTERS`. It hands out the engine's roles: its dialect (the SQL pieces that differ and the
capabilities algorithms choose by), its sandboxes (an `Engine`: snapshot, clones, cleanup), what the
diff reads read-only (`location`, `target_columns`, `open_sides`, `errors`) and the lint's scratch
catalog. Each method imports the engine's modules when asked (a DuckDB run never imports psycopg2);
what an engine does not offer is declared here with the answer a user gets."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import ConfigError
from .dialect import Dialect

if TYPE_CHECKING:  # the diff reads this module without dbt
    from sqlglot import exp

    from .base import Connection, Engine
    from .scratch import Scratch, TargetProfile


class Adapter:
    name = ""  # dbt's adapter type (the profile's `type:`)

    @property
    def dialect(self) -> Dialect:
        return Dialect(self.name)

    # ------------------------------------------------------------------ game day
    def engine(self, target_output: dict, work_root: Path, run_id: str, *, attach: bool = False,
               confined: bool = False, statement_guard: bool = True, max_sandbox_size: int | None = None) -> "Engine":
        """The engine that makes this run's sandboxes. `attach`: a worker joining its parent's run;
        `confined`: a game day confined by privilege; `statement_guard`: the second line of confinement
        (the engine's own statement refusals); `max_sandbox_size`: a disk budget where the engine keeps one."""
        raise ConfigError(f"adapter '{self.name}' is not supported by the game day")

    # ------------------------------------------------------------------ diff (read-only)
    def reading(self) -> Any:
        """The engine's read-only module (`<engine>/reading.py`), imported when the diff or the lint
        reads the target; None where the engine offers none. Read through the four methods below."""
        return None

    def errors(self) -> tuple[type, ...]:
        """The error types of the engine's client (a failed query, not a bug of ours)."""
        reading = self.reading()
        return reading.errors() if reading is not None else ()

    def location(self, target: dict, catalog: str | None, text: str) -> str:
        """Where a side `[catalog.]schema.table` of the profile's target is (a file, a database)."""
        return self._reader().location(target, catalog, text)

    def target_columns(self, output: dict) -> list[tuple]:
        """(schema, table, column, type) of the target's relations, read only ([] where none can be read)."""
        reading = self.reading()
        return reading.target_columns(output) if reading is not None else []

    def open_sides(self, places: Sequence[tuple[str, str, str]], cond: Any,
                   target: dict, stack: ExitStack) -> list[tuple["Connection", "exp.Table"]]:
        """(connection, table) of each (location, schema, name), read-only, closed with `stack`."""
        return self._reader().open_sides(places, cond, target, stack)

    def _reader(self) -> Any:
        reading = self.reading()
        if reading is None:
            raise ConfigError(f"the diff does not read '{self.name}' targets")
        return reading

    # ------------------------------------------------------------------ lint
    def scratch(self, tp: "TargetProfile", work: Path, run_id: str, catalogs: list[str], manifest: Any,
                confined: bool = False) -> "Scratch":
        """The scratch catalog the lint compiles on. `confined`: it belongs to a role of its own where
        the engine has roles."""
        raise no_scratch(self.name)


def no_scratch(adapter_type: str) -> ConfigError:
    """The answer for a target the lint cannot compile on."""
    return ConfigError(f"lint supports duckdb and postgres targets; this target is '{adapter_type}'")
