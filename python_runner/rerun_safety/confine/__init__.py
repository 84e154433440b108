"""Confinement by privilege: the work that runs a project's code (dbt's Jinja and hooks, Python models,
DuckDB, the lint's compiles) runs in a child process that first gives up, through the kernel (Landlock),
the right to write anywhere but the runner's own work folder. Every process it starts (scenario workers,
a shell a hook runs) inherits that. The command's own process, which never runs the project's code,
writes the reports afterwards.

The child is forked from a fork server that has the runner and dbt imported already (a fork costs
milliseconds, a fresh interpreter seconds); it takes the command's environment and folder with it."""
from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .landlock import LandlockError, abi_version, restrict_writes, unavailable_reason

# written by any process that runs: /dev/null, and POSIX semaphores of multiprocessing (the scenario
# workers' queues), which live in /dev/shm
SYSTEM_WRITABLE = (Path("/dev/null"), Path("/dev/shm"))
# imported once by the fork server (an adapter that is not installed is skipped): a child starts with them
# in memory. Importing them starts no thread, so forking the server is safe.
_PRELOAD = ["dbt.cli.main", "duckdb", "rerun_safety.cli", "rerun_safety.gameday.core", "rerun_safety.lint",
            "rerun_safety.report", "dbt.adapters.duckdb", "dbt.adapters.postgres", "rerun_safety.confine.warm"]
_CONTEXT: Any = None


@dataclass(frozen=True)
class Confinement:
    """How a run was confined, for its reports."""

    confined: bool
    writable: tuple[str, ...] = ()
    abi: int = 0

    def note(self, lint: bool = False) -> str:
        if self.confined:
            return (f"confined by the kernel (Linux Landlock ABI {self.abi}): the project's code could write only "
                    f"beneath {', '.join(self.writable)}")
        if lint:
            return ("UNCONFINED (--unconfined): the project's code compiled with this user's full rights (its "
                    "introspective queries ran in the scratch catalog)")
        return ("UNCONFINED (--unconfined): the project's code ran with this user's full rights; nothing but "
                "the statement guard kept its hooks and Python models from writing files outside the sandboxes")


def statement_guard_on() -> bool:
    """The statement guard (DuckDB's own file settings, the PostgreSQL statement refusals) is the second
    line. RERUN_SAFETY_STATEMENT_GUARD=off turns it off, for tests that prove the first line holds alone."""
    return os.environ.get("RERUN_SAFETY_STATEMENT_GUARD", "").lower() != "off"


def check_available(unconfined: bool) -> None:
    """Refuse (ConfigError) a run that cannot be confined here, unless the user said --unconfined."""
    if unconfined:
        return
    reason = unavailable_reason()
    if reason:
        from ..errors import ConfigError

        raise ConfigError(f"cannot confine the project's code: {reason}; pass --unconfined to run without that "
                          "protection (the reports will say so)")


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(_PRELOAD)
    return _CONTEXT


def prestart() -> None:
    """Start the fork server now, so that its imports (dbt's, ~3 s) overlap the command's own."""
    from multiprocessing import forkserver

    _context()
    forkserver.ensure_running()
    atexit.register(_stop_fork_server)


def _stop_fork_server() -> None:
    """At the command's end: its fork server would otherwise take its time to tear down an interpreter
    full of dbt (~0.7 s) while holding the command's output open; it has nothing left to do."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)  # (its default action: it ends at once)
        except OSError:
            pass


class ChildStopped(Exception):
    """The child ended by a stop signal: `name` is SIGINT or SIGTERM."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class ChildCrashed(Exception):
    """The child died without an answer (killed, or out of memory)."""


class _PipeProgress:
    """The child's progress (start, scenario, advance), sent to the command's process, which shows it."""

    def __init__(self, send):
        self._send = send

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self._send.send(("progress", name, args))


