"""A thin wrapper around dbtRunner that separates success, handled failure and crash.

dbt is not thread-safe (global adapter factory): one invocation at a time per process.
`dbtRunner.invoke` never raises, so every call is checked here and turned into a `DbtResult`.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import threading
import time
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .errors import ConfigError, DbtInvocationError
from .warehouse.dialects import dialect_for

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")


# dbt flags a CI environment often sets that would change what a sandbox run selects, defers to, reads
# or writes: refs resolved to production relations (DBT_DEFER, DBT_STATE), a sampled or empty build, a
# microbatch window, a full refresh, another target folder. The runner's own --state is the one way in.
_SCOPE_VARIABLES = ("DBT_DEFER", "DBT_DEFER_STATE", "DBT_DEFER_TO_STATE", "DBT_FAVOR_STATE", "DBT_FAVOR_STATE_MODE",
                    "DBT_STATE", "DBT_ARTIFACT_STATE_PATH", "DBT_TARGET_PATH", "DBT_EMPTY", "DBT_SAMPLE",
                    "DBT_EVENT_TIME_START", "DBT_EVENT_TIME_END", "DBT_FULL_REFRESH", "DBT_RESOURCE_TYPES",
                    "DBT_EXCLUDE_RESOURCE_TYPES", "DBT_INDIRECT_SELECTION", "DBT_FAIL_FAST", "DBT_WARN_ERROR",
                    "DBT_WARN_ERROR_OPTIONS", "DBT_STORE_FAILURES", "DBT_CACHE_SELECTED_ONLY", "DBT_INTROSPECT",
                    "DBT_POPULATE_CACHE", "DBT_PARTIAL_PARSE_FILE_PATH", "DBT_INCLUDE_SAVED_QUERY",
                    "DBT_EXPORT_SAVED_QUERIES")


def scrub_dbt_environment(environ=None) -> list[str]:
    """Remove dbt's selection, deferral and output variables from this process's environment (its
    dbt invocations and the worker processes it starts read it); returns the names that were set."""
    environ = os.environ if environ is None else environ
    found = [name for name in _SCOPE_VARIABLES if name in environ]
    for name in found:
        del environ[name]
    return found


def scrub_note(names: list[str]) -> str | None:
    if not names:
        return None
    return (f"ignored dbt's environment variable{'s' if len(names) > 1 else ''} {', '.join(names)}: sandbox runs "
            "build everything they read and defer to nothing (--state is the runner's way to compare with a "
            "previous manifest)")


def _enable_dbt_caches() -> None:
    """Let dbt cache what it recomputes on every invocation for the same installed packages.

    dbt rescans every installed `dbt_*` module for plugins at each invocation (~20-40 ms) unless
    its caching switch is on; the switch also memoises a pure function of macro source text.
    Both are safe for a process that never installs packages between invocations.
    """
    try:
        from dbt_common.tests import enable_test_caching
    except ImportError:  # an older dbt-common: nothing to cache
        return
    enable_test_caching()


def trim_behavior_flags() -> None:
    """Undo what each dbt invocation leaks into dbt-adapters' module-level flag list.

    `BaseAdapter.__init__` hands the module-level DEFAULT_BASE_BEHAVIOR_FLAGS list to its
    `behavior` setter, which extends that very list with the adapter's own flags: every adapter
    dbt creates (one per invocation on PostgreSQL) leaves its flags behind for the rest of the
    process, and every later adapter renders all of them (an inspect.stack() each), so a long game
    day gets slower with every invocation. Adapters render their flags when they are created, so
    keeping the first entry of each name changes nothing for them.
    """
    try:
        from dbt.adapters.base.impl import DEFAULT_BASE_BEHAVIOR_FLAGS as flags
    except ImportError:  # another dbt-adapters layout: nothing to undo
        return
    seen: set = set()
    kept = []
    for flag in flags:
        name = flag.get("name") if isinstance(flag, dict) else id(flag)
        if name not in seen:
            seen.add(name)
            kept.append(flag)
    flags[:] = kept


@dataclass(frozen=True)
class NodeResult:
    unique_id: str
    status: str
    message: str
    execution_time: float
    failures: int | None = None


@dataclass(frozen=True)
class DbtResult:
    """Outcome of one dbt invocation: `success`, handled failure (nodes failed), or crash."""

    args: tuple[str, ...]
    success: bool
    crashed: bool
    error: str
    nodes: tuple[NodeResult, ...] = ()
    wall_time: float = 0.0
    raw: Any = field(default=None, compare=False, repr=False)
    # (node unique_id, clock reads simulated, clock reads left as they are) for SQL that read the clock
    clock_reads: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()

    def node(self, unique_id: str) -> NodeResult | None:
        for n in self.nodes:
            if n.unique_id == unique_id:
                return n
        return None

    @property
    def model_time(self) -> float:
        return sum(n.execution_time for n in self.nodes)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return " ".join(lines[:3])[:500] if lines else ""


def _exception_text(text: str) -> str:
    """dbt's exception for a node without its macro call stack ("> in macro ..." lines)."""
    lines = [ln.rstrip() for ln in str(text).strip().splitlines()
             if ln.strip() and not ln.strip().startswith("> ")]
    return "\n".join(lines)


