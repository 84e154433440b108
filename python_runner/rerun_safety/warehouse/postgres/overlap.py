"""Two runs of one batch at once (the concurrent scenario) on PostgreSQL, overlapping the same way every time.

The runner holds two advisory locks per model of the run (a two-key lock: a space, the model's number),
on a connection of its own to the sandbox database:
- the first run, before each COMMIT of a model's transaction that wrote, waits for the model's `held`
  lock: its writes stay uncommitted;
- the second run, before the first statement of each model, waits for the model's `start` lock.
`Coordinator` watches pg_locks: once the first run waits with the model's writes done and the second
waits at that model's start, it lets the second start; once the second run of the model waits for
anything else (the first run's row locks, a lock a serialising hook takes, the next model's start) or
has ended, it lets the first commit. Each wait ends after `timeout` seconds whatever happens, so a
model that never reaches that point (it failed in one run, an autocommit profile commits nothing) never
holds the game day: it is not overlapped, and the scenario says so.
The locks live in the sandbox database only (advisory locks are per database); the keys are numbers.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

from .connection import PgConnection

START, HELD = 52530001, 52530002  # the two lock spaces (int4)
_LEADING = re.compile(r"\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*", re.S)  # blanks and comments before a statement
_WRITES = ("insert", "delete", "update", "merge", "create", "alter", "drop", "truncate", "copy")


def _wait(space: int, number: int) -> list[str]:
    return [f"select pg_advisory_lock_shared({space}, {number})", f"select pg_advisory_unlock_shared({space}, {number})"]


@dataclass
class Hold:
    """What one of the two runs does at its statements (dbt_invoke.held_statements calls it with the
    name of the connection, which dbt names after the model it runs). `first`: wait before a COMMIT
    that follows a write; else wait before the first statement of each model."""

    first: bool
    index: dict[str, int]  # model unique_id -> its number in the lock keys
    _wrote: set = field(default_factory=set)
    _done: set = field(default_factory=set)

    def before(self, name: str, sql: str) -> list[str]:
        number = self.index.get(name)
        if number is None or name in self._done:
            return []
        words = sql[_LEADING.match(sql).end():].split(None, 1)
        word = words[0].lower().rstrip(";") if words else ""
        if not self.first:
            self._done.add(name)
            return _wait(START, number)
        if word == "commit" and name in self._wrote:
            self._done.add(name)
            return _wait(HELD, number)
        if word in _WRITES:
            self._wrote.add(name)
        return []


_WAITS = ("select l.pid, l.locktype, coalesce(l.classid::int8, -1), coalesce(l.objid::int8, -1), l.objsubid "
          "from pg_locks l join pg_stat_activity a on a.pid = l.pid "
          "where not l.granted and a.datname = current_database() and l.pid <> pg_backend_pid()")


class Coordinator:
    """The runner's side of the overlap (see the module's docstring); a context manager around the two runs.
    `overlapped`: the models whose second run started while the first held its writes uncommitted;
    `alone`: model -> why it was not overlapped."""

    def __init__(self, params: dict, dbname: str, index: dict[str, int], timeout: float = 120.0,
                 poll: float = 0.05):
        self.index, self.timeout, self.poll = dict(index), timeout, poll
        self.names = {n: u for u, n in self.index.items()}
        self.con = PgConnection(params, dbname)
        self.second_ended = lambda: False
        self.overlapped: set[str] = set()
        self.alone: dict[str, str] = {}
        self._state = {n: "held" for n in self.names}  # held -> started -> done (or alone)
        self._since: dict[int, float] = {}
        self._bpid: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def __enter__(self) -> "Coordinator":
        if self.names:
            self.con.execute("select " + ", ".join(f"pg_advisory_lock({s}, {n})" for n in self.names
                                                    for s in (START, HELD)))
        self._thread = threading.Thread(target=self._watch, name="rerun-safety overlap", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release_all()
        self.con.close()

    def release_all(self) -> None:
        """The first run has ended: nothing is held any more (the second run goes on alone)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        states = dict(self._state)  # as this look at the locks found them
        for n, state in states.items():
            if state == "held":
                self._unlock(START, n)
                self._unlock(HELD, n)
                self.alone.setdefault(self.names[n], "its first run never held its writes open for the second")
            elif state == "started":
                self._unlock(HELD, n)
                self.overlapped.add(self.names[n])
            self._state[n] = "done"

    def _unlock(self, space: int, number: int) -> None:
        self.con.execute(f"select pg_advisory_unlock({space}, {number})")

    def _watch(self) -> None:
        try:
            while not self._stop.is_set():
                self._step(time.monotonic())
                self._stop.wait(self.poll)
        except BaseException as err:  # noqa: BLE001 - told by the caller; the runs go on unheld
            self.error = err
            for n, state in self._state.items():  # never a run left waiting for a watch that ended
                if state != "done":
                    self.alone.setdefault(self.names[n], f"the overlap's watch failed: {err}")
                    self._state[n] = "done"
            try:
                self.con.execute("select pg_advisory_unlock_all()")
            except Exception:  # noqa: BLE001 - a connection gone takes its locks along
                pass

    def _step(self, now: float) -> None:
        waits = self.con.fetchall(_WAITS)
        first_at = {int(o) for _p, t, c, o, s in waits if t == "advisory" and c == HELD and s == 2}
        second_at = {int(o): int(p) for p, t, c, o, s in waits if t == "advisory" and c == START and s == 2}
        for n in first_at:
            self._since.setdefault(n, now)
        states = dict(self._state)  # as this look at the locks found them
        for n, state in states.items():
            if state == "held":
                if n in first_at and n in second_at:  # both runs at this model: the second may start
                    self._unlock(START, n)
                    self._state[n], self._since[n], self._bpid[n] = "started", now, second_at[n]
                elif n in second_at and any(states[z] == "held" for z in first_at if z != n):
                    # the second run is at a model the first ran past without holding (it failed there):
                    # the first waits at a later one for the second to get there
                    self._unlock(START, n)
                    self._unlock(HELD, n)
                    self._state[n] = "done"
                    self.alone[self.names[n]] = "its first run did not hold its writes open there (it failed or wrote nothing)"
                elif n in first_at and (now - self._since[n] > self.timeout or self.second_ended()):
                    self._unlock(START, n)
                    self._unlock(HELD, n)
                    self._state[n] = "done"
                    self.alone[self.names[n]] = "its second run never reached it while the first held its writes"
            elif state == "started":
                pid = self._bpid[n]
                moved = any(p == pid for p, _t, _c, _o, _s in waits) or any(m != n for m in second_at)
                if moved or self.second_ended() or now - self._since[n] > self.timeout:
                    self._unlock(HELD, n)
                    self._state[n] = "done"
                    self.overlapped.add(self.names[n])