def run_confined(fn: Callable[..., Any], args: tuple, writable: list[Path], progress=None,
                 stop_name: Callable[[BaseException], str | None] | None = None) -> tuple[Any, Confinement]:
    """Run `fn(*args, confinement=..., progress=...)` in a confined child; return its result (pickled
    back) and how it was confined, or raise what it raised. The child's progress calls reach `progress`
    here. A stop signal to this process is passed on, and this process waits for the child's cleanup
    before it raises the interrupt itself. `stop_name`: the stop signal behind an exception in the child
    (None: not one), the command's own way to tell an interrupt from an error."""
    writable = [Path(p) for p in writable]
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_main, name="rerun-safety-confined",
                        args=(send, fn, args, dict(os.environ), os.getcwd(), [str(p) for p in writable],
                              os.getpid(), stop_name))
    child.start()
    send.close()
    try:
        try:
            answer = _receive(receive, child, progress)
        except BaseException as err:
            # a stop signal here: the child got SIGINT with us from a terminal, or gets it now; it removes
            # its sandboxes before it ends, and only then may this process say that they are removed
            sig = signal.SIGTERM if type(err).__name__ == "Terminated" else signal.SIGINT
            try:
                os.kill(child.pid, sig)
            except (ProcessLookupError, TypeError):
                pass
            late = _receive(receive, child, None)
            if late is not None and late[0] == "error":
                raise late[1] from None  # its cleanup failed: that, not "sandboxes removed", is the news
            raise
    finally:
        receive.close()
    if answer is None:
        raise ChildCrashed(f"the game day's confined process ended without an answer (exit code {child.exitcode})")
    kind, value, confinement = answer
    if kind == "ok":
        return value, confinement
    if kind == "stopped":
        raise ChildStopped(value)
    raise value


def _receive(receive, child, progress) -> tuple | None:
    """Relay the child's progress until its answer; None when it ended without one. Waits for its end."""
    answer = None
    while answer is None:
        if receive.poll(0.2):
            try:
                message = receive.recv()
            except EOFError:
                break
            if message[0] == "progress":
                if progress is not None:
                    getattr(progress, message[1])(*message[2])
            else:
                answer = message
        elif not child.is_alive() and not receive.poll(0):
            break
    child.join()
    return answer


def _watch_parent(parent_pid: int) -> None:
    """End this child like a SIGTERM when the command's process is gone (killed -9): its sandboxes are
    removed then, instead of a run going on that nobody waits for."""
    try:
        fd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        os._exit(1)  # gone already, before anything was created: nobody waits for this run
    except (OSError, AttributeError):  # no pidfd (Linux < 5.3): the next run's sweep cleans up after a kill
        return
    import select

    def wait() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="rerun-safety-parent-watch", daemon=True).start()


def _child_main(send, fn, args, environ: dict, cwd: str, writable: list[str], parent_pid: int,
                stop_name=None) -> None:
    import tempfile

    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    answer: tuple
    try:
        paths = [Path(p) for p in writable]
        abi = restrict_writes([*paths, *SYSTEM_WRITABLE])
        # temporary files of the libraries (and a JVM's) go where writing is allowed
        os.environ["TMPDIR"] = str(paths[0])
        tempfile.tempdir = None
        confinement = Confinement(True, tuple(str(p) for p in paths), abi)
        _watch_parent(parent_pid)
        answer = ("ok", fn(*args, confinement=confinement, progress=_PipeProgress(send)), confinement)
    except BaseException as err:  # noqa: BLE001 - everything goes back to the command's process
        answer = _answer_for(err, stop_name)
    try:
        send.send(answer)
    except Exception:  # noqa: BLE001 - a result or exception that does not pickle: its type and first line
        text = f"{type(answer[1]).__name__}: {answer[1]}"[:400]
        send.send(("error", RuntimeError(text), None))
    finally:
        send.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _answer_for(err: BaseException, stop_name) -> tuple:
    from ..errors import RerunSafetyError

    if isinstance(err, RerunSafetyError):  # also after a stop signal: a cleanup that failed is the news
        return ("error", err, None)
    name = stop_name(err) if stop_name is not None else (
        "SIGINT" if isinstance(err, KeyboardInterrupt) else None)
    if name:
        return ("stopped", name, None)
    if isinstance(err, LandlockError):
        from ..errors import ConfigError

        return ("error", ConfigError(f"cannot confine the project's code: {err.strerror or err}; pass "
                                     "--unconfined to run without that protection"), None)
    return ("error", err, None)


__all__ = ["Confinement", "ChildCrashed", "ChildStopped", "abi_version", "check_available", "run_confined",
           "statement_guard_on", "unavailable_reason"]
