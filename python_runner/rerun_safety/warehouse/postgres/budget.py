"""The disk budget of a PostgreSQL game day: its sandboxes share the production server's disk, so a hook
that writes without end (or a snapshot larger than the free space) must not fill it.

- Before the snapshot: its size in the user's database (pg_total_relation_size of the sources) must fit
  under `--max-sandbox-size` and, where the role can see the server's free space (`data_directory`, read by
  a superuser or a member of pg_read_all_settings, on a server of this machine), under that free space
  less a margin; else the game day is refused in one line, before it copies anything.
- While it runs, a watchdog (a thread with a connection of its own) reads the size of each of the run's
  sandbox databases twice a second. A sandbox past `--max-sandbox-size`, or all of them together past the
  free space less the margin, trips it: the run's sandboxes take no new session, every session in them is
  ended, no sandbox is created after that (workers read the trip from the run folder), and
  the game day ends with one line naming the sandbox and its size (exit 2).
- `temp_file_limit` (a superuser's setting) is set for the run's role where the profile's role may."""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError

DEFAULT_MAX_SANDBOX_SIZE = 10 * 1000 ** 3
MIN_SIZE = 32 * 1000 ** 2
TRIPPED_FILE = "disk_budget_tripped"
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2, "mib": 1024 ** 2,
          "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3, "t": 1000 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4}


def parse_size(text: str | int | None) -> int:
    """`--max-sandbox-size`: a number of bytes with an optional unit (500MB, 10GB, 2GiB)."""
    if text is None or text == "":
        return DEFAULT_MAX_SANDBOX_SIZE
    if isinstance(text, int):
        return text
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = found.group(2).lower() if found else ""
    if not found or unit not in _UNITS or float(found.group(1)) * _UNITS[unit] < MIN_SIZE:
        raise ConfigError(f"--max-sandbox-size '{text}' is not a size of at least 32 MB (an empty PostgreSQL database "
                          "takes about 8 MB): use e.g. 500MB, 10GB, 2GiB")
    return int(float(found.group(1)) * _UNITS[unit])


