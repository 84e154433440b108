"""The `rerun-safety` console script. A Ctrl-C (or SIGTERM) at any moment ends with one line and exit
130 (143): while Python imports the runner (about half a second, before any command could handle it),
and around a command, where click would print `Aborted!` and exit 1, the code of "unsafe"."""
from __future__ import annotations

import os
import signal
import sys


def _early_stop(signum, frame) -> None:
    # nothing has been opened or written yet: leave at once
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
    os.write(2, f"rerun-safety: interrupted by {name}\n".encode())
    os._exit(143 if signum == signal.SIGTERM else 130)


def main() -> None:
    previous = {sig: signal.signal(sig, _early_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    import click
    import duckdb  # noqa: F401  (a C extension: an interrupt inside its init aborts the process)

    from .cli import main as cli

    for sig, handler in previous.items():  # commands install their own (cli._on_stop_signal)
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