# A sandbox database's name (PostgreSQL: one database per sandbox), as a database error quotes it
_SANDBOX_NAME = re.compile(r"rerun_safety_sbx_[0-9a-f]+_[A-Za-z0-9_]+")


def _whole_message(text: str, user_database: str | None = None) -> str:
    """dbt's whole message for a node (a failing model's database error names the line and the
    cause over several lines), without blank lines, and without dbt's "compiled code at <path>":
    that path is in a sandbox, removed when the game day ends. A sandbox database's name reads as
    the user's database, the name the same error would show in production (the caret under a line
    so changed no longer points right, and goes)."""
    out: list[str] = []
    renamed = False
    for ln in str(text).strip().splitlines():
        if not ln.strip() or ln.strip().startswith("compiled code at "):
            continue
        if renamed and set(ln.strip()) <= {"^"}:
            renamed = False
            continue
        renamed = bool(user_database) and bool(_SANDBOX_NAME.search(ln))
        out.append(_SANDBOX_NAME.sub(user_database, ln.rstrip()) if renamed and user_database else ln.rstrip())
    return "\n".join(out)


# What dbt says of a node whose cause it logged elsewhere: a microbatch model's result reads "ERROR"
# or "PARTIAL SUCCESS (1/3)", while each failing batch's cause is only in an exception event.
_BARE_MESSAGE = re.compile(r"(?:ERROR|PARTIAL SUCCESS.*)", re.IGNORECASE)


def _node_results(result: Any, causes: dict[str, str] | None = None,
                  user_database: str | None = None) -> tuple[NodeResult, ...]:
    out = []
    for r in getattr(result, "results", None) or ():
        node = getattr(r, "node", None)
        status = getattr(r, "status", "")
        uid = getattr(node, "unique_id", "") if node is not None else ""
        message = _whole_message(getattr(r, "message", "") or "", user_database)
        if (causes or {}).get(uid) and (not message or _BARE_MESSAGE.fullmatch(message)):
            cause = _whole_message(causes[uid], user_database)
            message = f"{message}: {cause}" if message else cause
        out.append(NodeResult(
            unique_id=uid,
            status=str(getattr(status, "value", status)),
            message=message,
            execution_time=float(getattr(r, "execution_time", 0.0) or 0.0),
            failures=getattr(r, "failures", None),
        ))
    return tuple(out)


# A statement of a replay that runs this many times longer than the longest statement of the
# reference build (and at least STATEMENT_FLOOR_S) is stopped: a relation that grows at every run (a
# snapshot or merge whose unique_key is not unique multiplies its rows) would otherwise hold the game
# day for hours. The model gets an error that says so.
STATEMENT_FACTOR = 30.0
STATEMENT_FLOOR_S = 30.0
STOPPED_MARKER = "rerun-safety stopped the statement"


@dataclass
class StatementWatch:
    """Times every statement of the invocations it watches; stops one past `limit_s` (None: never)."""
    limit_s: float | None = None
    longest_s: float = 0.0  # the longest statement seen (the reference build's sets the limit)

    def limit_from_reference(self) -> float:
        return max(STATEMENT_FLOOR_S, STATEMENT_FACTOR * self.longest_s)


