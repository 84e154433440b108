"""The lint's dbt compiles: a selection compiled in one dbt invocation (a model that fails is set
aside and the rest compiled again), the incremental pass, and a second compile at another time for
models whose Jinja reads the clock. lint/compile.py orchestrates them; lint/pass2.py runs the
incremental pass in a second process."""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from ..dbt_invoke import DbtSession
from ..errors import DbtInvocationError
from .context import WINDOW_VARS

# Set by the CLI's signal handler: dbt swallows KeyboardInterrupt inside an invocation, so the
# compile loop checks this between invocations and stops (its `finally` removes the scratch).
STOP: list[str] = []


def check_stop() -> None:
    if STOP:
        raise KeyboardInterrupt(STOP[0])


def fqn_selector(node) -> str:
    return "fqn:" + ".".join(node.fqn)


@dataclass(frozen=True)
class Selection:
    """dbt --select / --exclude terms. Few terms keep dbt's selection fast: 500 fqn terms cost it
    more than compiling 500 models."""

    select: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    @classmethod
    def restricted(cls, select: tuple[str, ...], exclude: tuple[str, ...], restrict: str) -> "Selection":
        terms = [t for term in select for t in term.split()]
        return cls(tuple(f"{t},{restrict}" for t in terms) or (restrict,),
                   tuple(t for term in exclude for t in term.split()))

    @classmethod
    def of(cls, nodes: list) -> "Selection":
        return cls(tuple(fqn_selector(n) for n in nodes))

    def without(self, nodes: list) -> "Selection":
        return Selection(self.select, self.exclude + tuple(fqn_selector(n) for n in nodes))


def _compile(session: DbtSession, selection: Selection, *, full_refresh: bool, profiles_dir: str,
             vars_yaml: str | None, flags: tuple[str, ...], clock: Any = None,
             dialect: str = "") -> dict[str, tuple[str | None, str]]:
    """unique_id -> (compiled SQL or None, error) for the selected models. `clock`: the time the
    compile runs at, as dbt's Jinja sees it (modules.datetime, run_started_at)."""
    args = ["compile", "--indirect-selection", "empty", "--no-write-json", *flags]
    if full_refresh:
        args.append("--full-refresh")
    args += ["--select", *selection.select]
    if selection.exclude:
        args += ["--exclude", *selection.exclude]
    res = session.invoke(args, profiles_dir=profiles_dir, vars_yaml=vars_yaml, clock=clock, dialect=dialect)
    check_stop()
    out: dict[str, tuple[str | None, str]] = {}
    results = getattr(res.raw, "results", None) or []
    for r in results:
        node = getattr(r, "node", None)
        if node is None:
            continue
        status = str(getattr(getattr(r, "status", ""), "value", getattr(r, "status", "")))
        if status == "success" and getattr(node, "compiled_code", None) is not None:
            out[node.unique_id] = (node.compiled_code, "")
        elif status == "skipped":
            continue  # skipped below a failing parent: compiled again on its own
        else:
            message = " ".join(str(getattr(r, "message", "") or status).split())
            out[node.unique_id] = (None, message[:500])
    if res.crashed and not out:
        raise DbtInvocationError(f"dbt compile crashed: {res.error}")
    if not res.success and not out:
        raise DbtInvocationError(f"dbt compile failed: {res.error}")
    return out


def _failing_node(message: str, nodes: list):
    """The node a crashed compile names ("... in model x (models/x.sql)"), if any."""
    for n in nodes:
        if f"({n.original_file_path})" in message or f" model {n.name} " in f" {message} ":
            return n
    return None


def _error_text(err: Exception) -> str:
    text = str(err)
    for prefix in ("dbt compile crashed: ", "dbt compile failed: "):
        text = text.replace(prefix, "", 1)
    return text


def compile_all(session, selection: Selection, nodes: list, **kw) -> dict[str, tuple[str | None, str]]:
    """Compile the selection. A model that fails to compile stops dbt's whole compile, so it is
    recorded and the rest compiled again without it; models skipped below a failing parent, or
    left when the failing model cannot be told, are compiled one at a time."""
    if not nodes:
        return {}
    out: dict[str, tuple[str | None, str]] = {}
    failed: list = []
    while True:
        try:
            out.update(_compile(session, selection.without(failed), **kw))
            break
        except DbtInvocationError as err:
            culprit = _failing_node(str(err), [n for n in nodes if n.unique_id not in out])
            if culprit is None:
                if len(nodes) == 1:
                    out[nodes[0].unique_id] = (None, _error_text(err))
                break
            out[culprit.unique_id] = (None, _error_text(err))
            failed.append(culprit)
    for n in nodes:
        if n.unique_id not in out and n.config.materialized != "ephemeral" and len(nodes) > 1:
            out.update(compile_all(session, Selection.of([n]), [n], **kw))
    return out


# Jinja that reads the clock while the SQL is rendered
_CLOCK_JINJA = re.compile(r"modules\.datetime|modules\.time\b|run_started_at|modules\.pytz", re.IGNORECASE)
# a far-away time to render at: any date the SQL holds from the clock then differs
_OTHER_CLOCK = dt.datetime(2101, 7, 15, 13, 45, 30)


def render_clocks(session: DbtSession, nodes: list, full: dict, **kw) -> dict[str, tuple[str, str]]:
    """Models whose Jinja reads the clock (`{% set since = modules.datetime.date.today() - ... %}`,
    `run_started_at`), compiled a second time at another time: where the SQL differs, the clock is
    rendered into it, which the SQL rules cannot see (it is a literal by then). Returns unique_id ->
    (the first differing stretch of the SQL as compiled now, the same stretch at the other time)."""
    suspects = [n for n in nodes if _CLOCK_JINJA.search(getattr(n, "raw_code", "") or "")
                and full.get(n.unique_id, (None, ""))[0]]
    if not suspects:
        return {}
    try:
        other = compile_all(session, Selection.of(suspects), suspects, full_refresh=True, clock=_OTHER_CLOCK, **kw)
    except DbtInvocationError:
        return {}
    out = {}
    for n in suspects:
        now, later = full[n.unique_id][0], other.get(n.unique_id, (None, ""))[0]
        if later is None or now == later:
            continue
        start = next((i for i, (a, b) in enumerate(zip(now, later)) if a != b), min(len(now), len(later)))
        end_now, end_later = len(now), len(later)
        while end_now > start and end_later > start and now[end_now - 1] == later[end_later - 1]:
            end_now, end_later = end_now - 1, end_later - 1
        lo = max(0, start - 30)
        out[n.unique_id] = (now[lo:end_now + 10].strip(), later[lo:end_later + 10].strip())
    return out


def incremental_pass(session: DbtSession, manifest, profiles_dir: str, p: dict) -> dict:
    """Pass 2: compile the incremental models with is_incremental() true."""
    nodes = [manifest.nodes[u] for u in p["uids"]]
    out = compile_all(session, p["selection"], nodes, full_refresh=False, profiles_dir=profiles_dir,
                       vars_yaml=p["plain_vars"], flags=p["flags"])
    # a model that needs the window vars to compile at all gets them (as in a windowed run)
    needs_window = [n for n in nodes if any(v in out.get(n.unique_id, (None, ""))[1] for v in WINDOW_VARS)]
    out.update(compile_all(session, Selection.of(needs_window), needs_window, full_refresh=False,
                            profiles_dir=profiles_dir, vars_yaml=p["window_vars"], flags=p["flags"]))
    return out
