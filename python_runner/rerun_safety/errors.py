"""The runner's error tree. The CLI turns any of these into one line on stderr and exit code 2."""
from __future__ import annotations

import re


class RerunSafetyError(Exception):
    """Base class: a problem the user can act on, reported without a traceback."""


class ConfigError(RerunSafetyError):
    """The project, profile, selection or options are wrong."""


class NothingToCheck(RerunSafetyError):
    """A `state:` selection that matches nothing the command checks (a pull request that changes no
    model, or only models without state): not a mistake, the command passes with this one line."""


class DbtInvocationError(RerunSafetyError):
    """dbt itself failed (parse error, crash), as opposed to a model failing in a scenario."""


class DiffError(RerunSafetyError):
    """A relation, column or filter given to the diff is wrong, or a query failed."""


class SandboxError(RerunSafetyError):
    """A snapshot or sandbox could not be created, cloned or removed."""


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text, keep_newlines: bool = True) -> str:
    """Text from a project or its data made safe to print: control characters (ESC starts terminal
    commands: a window title, a cleared screen, a hidden line) are shown as `\\x1b` instead of sent."""
    out = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return out if keep_newlines else out.replace("\n", " ")


def folded(items, limit: int = 5) -> str:
    """A list in a message a user reads in one line: the first `limit` items, then how many more
    ('a, b, c and 101 more')."""
    items = list(items)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"


def first_line(err: BaseException) -> str:
    """The first line of an error's text worth showing (not a JVM stack frame), or its type.

    py4j's "An error occurred while calling o36.sql." says nothing by itself: the Java exception on
    the line after it (": java.lang.OutOfMemoryError: Java heap space") is added."""
    lines = [ln.strip() for ln in str(err).strip().splitlines()]
    for i, line in enumerate(lines):
        if line and not line.startswith(("JVM stacktrace", "at ")):
            java = next((ln for ln in lines[i + 1:i + 3] if ln.startswith(": ")), None)
            if line.startswith("An error occurred while calling") and java:
                line = f"{line.rstrip('.')}{java}"
            if "OutOfMemoryError" in line:
                line += " (the Spark driver's heap is full: raise spark.driver.memory)"
            return line
    return type(err).__name__