def _interrupt(handle: Any) -> None:
    """Stop the statement running on a dbt connection's handle: DuckDB's interrupt(), psycopg2's
    cancel(). Spark's Thrift sessions have neither: nothing is stopped there."""
    cursor = getattr(handle, "cursor", None)
    for stop in (getattr(handle, "cancel", None), getattr(cursor() if callable(cursor) else None, "interrupt", None)):
        if callable(stop):
            try:
                stop()
                return
            except Exception:  # noqa: BLE001 - the statement ended meanwhile
                return


@contextlib.contextmanager
def watched_statements(watch: StatementWatch | None):
    if watch is None:
        yield
        return
    from dbt.adapters.sql.connections import SQLConnectionManager
    from dbt_common.exceptions import DbtRuntimeError

    original = SQLConnectionManager.add_query

    def add_query(self, sql, *args, **kwargs):
        fired = threading.Event()
        timer = None
        if watch.limit_s:
            try:
                conn = self.get_thread_connection()
            except Exception:  # noqa: BLE001 - no connection yet: dbt's own error follows
                conn = None

            def stop() -> None:
                fired.set()
                if conn is not None:
                    _interrupt(conn.handle)

            timer = threading.Timer(watch.limit_s, stop)
            timer.daemon = True
            timer.start()
        started = time.perf_counter()
        try:
            return original(self, sql, *args, **kwargs)
        except Exception as err:
            if fired.is_set():
                raise DbtRuntimeError(
                    f"{STOPPED_MARKER} after {watch.limit_s:.0f} s, {STATEMENT_FACTOR:.0f} times the longest "
                    f"statement of the reference build (at least {STATEMENT_FLOOR_S:.0f} s): a relation that "
                    "grows at every run does this (a snapshot or merge whose unique_key is not unique "
                    "multiplies its rows)") from err
            raise
        finally:
            if timer is not None:
                timer.cancel()
            watch.longest_s = max(watch.longest_s, time.perf_counter() - started)

    SQLConnectionManager.add_query = add_query
    try:
        yield
    finally:
        SQLConnectionManager.add_query = original


@contextlib.contextmanager
def held_statements(hold):
    """Within the block every statement dbt sends is preceded by what `hold.before(connection name, sql)`
    returns, sent on the same connection straight to the driver (the concurrent scenario's waits:
    warehouse/postgres/overlap.py); dbt names a model's connection after the model."""
    if hold is None:
        yield
        return
    from dbt.adapters.sql.connections import SQLConnectionManager

    original = SQLConnectionManager.add_query

    def add_query(self, sql, *args, **kwargs):
        conn = self.get_if_exists()
        before = hold.before(getattr(conn, "name", None) or "", sql) if conn is not None else []
        if before:
            with contextlib.closing(conn.handle.cursor()) as cursor:
                for statement in before:
                    cursor.execute(statement)
        return original(self, sql, *args, **kwargs)

    SQLConnectionManager.add_query = add_query
    try:
        yield
    finally:
        SQLConnectionManager.add_query = original


