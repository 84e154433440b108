"""Confinement by privilege: the work that runs a project's code (dbt's Jinja and hooks, Python models,
DuckDB, the lint's compiles) runs in a child process that the command exec's fresh (child.py), in a
session of its own without a terminal, with only the environment the profile and dbt need (environ.py).
Before any project code runs it gives up, through the kernel:
- writing anywhere but the runner's own work folder (Landlock), and changing any file's metadata outside
  it (a user and mount namespace with every other mount read-only: namespace.py); `/dev/shm` of its own;
- device ioctls (a terminal's TIOCSTI), TCP but the warehouse's port, abstract Unix sockets and signals to
  processes outside its domain (Landlock ABI 4-6); the whole network where the engine needs none (a
  network namespace: DuckDB);
- Unix sockets where the engine needs none, UDP where it resolves no name (PostgreSQL: the command
  resolves the host), raw and packet sockets (seccomp.py).
Every process it starts (scenario workers, a shell a hook runs) inherits all of it. Its only channel back
is JSON lines (wire.py), every string of them scrubbed of the run's secrets (secrets.Scrubber) before the
command reads it; the command's own process, which never runs the project's code, writes the reports.
What this kernel cannot close is named in the run's confinement note, in every report."""
from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .landlock import LandlockError, abi_version, restrict, restrict_writes, unavailable_reason

# written by any process that runs: /dev/null, and POSIX semaphores of multiprocessing (the scenario
# workers' queues), which live in /dev/shm (a tmpfs of the confined namespace's own)
SYSTEM_WRITABLE = (Path("/dev/null"), Path("/dev/shm"))
JOB_TMP_PREFIX = ".job_tmp_"


@dataclass(frozen=True)
class Rules:
    """What a confined child may still do: write beneath `writable`; connect to `tcp_ports` (None: TCP
    left open); keep the machine's network (`network`); open Unix sockets (`unix_sockets`); open UDP
    sockets (`udp`: a name to resolve; PostgreSQL's host is resolved by the command, PGHOSTADDR); without
    the network, keep a loopback of its own (`loopback`)."""

    writable: tuple[str, ...]
    tcp_ports: tuple[int, ...] | None = ()
    network: bool = True
    unix_sockets: bool = True
    udp: bool = True
    loopback: bool = False  # without `network`: a 127.0.0.1 of its own (a Spark session's JVM and gateway)


@dataclass(frozen=True)
class Confinement:
    """How a run was confined, for its reports; `open`: what this kernel or engine left unconfined."""

    confined: bool
    writable: tuple[str, ...] = ()
    abi: int = 0
    open: tuple[str, ...] = ()

    def note(self, lint: bool = False) -> str:
        if self.confined:
            text = (f"confined by the kernel (Linux Landlock ABI {self.abi}, namespaces, seccomp): the project's "
                    f"code could write only beneath {', '.join(self.writable)}")
            return text + (f"; NOT confined here: {'; '.join(self.open)}" if self.open else "")
        if lint:
            return ("UNCONFINED (--unconfined): the project's code compiled with this user's full rights (its "
                    "introspective queries ran in the scratch catalog)")
        return ("UNCONFINED (--unconfined): the project's code ran with this user's full rights; nothing but "
                "the statement guard kept its hooks and Python models from writing files outside the sandboxes")


def _register() -> None:
    from .wire import register

    register(Confinement)


_register()


