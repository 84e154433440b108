"""`make test`: the suite in two pytest processes at once, one of them for what runs in a JVM.

Most of the suite runs dbt in process, on one core; Spark's tests spend their time in a JVM (a
local Spark, a cluster's Thrift server) and the kill tests in waiting for signals and restarts. Two
sessions side by side keep both cores busy. Each session has its own PostgreSQL server and its
own temp folders; nothing is shared but the checkout. The second session's output is printed
when it ends; the exit code is the first non-zero one (0 when both passed).

    .venv/bin/python tests/_shards.py [pytest options...]
"""
from __future__ import annotations

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
    "strategy/test_strategy_kill.py", "test_confinement.py", "test_confinement_spark.py",
]


def _first() -> list[str]:
    second = {(TESTS / p).resolve() for p in SECOND}
    out = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if not any(path == s or s in path.parents for s in second):
            out.append(str(path.relative_to(TESTS.parent)))
    return out


def main(extra: list[str]) -> int:
    second = [str((TESTS / p).relative_to(TESTS.parent)) for p in SECOND]
    command = [sys.executable, "-m", "pytest"]
    with tempfile.TemporaryFile(mode="w+") as log:
        # the second session keeps no cache: two sessions writing .pytest_cache at once could clash
        other = subprocess.Popen([*command, "-p", "no:cacheprovider", *second, *extra], stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            first = subprocess.call([*command, *_first(), *extra])
            second_code = other.wait()
        except KeyboardInterrupt:
            other.send_signal(signal.SIGINT)
            other.wait()
            return 130
        finally:
            if other.poll() is None:
                other.kill()
        log.seek(0)
        print(f"\n===== the second session ({', '.join(SECOND)}) =====", flush=True)
        sys.stdout.write(log.read())
        sys.stdout.flush()
    return first or second_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