class DbtSession:
    """Runs dbt commands for one project, reusing one parsed manifest across invocations."""

    def __init__(self, project_dir: str | Path, profiles_dir: str | Path | None, target: str | None,
                 work_dir: str | Path, vars_yaml: str | None = None, quiet: bool = True):
        self.project_dir = str(Path(project_dir).resolve())
        self.profiles_dir = str(Path(profiles_dir).resolve()) if profiles_dir else None
        self.target = target
        self.work_dir = Path(work_dir)
        self.vars_yaml = vars_yaml
        self.quiet = quiet
        self.manifest = None
        self.invocations: list[DbtResult] = []
        self.user_database: str | None = None  # a sandbox database's name reads as this in messages
        _enable_dbt_caches()

    # dbt writes target/ and logs/ next to the project by default: keep both in our work dir so a
    # game day leaves the user's project folder as it was.
    def _common(self, profiles_dir: str | None) -> list[str]:
        args = ["--project-dir", self.project_dir,
                "--target-path", str(self.work_dir / "dbt_target"),
                "--log-path", str(self.work_dir / "dbt_logs")]
        if profiles_dir:
            args += ["--profiles-dir", profiles_dir]
        if self.target:
            args += ["--target", self.target]
        return args

    def invoke(self, command: Sequence[str], *, profiles_dir: str | None = None,
               vars_yaml: str | None = None, use_manifest: bool = True, clock: Any = None,
               dialect: str = "", rewrite_sql: Any = None, context: Any = None,
               watch: StatementWatch | None = None, hold: Any = None) -> DbtResult:
        """`clock`: a naive datetime the invocation runs at (see clock.py), in `dialect`'s SQL;
        `rewrite_sql`: a function every statement goes through (a sandbox's names); `context`: a
        context manager the invocation runs in (where a sandbox's connections go); `hold`: what its
        statements wait for (held_statements)."""
        from dbt.cli.main import dbtRunner

        from .clock import simulated

        args = [*command, *self._common(profiles_dir or self.profiles_dir)]
        if command[0] in ("run", "seed", "build", "compile"):
            args.append("--no-write-json")  # results come back as objects; skip ~0.3 s of JSON
        merged_vars = vars_yaml if vars_yaml is not None else self.vars_yaml
        if merged_vars:
            args += ["--vars", merged_vars]
        if self.quiet:
            args = ["--quiet", "--log-level-file", "none", *args] if command[0] != "ls" else [
                "--log-level", "none", "--log-level-file", "none", *args]
        if use_manifest and self.manifest is not None:
            reset_compiled_state(self.manifest)
        causes: dict[str, str] = {}  # node -> the first exception dbt logged for it (a batch's)

        def on_event(event) -> None:
            if event.info.name == "GenericExceptionOnRun":
                uid = getattr(getattr(event.data, "node_info", None), "unique_id", "")
                text = _exception_text(getattr(event.data, "exc", "") or "")
                if uid and text:
                    causes.setdefault(uid, text)

        runner = dbtRunner(manifest=self.manifest if use_manifest else None, callbacks=[on_event])
        started = time.perf_counter()
        buffer = io.StringIO()
        logging.getLogger("dbt").setLevel(logging.ERROR)
        reads: dict[str, tuple[set, set]] = {}

        def record(node: str, used: tuple[str, ...], kept: tuple[str, ...]) -> None:
            seen = reads.setdefault(node, (set(), set()))
            seen[0].update(used)
            seen[1].update(kept)

        try:
            with redirect_stdout(buffer), simulated(clock, dialect, record, rewrite_sql), \
                    watched_statements(watch), held_statements(hold), dialect_for(dialect).dbt_session(), \
                    context or contextlib.nullcontext():
                res = runner.invoke(args)
        finally:
            trim_behavior_flags()
        clock_reads = tuple((node, tuple(sorted(u)), tuple(sorted(k))) for node, (u, k) in sorted(reads.items()))
        wall = time.perf_counter() - started
        if isinstance(res.exception, KeyboardInterrupt):
            raise res.exception  # dbtRunner swallows Ctrl-C/SIGTERM: let the caller clean up
        nodes = _node_results(res.result, causes, self.user_database)
        if res.exception is not None:
            result = DbtResult(tuple(args), False, True, _first_line(str(res.exception)), nodes, wall, res.result,
                               clock_reads)
        elif not res.success:
            failed = [n for n in nodes if n.status in ("error", "fail", "runtime error")]
            msg = "; ".join(f"{n.unique_id}: {_first_line(n.message)}" for n in failed[:3]) or \
                _first_line(buffer.getvalue())
            result = DbtResult(tuple(args), False, False, msg, nodes, wall, res.result, clock_reads)
        else:
            result = DbtResult(tuple(args), True, False, "", nodes, wall, res.result, clock_reads)
        self.invocations.append(result)
        return result

    def parse(self):
        """Parse the project once; later invocations reuse the manifest. dbt's own partial-parse
        file from the user's last run is copied (not used in place: dbt writes it back) into our
        target folder, so only what changed since is parsed again; dbt checks it and parses in
        full when it does not fit (another dbt version, other vars, a changed profile)."""
        from .partial_parse import copy_partial_parse

        copy_partial_parse(Path(self.project_dir), self.work_dir / "dbt_target")
        res = self.invoke(["parse"], use_manifest=False)
        if not res.success or res.raw is None:
            raise parse_error(res.error or "dbt parse failed")
        self.manifest = res.raw
        return self.manifest