def shown(size: float) -> str:
    for unit, factor in (("GB", 1000 ** 3), ("MB", 1000 ** 2), ("kB", 1000)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{int(size)} B"


def margin(total: int) -> int:
    """What the game day leaves free on the server's disk: 10 % of it, at least 1 GB."""
    return max(total // 10, 1000 ** 3)


@dataclass(frozen=True)
class FreeSpace:
    """The server's disk as this machine sees it (None where it cannot: `why`)."""

    free: int | None
    total: int | None
    where: str
    why: str = ""

    def budget(self) -> int | None:
        """What all the run's sandboxes together may take."""
        return None if self.free is None or self.total is None else max(self.free - margin(self.total), 0)


def free_space(admin, output: dict) -> FreeSpace:
    """The free space of the server's data directory, where the profile's role may read the directory's
    name and the server runs on this machine (its files there)."""
    try:
        row = admin.fetchone("select current_setting('data_directory', true), "
                             "pg_has_role('pg_read_all_settings', 'member') or "
                             "(select rolsuper from pg_roles where rolname = current_user)")
    except Exception as err:  # noqa: BLE001 - told as a gap
        return FreeSpace(None, None, "", f"cannot read data_directory ({str(err).strip().splitlines()[0]})")
    directory, may = row if row else (None, False)
    if not may or not directory:
        return FreeSpace(None, None, "", "the profile's role may not read the server's data_directory (a superuser "
                                         "or a member of pg_read_all_settings may)")
    host = str(output.get("host") or "")
    if host and not host.startswith("/") and host not in ("localhost", "127.0.0.1", "::1"):
        return FreeSpace(None, None, directory, f"the server runs on {host}, not on this machine")
    if not os.path.isdir(directory):
        return FreeSpace(None, None, directory, f"its data directory {directory} is not on this machine's files")
    try:
        st = os.statvfs(directory)
    except OSError as err:  # (a folder of the server's user: this user may not look inside)
        return FreeSpace(None, None, directory, f"cannot read the free space of {directory} ({err.strerror})")
    return FreeSpace(st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize, directory)


def check_snapshot(needed: int, max_size: int, space: FreeSpace) -> None:
    """Refuse (ConfigError) a snapshot of `needed` bytes that does not fit."""
    if needed > max_size:
        raise ConfigError(f"the sources take {shown(needed)} in the target database, more than --max-sandbox-size "
                          f"{shown(max_size)} allows a sandbox: raise it (each sandbox holds a copy of them)")
    budget = space.budget()
    if budget is not None and needed > budget:
        raise ConfigError(f"the sources' copy ({shown(needed)}) would not fit in the PostgreSQL server's free space: "
                          f"{shown(space.free)} free on {space.where}, of which the game day leaves "
                          f"{shown(margin(space.total))} free; free space there, or select fewer models")


def tripped(run_dir: Path) -> str | None:
    """The message of a tripped budget (any process of the run may read it), or None."""
    try:
        return (run_dir / TRIPPED_FILE).read_text() or None
    except OSError:
        return None


class Watchdog:
    """The thread that reads the run's sandbox sizes and trips the budget."""

    INTERVAL = 0.5

    def __init__(self, connect, prefix: str, run_dir: Path, max_size: int, total: int | None):
        self._connect, self.prefix, self.run_dir = connect, prefix, run_dir
        self.max_size, self.total = max_size, total
        self._stop = threading.Event()
        self.largest = 0
        self._thread = threading.Thread(target=self._watch, name="rerun-safety-disk-budget", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        con = None
        try:
            con = self._connect()
            while not self._stop.wait(self.INTERVAL):
                with con.raw.cursor() as cur:
                    cur.execute("select datname, pg_database_size(oid) from pg_database "
                                "where starts_with(datname, %s)", [self.prefix])
                    rows = cur.fetchall()
                sizes = {name: int(size) for name, size in rows}
                if not sizes:
                    continue
                self.largest = max(self.largest, *sizes.values())
                name, size = max(sizes.items(), key=lambda kv: kv[1])
                if size > self.max_size:
                    self._trip(con, f"the sandbox database {name} grew to {shown(size)}, past --max-sandbox-size "
                                    f"{shown(self.max_size)}: the game day stopped its sessions before the "
                                    "server's disk filled (a hook or model that writes that much? else raise "
                                    "--max-sandbox-size)")
                    return
                if self.total is not None and sum(sizes.values()) > self.total:
                    self._trip(con, f"the game day's sandboxes grew to {shown(sum(sizes.values()))} together, past "
                                    f"the PostgreSQL server's free space less a margin ({shown(self.total)}): "
                                    "the game day stopped their sessions before the disk filled")
                    return
        except Exception:  # noqa: BLE001 - a watchdog that cannot read sizes stops; the run goes on
            return
        finally:
            if con is not None:
                try:
                    con.close()
                except Exception:  # noqa: BLE001
                    pass

    def _trip(self, con, message: str) -> None:
        from psycopg2 import sql as pgsql

        part = self.run_dir / f".{TRIPPED_FILE}.{os.getpid()}"
        part.write_text(message)
        os.replace(part, self.run_dir / TRIPPED_FILE)
        with con.raw.cursor() as cur:
            cur.execute("select datname from pg_database where starts_with(datname, %s)", [self.prefix])
            for (name,) in cur.fetchall():
                try:  # no new session in the run's sandboxes (another run's, of the same role, go on)
                    cur.execute(pgsql.SQL("alter database {} with allow_connections false").format(
                        pgsql.Identifier(name)))
                except Exception:  # noqa: BLE001 - its sessions are ended below all the same
                    pass
            cur.execute("select pg_terminate_backend(pid) from pg_stat_activity where starts_with(datname, %s) "
                        "and pid <> pg_backend_pid()", [self.prefix])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)



def start(engine, sources) -> Watchdog:
    """A PostgresEngine's budget before its snapshot: the sources' size checked (check_snapshot), the
    budget in its notes, temp_file_limit on the run's own role, the watchdog started."""
    import psycopg2
    from psycopg2 import sql as pgsql

    from ..base import PREFIX
    from .connection import PgConnection

    local = [src for src in sources if not src.database or src.database == engine.user_db]
    user = PgConnection(engine.params, engine.user_db, read_only=True)
    try:
        with user.raw.cursor() as cur:
            cur.execute("select coalesce(sum(pg_total_relation_size(c.oid)), 0) from pg_class c where c.oid in "
                        "(select c2.oid from pg_class c2 join pg_namespace n on n.oid = c2.relnamespace "
                        "join unnest(%s::text[], %s::text[]) as s(nsp, rel) on n.nspname = s.nsp and "
                        "c2.relname = s.rel)", [[src.schema for src in local], [src.identifier for src in local]])
            needed = int(cur.fetchone()[0])
    finally:
        user.close()
    max_size = engine.max_sandbox_size
    space = free_space(engine.admin, engine.target_output)
    check_snapshot(needed, max_size, space)
    limit = f"each sandbox at most {shown(max_size)} (--max-sandbox-size)"
    if space.budget() is not None:
        # (no numbers of the free space: the same run twice gives the same report)
        engine.notes.append(f"disk budget: {limit}, all of them together at most the server's free space less a "
                            "margin (10 %, at least 1 GB)")
    else:
        engine.notes.append(f"disk budget: {limit}; the server's free space is not watched: {space.why}")
    if engine.role is not None and engine.own_role:  # (a team's role is theirs to set)
        try:
            with engine.admin.raw.cursor() as cur:
                cur.execute(pgsql.SQL("alter role {} set temp_file_limit = {}").format(
                    pgsql.Identifier(engine.role[0]), pgsql.Literal(f"{max(max_size // 1024, 1)}kB")))
        except psycopg2.Error:  # a superuser's setting: the watchdog alone bounds the run
            engine.notes.append("disk budget: temp_file_limit not set for the run's role (a superuser's setting); "
                                "the sandboxes' size is watched all the same")
    return Watchdog(lambda: PgConnection(engine.params, engine._admin_db), f"{PREFIX}{engine.run_id}_",
                    engine.run_dir, max_size, space.budget())
