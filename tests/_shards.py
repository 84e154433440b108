"""`make test`: the suite in two pytest processes at once, one of them for what runs in a JVM.

Most of the suite runs dbt in process, on one core; Spark's tests spend their time in a JVM (a
local Spark, a cluster's Thrift server) and the kill tests in waiting for signals and restarts. Two
sessions side by side keep both cores busy. Each session has its own PostgreSQL server and its
own temp folders; nothing is shared but the checkout. The second session's output is printed
when it ends; the exit code is the first non-zero one (0 when both passed).

    .venv/bin/python tests/_shards.py [pytest options...]
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# Spark (in process and on a cluster), and the tests that mostly wait: signals, kills, restarts.
SECOND = [
    "test_gameday_spark.py", "test_diff_spark.py", "test_spark_cluster.py", "strategy/test_strategy_spark.py",
    "strategy/adapter_suite", "test_macros_integration.py", "test_interrupts.py", "test_production_read_only.py",
    "test_secrets.py", "test_postgres_roles_and_types.py", "test_work_root.py", "test_external_models.py",
    "test_diff_filters.py", "test_hostile_text.py", "test_strategy_faults.py", "test_interrupt_threads.py",
    "strategy/test_strategy_kill.py", "test_confinement.py", "test_confinement_spark.py", "strategy/test_overlap.py",
]


def _first() -> list[str]:
    second = {(TESTS / p).resolve() for p in SECOND}
    out = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if not any(path == s or s in path.parents for s in second):
            out.append(str(path.relative_to(TESTS.parent)))
    return out


class _Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum, frame) -> None:
    raise _Stopped(signum)


def _die_with_parent() -> None:
    """This process (and, from preexec, each session) gets SIGTERM when its parent ends, however it ends:
    `make test` stopped by a CI timeout leaves no pytest session behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _end(procs, signum: int) -> None:
    """Stop both sessions (the second has a process group of its own) and what they started."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signum) if proc.pid == os.getpgid(proc.pid) else proc.send_signal(signum)
            except ProcessLookupError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(extra: list[str]) -> int:
    second = [str((TESTS / p).relative_to(TESTS.parent)) for p in SECOND]
    command = [sys.executable, "-m", "pytest"]
    _die_with_parent()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    with tempfile.TemporaryFile(mode="w+") as log:
        # the second session keeps no cache: two sessions writing .pytest_cache at once could clash
        other = subprocess.Popen([*command, "-p", "no:cacheprovider", *second, *extra], stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
        procs = [other]
        try:
            first_proc = subprocess.Popen([*command, *_first(), *extra], preexec_fn=_die_with_parent)
            procs.append(first_proc)
            first = first_proc.wait()
            second_code = other.wait()
        except KeyboardInterrupt:
            _end(procs, signal.SIGINT)
            return 130
        except _Stopped as stop:
            _end(procs, signal.SIGTERM)
            return 128 + stop.signum
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        log.seek(0)
        print(f"\n===== the second session ({', '.join(SECOND)}) =====", flush=True)
        sys.stdout.write(log.read())
        sys.stdout.flush()
    return first or second_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