def reset_compiled_state(manifest: Any) -> None:
    """Put every node of a reused manifest back to its parsed state before an invocation.

    dbt compiles into the manifest's nodes: a model records that its ephemeral parents' CTEs were
    injected (`extra_ctes_injected`) and keeps them in `extra_ctes`. The next invocation renders the
    model again, sees the flag and skips the injection, so the SQL names `__dbt__cte__<parent>`
    with no CTE behind it. A fresh `dbt run` starts from parsed nodes; so does each of ours."""
    for node in manifest.nodes.values():
        if "extra_ctes_injected" not in getattr(node, "__dataclass_fields__", {}):
            continue  # seeds have nothing compiled (a read-only property)
        node.compiled = False
        node.compiled_code = None
        node.extra_ctes_injected = False
        node.extra_ctes = []
        node._pre_injected_sql = None


def selection_terms(select: Sequence[str], exclude: Sequence[str]) -> str:
    """The selection as the user wrote it, for messages: `--select a --exclude b`."""
    return " ".join([*(f"--select {s}" for s in select), *(f"--exclude {s}" for s in exclude)])


def selects_by_state(select: Sequence[str], state: str | None) -> bool:
    """A `state:` selection against a previous manifest: matching nothing is a pull request with
    nothing to check, not a mistake (errors.NothingToCheck)."""
    return state is not None and any("state:" in s for s in select)


def ls_args(select: Sequence[str], exclude: Sequence[str], state: str | None = None,
            resource_types: Sequence[str] = ("model",)) -> list[str]:
    """`dbt ls` of the nodes (models by default) a selection names, as JSON unique_ids; `state`:
    the folder of a previous manifest.json, for `state:modified+` and the like."""
    args = ["ls", *[a for t in resource_types for a in ("--resource-type", t)],
            "--output", "json", "--output-keys", "unique_id"]
    for s in select:
        args += ["--select", s]
    for s in exclude:
        args += ["--exclude", s]
    if state:
        if not (Path(state) / "manifest.json").is_file():
            raise ConfigError(f"--state {state}: no manifest.json there (point it at the target/ folder of "
                              "the run to compare with, e.g. production's artifacts)")
        args += ["--state", str(Path(state).resolve())]
    return args


def listed_ids(result: DbtResult) -> list[str]:
    """The unique_ids a `dbt ls` of ls_args() printed."""
    import json

    ids = []
    for line in result.raw or []:
        try:
            ids.append(json.loads(line)["unique_id"])
        except (ValueError, KeyError, TypeError):
            continue
    return ids


def dump_manifest(manifest: Any) -> bytes:
    """Pickle a parsed manifest for a worker process (cheaper than parsing again there).

    dbt's own `Manifest.__reduce_ex__` passes its private lookups positionally and misses one,
    which shifts them onto the wrong fields; pickle the public fields only and let the lookups
    rebuild themselves lazily on the other side.
    """
    import copyreg
    import dataclasses
    import pickle

    from dbt.contracts.graph.manifest import Manifest

    def reduce_manifest(m: Manifest):
        state = {f.name: getattr(m, f.name) for f in dataclasses.fields(m) if not f.name.startswith("_")}
        return _rebuild_manifest, (state,)

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[Manifest] = reduce_manifest
    pickler.dump(manifest)
    return buffer.getvalue()


def load_manifest(data: bytes) -> Any:
    import pickle

    return pickle.loads(data)


def _rebuild_manifest(state: dict) -> Any:
    from dbt.contracts.graph.manifest import Manifest

    return Manifest(**state)


def parse_error(message: str) -> Exception:
    lower = message.lower()
    if any(s in lower for s in ("profile", "could not find", "not found", "does not exist", "no dbt_project")):
        return ConfigError(f"dbt could not load the project: {message}")
    return DbtInvocationError(f"dbt parse failed: {message}")
