"""The `rerun-safety` console script. A Ctrl-C (or SIGTERM) at any moment from this module's first line
on ends with one line and exit 130 (143): while Python imports the runner (about half a second, before
any command could handle it), and around a command, where click would print `Aborted!` and exit 1, the
code of "unsafe". The handlers go in before anything else is imported, through the built-in `_signal`
(the `signal` module is Python code that takes milliseconds to import); only the interpreter's own
start, before this file runs, keeps Python's default."""
from __future__ import annotations

import _signal
import os
import sys


def _early_stop(signum, frame) -> None:
    # nothing has been opened or written yet: leave at once
    name = "SIGTERM" if signum == _signal.SIGTERM else "SIGINT"
    os.write(2, f"rerun-safety: interrupted by {name}\n".encode())
    os._exit(143 if signum == _signal.SIGTERM else 130)


# At import: this module is the console script's first import. Not in the game day's worker processes
# (spawned, they run the console script again, as `__mp_main__`): they have handlers of their own and
# leave the one line to the parent.
_PREVIOUS = ({} if "__mp_main__" in sys.modules else
             {sig: _signal.signal(sig, _early_stop) for sig in (_signal.SIGINT, _signal.SIGTERM)})


def mend_half_built_log_handlers() -> None:
    """At exit, before logging's own exit hook: an interrupt that lands inside a library's
    `logging.StreamHandler(...)` (dbt makes some at each invocation) leaves a handler registered for
    that hook before it had a stream, and the hook would print a traceback after our one line. Such
    a handler gets an empty stream."""
    import logging

    for ref in list(getattr(logging, "_handlerList", ())):
        handler = ref()
        if isinstance(handler, logging.StreamHandler) and not hasattr(handler, "stream"):
            handler.stream = None


def main() -> None:
    import atexit
    import logging  # noqa: F401  (its exit hook registers first, so it runs after the one below)
    import signal

    import click
    import duckdb  # noqa: F401  (a C extension: an interrupt inside its init aborts the process)

    from .cli import main as cli

    atexit.register(mend_half_built_log_handlers)
    for sig, handler in _PREVIOUS.items():  # commands install their own (cli._on_stop_signal)
        signal.signal(sig, handler)
    try:
        cli.main(standalone_mode=False, prog_name="rerun-safety")
    except click.exceptions.Abort:  # a Ctrl-C that no command caught (click turns it into Abort)
        click.secho("rerun-safety: interrupted by SIGINT", fg="red", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.secho("rerun-safety: interrupted by SIGINT", fg="red", err=True)
        sys.exit(130)
    except click.exceptions.ClickException as err:  # a usage error: click's own message, exit 2
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
