"""The confined child: `python -m rerun_safety.confine.child JOB_FD ANSWER_FD`, exec'd fresh by the
command (never forked from a process that outlives it), in a session of its own with no terminal and
stdin from /dev/null, with an environment of BASE names only.

It imports dbt and warms its parser (no project code: the runner's own one-model projects) while the
command does its own start, then reads its one job from JOB_FD (written by the command; the child trusts
its parent, never the reverse), confines itself (namespaces, Landlock, seccomp: confine/__init__.py's
`confine`), and only then runs the job, whose progress and answer go back on ANSWER_FD as JSON lines
(wire.py). Nothing in this process listens; it ends with its job."""
from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback

# imported before the job arrives (an adapter that is not installed is skipped)
PRELOAD = ["dbt.cli.main", "duckdb", "rerun_safety.cli", "rerun_safety.gameday.core", "rerun_safety.lint",
           "rerun_safety.report", "dbt.adapters.duckdb", "dbt.adapters.postgres", "rerun_safety.confine.warm"]


class _Progress:
    """The job's progress (start, scenario, advance), sent to the command's process, which shows it."""

    def __init__(self, send):
        self._send = send

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self._send({"kind": "progress", "name": name, "args": tuple(args)})


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


def _error(err: BaseException, stop_name) -> dict:
    from ..errors import RerunSafetyError
    from .landlock import LandlockError

    if isinstance(err, RerunSafetyError):  # also after a stop signal: a cleanup that failed is the news
        return {"kind": "error", "class": type(err).__name__, "rerun": True, "message": str(err)}
    name = stop_name(err) if stop_name is not None else (
        "SIGINT" if isinstance(err, KeyboardInterrupt) else None)
    if name:
        return {"kind": "stopped", "name": name}
    if isinstance(err, LandlockError):
        return {"kind": "error", "class": "ConfigError", "rerun": True,
                "message": f"cannot confine the project's code: {err.strerror or err}; pass --unconfined to run "
                           "without that protection"}
    return {"kind": "error", "class": type(err).__name__, "rerun": False, "message": str(err)[:20000],
            "traceback": "".join(traceback.format_exception(err))[-20000:]}


def main(argv: list[str]) -> None:
    from . import wire

    job_fd, answer_fd = int(argv[1]), int(argv[2])
    answers = os.fdopen(answer_fd, "wb", buffering=0)
    lock = threading.Lock()

    def send(message: dict) -> None:
        data = wire.dumps(message)
        with lock:
            answers.write(data)

    import importlib

    from . import namespace

    try:  # first: before anything makes a POSIX semaphore
        namespace.enter()
        early = None
    except namespace.NamespaceError as err:
        early = err.strerror or str(err)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an adapter that is not installed; the job says what it misses
            pass
    try:
        with os.fdopen(job_fd, "rb") as f:
            job = pickle.load(f)
    except (EOFError, pickle.UnpicklingError):
        os._exit(0)  # the command ended without a job for this child
    os.environ.clear()
    os.environ.update(job["environ"])
    os.chdir(job["cwd"])
    stop_name = job.get("stop_name")
    try:
        from . import confine

        confinement = confine(job["rules"], early)
        _watch_parent(job["parent_pid"])
        value = job["fn"](*job["args"], confinement=confinement, progress=_Progress(send))
        answer = {"kind": "ok", "value": value, "confinement": confinement}
    except BaseException as err:  # noqa: BLE001 - everything goes back to the command's process
        answer = _error(err, stop_name)
    try:
        send(answer)
    except Exception as err:  # noqa: BLE001 - a result that does not encode: its type and first line
        send({"kind": "error", "class": type(err).__name__, "rerun": False, "message": str(err)[:400]})
    finally:
        answers.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
