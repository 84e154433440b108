"""The confined fork server and its jobs' processes: `python -m rerun_safety.confine.child --serve
CONTROL_FD ROOTS`, exec'd fresh by the command (prestart: never forked from a process that runs anything
else), in a session of its own with no terminal, stdin and output /dev/null, and an environment of BASE
names only.

It enters a user and mount namespace first thing, imports dbt and warms its parser (no project code: the
runner's own one-model projects), then confines itself before it forks anything (every mount read-only but
ROOTS, Landlock's signal and abstract-socket scopes, no raw or packet socket) and serves the one socket of a
pair its command made: a message carries four pipes (the job, its answers, its output, its exit status),
and the server forks one process for it, in a session of its own with a mount namespace and /dev/shm of
its own, the server's descriptors closed. That process reads its one job (written by the command; it
trusts its parent, never the reverse), confines itself to the job's rules (namespaces, Landlock, seccomp:
confine/__init__.py's `confine`) and only then runs it; progress and answer go back as JSON lines
(wire.py). Landlock keeps it from tracing or signalling the server (outside its domain). Nothing here
listens on a path, a port or a name; the server ends when the command's end of the socket closes.

`python -m rerun_safety.confine.child JOB_FD ANSWER_FD` runs one job in the exec'd process itself."""
from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback

# imported before the first job arrives (an adapter that is not installed is skipped)
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


def _run_job(job_fd: int, answer_fd: int, early: str | None) -> None:
    """Read the one job, confine this process to its rules, run it, answer, end."""
    from . import wire

    answers = os.fdopen(answer_fd, "wb", buffering=0)
    lock = threading.Lock()

    def send(message: dict) -> None:
        data = wire.dumps(message)
        with lock:
            answers.write(data)

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
    _remove_job_tmp()
    try:
        send(answer)
    except Exception as err:  # noqa: BLE001 - a result that does not encode: its type and first line
        send({"kind": "error", "class": type(err).__name__, "rerun": False, "message": str(err)[:400]})
    finally:
        answers.close()
    sys.stdout.flush()
    sys.stderr.flush()
    _end_group()


def _end_group() -> None:
    """End this job with every process of its group (it has a session of its own): what its engine left
    running (a Spark session's JVM, which outlives its Python gateway when something else holds its
    stdin) ends with it, not detached from everything."""
    try:
        if os.getpgid(0) == os.getpid():  # (a group of its own: never its caller's)
            os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


def _remove_job_tmp() -> None:
    """The job's own temporary folder (confine() made it), with what the libraries left in it."""
    import shutil

    from . import JOB_TMP_PREFIX

    folder = os.environ.get("TMPDIR", "")
    if os.path.basename(folder).startswith(JOB_TMP_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def _confine_server(roots: list[str]) -> None:
    """The server's own confinement, before it forks anything: every mount read-only but `roots` (and its
    /dev/shm), Landlock's scopes (no signal to, no abstract socket of, a process outside its domain: the
    command's included), no raw or packet socket. It handles no Landlock file right: a process with one may
    not mount, and each job's process makes mounts of its own (namespace.nest, lock_down) before its
    Landlock layer."""
    from pathlib import Path

    from . import landlock, namespace, seccomp

    namespace.lock_down([Path(r) for r in roots], network=True)
    if landlock.abi_version() >= 6:
        landlock.restrict_scopes()
    if seccomp.available():
        seccomp.restrict_sockets(deny_unix=False)


def _fork_job(fds: list[int], server_fds: list[int], early: str | None) -> int:
    """Fork the process of one job: a session of its own, stdin /dev/null, stdout and stderr the command's
    pipe; the server's own descriptors (its socket, the other jobs' status pipes) closed before its job is
    read. (What the imports opened stays open, as in a process that ran them itself.)"""
    job_fd, answer_fd, output_fd, status_fd = fds
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        for fd in (null, output_fd, status_fd, *server_fds):
            os.close(fd)
        if early is None:
            from . import namespace

            try:
                namespace.nest()
            except namespace.NamespaceError as err:
                early = err.strerror or str(err)
        _run_job(job_fd, answer_fd, early)
    finally:
        os._exit(70)


def serve(control_fd: int, roots: list[str]) -> None:
    """The fork server: one job process per message on `control_fd` (four descriptors: the job's pipe,
    the answers', the output's and the exit status's), its pid the reply; ends when the command's end of
    the socket closes."""
    import select
    import socket

    early = _start()
    try:
        _confine_server(roots)
    except Exception as err:  # noqa: BLE001 - each job's process says what it could not confine
        early = early or str(getattr(err, "strerror", None) or err)
    control = socket.socket(fileno=control_fd)
    running: dict[int, tuple[int, int]] = {}  # pidfd -> (pid, the status pipe)
    while True:
        ready, _, _ = select.select([control, *running], [], [])
        for fd in ready:
            if fd in running:
                pid, status = running.pop(fd)
                _, code = os.waitpid(pid, 0)
                try:  # what the job left in its group (killed -9, it could not end them itself)
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    os.write(status, str(os.waitstatus_to_exitcode(code)).encode())
                except OSError:
                    pass
                os.close(status)
                os.close(fd)
        if control not in ready:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, 64, 4)
        except OSError:
            message, fds = b"", []
        if not message:
            break  # the command ended
        if message != b"job" or len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        pid = _fork_job(fds, [control.fileno(), *running, *(status for _, status in running.values())], early)
        for fd in fds[:3]:
            os.close(fd)
        try:
            running[os.pidfd_open(pid)] = (pid, fds[3])
        except OSError:
            os.close(fds[3])
        control.send(str(pid).encode())
    os._exit(0)


def _start() -> str | None:
    """The namespaces (first: before anything makes a POSIX semaphore), then the imports and warm-up;
    why the namespaces were refused, or None."""
    import importlib

    from . import namespace

    try:
        namespace.enter()
        early = None
    except namespace.NamespaceError as err:
        early = err.strerror or str(err)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an adapter that is not installed; the job says what it misses
            pass
    return early


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--serve"]:
        import json

        serve(int(argv[2]), json.loads(argv[3]))
    else:  # one job, in this process
        job_fd, answer_fd = int(argv[1]), int(argv[2])
        _run_job(job_fd, answer_fd, _start())


if __name__ == "__main__":
    main(sys.argv)
