"""The runner's error tree. The CLI turns any of these into one line on stderr and exit code 2."""
from __future__ import annotations


class RerunSafetyError(Exception):
    """Base class: a problem the user can act on, reported without a traceback."""


class ConfigError(RerunSafetyError):
    """The project, profile, selection or options are wrong."""


class DbtInvocationError(RerunSafetyError):
    """dbt itself failed (parse error, crash), as opposed to a model failing in a scenario."""


class SandboxError(RerunSafetyError):
    """A snapshot or sandbox could not be created, cloned or removed."""


def first_line(err: BaseException) -> str:
    """The first line of an error's text worth showing (not a JVM stack frame), or its type."""
    for line in str(err).strip().splitlines():
        line = line.strip()
        if line and not line.startswith(("JVM stacktrace", "at ")):
            return line
    return type(err).__name__