def confine(rules: Rules, early: str | None = None) -> Confinement:
    """Confine this process (before any project code): namespaces, Landlock, seccomp. `early`: why
    namespace.enter() failed at the child's start (None: it entered them)."""
    import tempfile

    from . import namespace, seccomp

    paths = [Path(p) for p in rules.writable]
    gaps = []
    try:
        if early is not None:
            raise namespace.NamespaceError(0, early)
        namespace.lock_down(paths, network=rules.network, loopback=rules.loopback)
    except namespace.NamespaceError as err:
        gaps.append(f"file metadata outside the work root (modes, owners, times, flags), /dev/shm"
                    f"{'' if rules.network else ' and the network'} ({err.strerror})")
    if rules.loopback and not rules.network:
        # the engine's processes bind where they reach each other: its own loopback (Spark's driver)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    abi = restrict([*paths, *SYSTEM_WRITABLE], tcp_ports=rules.tcp_ports)
    if abi < 5:
        gaps.append(f"device ioctls such as a terminal's (Landlock ABI {abi} < 5)")
    if rules.tcp_ports is None and rules.network:
        gaps.append("TCP (the engine's own processes choose their ports)")
    elif abi < 4 and rules.network:
        gaps.append(f"TCP (Landlock ABI {abi} < 4)")
    if abi < 6:
        gaps.append(f"signals to other processes and abstract Unix sockets (Landlock ABI {abi} < 6)")
    if rules.network and rules.udp:
        gaps.append("UDP")
    if seccomp.available():
        seccomp.restrict_sockets(deny_unix=not rules.unix_sockets, deny_udp=rules.network and not rules.udp)
        if rules.unix_sockets:
            gaps.append("connections to Unix sockets by path (the engine opens one)")
    else:
        gaps.append("Unix, raw and packet sockets (no seccomp filter for this architecture)")
    # temporary files of the libraries (and a JVM's) go where writing is allowed: a folder of the job's own
    # there, removed at its end (a failed Python model's file that dbt leaves is not left to the user)
    try:
        os.environ["TMPDIR"] = tempfile.mkdtemp(prefix=f"{JOB_TMP_PREFIX}{os.getpid()}_", dir=str(paths[0]))
    except OSError:
        os.environ["TMPDIR"] = str(paths[0])
    tempfile.tempdir = None
    return Confinement(True, tuple(str(p) for p in paths), abi, tuple(gaps))


def rules_for(writable: list[Path], output: dict | None, resolved: bool = False) -> Rules:
    """The rules of a child whose engine has this profile output (None: no connection at all).
    `resolved`: the command resolved the warehouse's address for the child (it needs no UDP for DNS)."""
    if output is None:
        return Rules(tuple(str(p) for p in writable), (), False, False, False)
    from ..warehouse.dialects import dialect_for

    ports, network, unix = dialect_for(str(output.get("type") or "")).network_needs(output)
    return Rules(tuple(str(p) for p in writable), ports, network, unix, udp=not resolved,
                 loopback=ports is None and not network)


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


