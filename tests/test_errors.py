"""The one line an error becomes: what it says, and which error comes first when cleanup fails too."""
from __future__ import annotations

import pytest

from rerun_safety.errors import ConfigError, SandboxError, first_line
from rerun_safety.gameday import Gameday


class Py4JJavaError(Exception):
    """py4j's error text: a generic first line, the Java exception after it, then the JVM's stack."""


OOM = Py4JJavaError("An error occurred while calling o2570.collectToPython.\n"
                    ": java.lang.OutOfMemoryError: Java heap space\n\tat org.apache.spark.sql.Dataset.collect")


def test_first_line_names_the_java_exception_behind_py4js_line():
    assert first_line(OOM) == ("An error occurred while calling o2570.collectToPython: java.lang.OutOfMemoryError: "
                               "Java heap space (the Spark driver's heap is full: raise spark.driver.memory)")
    assert first_line(ValueError("\n  at a.b(C.java:1)\nthe reason\nmore")) == "the reason"
    assert first_line(ValueError("")) == "ValueError"


class _Engine:
    """An engine whose sandboxes cannot be removed (as after Spark's driver died)."""

    def cleanup(self):
        raise SandboxError("could not remove sandbox rerun_safety_sbx_1_reference: An error occurred while "
                           "calling o36.sql.")


def _cleanup_error(failure: BaseException | None) -> SandboxError:
    gameday = Gameday(options=None)
    gameday.engine = _Engine()
    with pytest.raises(SandboxError) as caught:
        gameday._cleanup(failure)
    return caught.value


def test_the_error_that_stopped_the_run_comes_before_the_sandbox_that_stays():
    assert str(_cleanup_error(OOM)) == (
        "Py4JJavaError: An error occurred while calling o2570.collectToPython: java.lang.OutOfMemoryError: Java heap "
        "space (the Spark driver's heap is full: raise spark.driver.memory); then could not remove sandbox "
        "rerun_safety_sbx_1_reference: An error occurred while calling o36.sql.")
    assert str(_cleanup_error(ConfigError("source raw.events: no time column"))).startswith(
        "source raw.events: no time column; then could not remove sandbox")
    # without an error, or after Ctrl-C, the sandbox that stays is the news
    for failure in (None, KeyboardInterrupt()):
        assert str(_cleanup_error(failure)).startswith("could not remove sandbox rerun_safety_sbx_1_reference")


def test_a_log_handler_half_built_by_an_interrupt_prints_no_traceback_at_exit():
    """An interrupt inside `logging.StreamHandler(...)` (dbt makes some per invocation) leaves a
    handler registered for logging's exit hook without a stream: without the console script's mend,
    that hook prints a traceback after the one line an interrupt gets."""
    import os
    import subprocess
    import sys

    from support.common import REPO_ROOT

    def child(mend: bool) -> subprocess.CompletedProcess:
        code = ("import atexit, logging\n"
                "from rerun_safety.entry import mend_half_built_log_handlers\n"
                + ("atexit.register(mend_half_built_log_handlers)\n" if mend else "")
                + "h = logging.StreamHandler.__new__(logging.StreamHandler)\n"
                "logging.Handler.__init__(h)  # what an interrupt before `self.stream = ...` leaves\n")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "python_runner")})

    bare = child(False)
    assert "AttributeError: 'StreamHandler' object has no attribute 'stream'" in bare.stderr
    mended = child(True)
    assert (mended.returncode, mended.stderr) == (0, "")