class _Job:
    """One job's process, a grandchild the server forked (it is not this process's child): its pid,
    signals by pidfd, its printed output (`stdout`), and its exit code as the server read it."""

    def __init__(self, pid: int, stdout: int, status: int):
        self.pid = pid
        try:
            self._pidfd = os.pidfd_open(pid)
        except (ProcessLookupError, OSError):
            self._pidfd = -1
        self.stdout = os.fdopen(stdout, "rb")
        self._status = status
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._status >= 0 and select.select([self._status], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None and self._status >= 0:
            self._read_status()
        return self.returncode

    def _read_status(self) -> None:
        data = b""
        while chunk := os.read(self._status, 64):
            data += chunk
        os.close(self._status)
        self._status = -1
        try:
            self.returncode = int(data)
        except ValueError:  # the server ended before it could say (the command ends)
            self.returncode = -signal.SIGKILL

    def send_signal(self, sig: int) -> None:
        if self._pidfd >= 0 and self.returncode is None:
            signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        try:
            self.send_signal(signal.SIGKILL)
        except (ProcessLookupError, OSError):
            pass

    def close(self) -> None:
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1


class _Server:
    """The confined fork server: exec'd fresh (child.py --serve) in a session of its own without a terminal,
    with an environment of BASE names only. It imports dbt and warms its parser, then confines itself
    (user and mount namespace with every mount read-only but `roots`, Landlock's signal and abstract-socket
    scopes, no raw or packet socket) before it forks anything, and takes jobs only on the one end of a
    socket pair this process made and kept: nothing can reach it by a path, a port or a name, and the
    processes it forks close their copy before they read their job. Each job's process then narrows
    itself to the job's own rules (confine()) before any project code runs."""

    def __init__(self, roots: tuple[str, ...]):
        import json
        import socket

        from .environ import base

        self.roots = roots
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-W", "ignore:resource_tracker:UserWarning", "-m", "rerun_safety.confine.child",
                 "--serve", str(theirs.fileno()), json.dumps(list(roots))],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True, env=base(dict(os.environ)), cwd="/")
        finally:
            theirs.close()
        self.lock = threading.Lock()

    def covers(self, writable: tuple[str, ...]) -> bool:
        from .namespace import beneath

        return self.proc.poll() is None and all(
            beneath(os.path.realpath(p), [os.path.realpath(r) for r in self.roots]) for p in writable)

    def fork(self) -> tuple[_Job, int, int] | None:
        """A new job process: (its handle, the pipe its job is written to, the pipe its answers come on);
        None when the server is gone."""
        import socket

        job_read, job = os.pipe()
        answers, answer_write = os.pipe()
        output, output_write = os.pipe()
        status, status_write = os.pipe()
        theirs = (job_read, answer_write, output_write, status_write)
        try:
            with self.lock:
                socket.send_fds(self.sock, [b"job"], list(theirs))
                reply = self.sock.recv(64)
            pid = int(reply)
        except (OSError, ValueError):
            for fd in (job, answers, output, status):
                os.close(fd)
            return None
        finally:
            for fd in theirs:
                os.close(fd)
        return _Job(pid, output, status), job, answers

    def stop(self) -> None:
        self.sock.close()  # the server ends when its end reads nothing more
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Child:
    """A job's process as run_confined uses it: forked by a server whose roots cover the job's writable
    folders (the prestarted one for the usual `$TMPDIR`, else a server of the job's own)."""

    def __init__(self, writable: tuple[str, ...] = ()):
        forked = None
        for server in list(_SERVERS):
            if server.covers(writable):
                forked = server.fork()
                if forked is not None:
                    break
        if forked is None:
            server = _server(_default_roots() if _covered(writable, _default_roots()) else writable)
            forked = server.fork()
        if forked is None:
            raise ChildCrashed("the confined fork server ended before it took the job")
        self.proc, self.job, self.answers = forked
        self.relay: threading.Thread | None = None
        self.text = None  # the scrubber of what the child prints, once the job is known

    def start_relay(self, text) -> None:
        """What the child prints (dbt's own lines, a library's warning) reaches this process's stderr as
        lines, scrubbed, with control characters shown, never as the terminal's input."""
        from ..errors import printable

        self.text = text

        def relay() -> None:
            try:
                for line in iter(self.proc.stdout.readline, b""):
                    shown = printable(text(line.decode("utf-8", "replace")[:2000].rstrip("\n")))
                    os.write(2, (shown + "\n").encode("utf-8", "replace"))
            except (OSError, ValueError):  # closed at the command's end (a process the child left holds it)
                pass

        self.relay = threading.Thread(target=relay, name="rerun-safety-child-output", daemon=True)
        self.relay.start()

    def stop(self) -> None:
        for fd in (self.job, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.close()
        if self.relay is not None:
            self.relay.join(timeout=2)
        self.proc.stdout.close()


_SERVERS: list[_Server] = []
_MAX_SERVERS = 2


def _default_roots() -> tuple[str, ...]:
    import tempfile

    return (os.path.realpath(tempfile.gettempdir()),)


def _covered(writable: tuple[str, ...], roots: tuple[str, ...]) -> bool:
    from .namespace import beneath

    return all(beneath(os.path.realpath(p), list(roots)) for p in writable)


def _server(roots: tuple[str, ...]) -> _Server:
    if not _SERVERS:
        atexit.register(_stop_servers)
    for gone in [s for s in _SERVERS if s.proc.poll() is not None]:
        _SERVERS.remove(gone)
        gone.stop()
    server = _Server(roots)
    _SERVERS.insert(0, server)
    while len(_SERVERS) > _MAX_SERVERS:
        _SERVERS.pop().stop()
    return server


def prestart() -> None:
    """Exec the confined fork server now (unless one runs), so that its imports (dbt's, ~2 s) overlap the
    command's own."""
    if not any(s.covers(_default_roots()) for s in _SERVERS):
        _server(_default_roots())


def _stop_servers() -> None:
    while _SERVERS:
        _SERVERS.pop().stop()


class ChildStopped(Exception):
    """The child ended by a stop signal: `name` is SIGINT or SIGTERM."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class ChildCrashed(Exception):
    """The child died without an answer (killed, or out of memory)."""


def child_error(message: dict) -> BaseException:
    """The exception a child's error answer stands for: one of the runner's own errors by name, else an
    error of the child's type name with its text (and its traceback, for --debug)."""
    from .. import errors

    cls = getattr(errors, str(message.get("class")), None) if message.get("rerun") else None
    if isinstance(cls, type) and issubclass(cls, errors.RerunSafetyError):
        return cls(str(message.get("message", "")))
    name = str(message.get("class") or "Error")
    name = name if name.isidentifier() else "Error"
    err = type(name, (ChildError,), {})(str(message.get("message", "")))
    err.child_traceback = str(message.get("traceback", ""))
    return err


class ChildError(Exception):
    """An unexpected error in the confined child (its type name is the child's)."""

    child_traceback = ""


def run_confined(fn: Callable[..., Any], args: tuple, rules: Rules, environ: dict[str, str], secrets=(),
                 progress=None, stop_name: Callable[[BaseException], str | None] | None = None
                 ) -> tuple[Any, Confinement]:
    """Run `fn(*args, confinement=..., progress=...)` in a confined child (the prestarted one, else a new
    one) with `environ`; return its result (read from JSON, every string scrubbed of `secrets`) and how it
    was confined, or raise what it raised. The child's progress calls reach `progress` here. A stop signal
    to this process is passed on (the child has a session of its own: a terminal's Ctrl-C reaches only
    this process), and this process waits for the child's cleanup before it raises the interrupt itself."""
    import pickle

    from ..secrets import Scrubber

    child = _Child(rules.writable)
    text = Scrubber(secrets)
    child.start_relay(text)
    job = {"fn": fn, "args": args, "environ": environ, "cwd": os.getcwd(), "rules": rules,
           "parent_pid": os.getpid(), "stop_name": stop_name}
    try:
        with os.fdopen(child.job, "wb") as f:
            pickle.dump(job, f)
    except BrokenPipeError:
        pass  # it died before its job: told below as a crash
    child.job = -1
    try:
        try:
            answer = _receive(child, progress, text)
        except KeyboardInterrupt as err:
            # a stop signal here: the child removes its sandboxes before it ends, and only then may this
            # process say that they are removed
            sig = signal.SIGTERM if type(err).__name__ == "Terminated" else signal.SIGINT
            try:
                child.proc.send_signal(sig)
            except (ProcessLookupError, OSError):
                pass
            late = _receive(child, None, text)
            if late is not None and late.get("kind") == "error":
                raise child_error(late) from None  # its cleanup failed: that, not "sandboxes removed", is the news
            raise
    finally:
        child.stop()
        _remove_job_tmp(rules, child.proc.pid)
    if answer is None:
        raise ChildCrashed("the game day's confined process ended without an answer (exit code "
                           f"{child.proc.returncode})")
    kind = answer.get("kind")
    if kind == "ok" and isinstance(answer.get("confinement"), Confinement):
        return answer.get("value"), answer["confinement"]
    if kind == "stopped":
        raise ChildStopped("SIGTERM" if answer.get("name") == "SIGTERM" else "SIGINT")
    if kind == "error":
        raise child_error(answer)
    raise ChildCrashed("the game day's confined process sent an answer that is not one of the runner's")


def _remove_job_tmp(rules: Rules, pid: int) -> None:
    """What a job killed before its end left of its temporary folder (confine() names it by its pid)."""
    import shutil

    if not rules.writable:
        return
    for folder in Path(rules.writable[0]).glob(f"{JOB_TMP_PREFIX}{pid}_*"):
        if not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


def _receive(child: _Child, progress, text) -> dict | None:
    """Relay the child's progress until its answer; None when it ended without one. Waits for its end.
    A line that is not one of ours (not JSON, an unknown type, too long) ends the run as a crash."""
    from . import wire

    answer, buffer = None, b""
    while answer is None and child.answers >= 0:
        ready, _, _ = select.select([child.answers], [], [], 0.2)
        if not ready:
            if child.proc.poll() is not None and not select.select([child.answers], [], [], 0)[0]:
                break
            continue
        chunk = os.read(child.answers, 1 << 20)
        if not chunk:
            break
        buffer += chunk
        if len(buffer) > wire.MAX_LINE:
            raise ChildCrashed(f"the confined process's answer exceeds {wire.MAX_LINE // (1 << 20)} MB")
        while b"\n" in buffer and answer is None:
            line, buffer = buffer.split(b"\n", 1)
            try:
                message = wire.loads(line, text=text)
            except wire.WireError as err:
                raise ChildCrashed(f"the confined process sent {err}") from None
            if not isinstance(message, dict):
                raise ChildCrashed("the confined process sent a message that is not one of the runner's")
            if message.get("kind") == "progress":
                name, args = message.get("name"), message.get("args")
                if progress is not None and name in ("start", "scenario", "advance") and isinstance(args, tuple):
                    getattr(progress, name)(*args)
            else:
                answer = message
    child.proc.wait()
    return answer


__all__ = ["Confinement", "ChildCrashed", "ChildError", "ChildStopped", "Rules", "abi_version", "check_available",
           "confine", "prestart", "restrict_writes", "rules_for", "run_confined", "statement_guard_on",
           "unavailable_reason"]
