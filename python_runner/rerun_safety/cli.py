"""Command line: parses options and calls the core. The core never prints; this module does."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import click

from .child_setup import child_setup, profile_folder
from .errors import ConfigError, NothingToCheck, RerunSafetyError, first_line, printable

_COMMON = [
    click.option("--project-dir", default=".", show_default=True, type=click.Path(file_okay=False),
                 help="The dbt project to work on."),
    click.option("--profiles-dir", default=None, type=click.Path(file_okay=False),
                 help="Where profiles.yml is (default: DBT_PROFILES_DIR, the current dir, ~/.dbt)."),
    click.option("--target", "-t", default=None, help="The profile target to read sources from."),
]


def common_options(fn):
    for opt in reversed(_COMMON):
        fn = opt(fn)
    return fn


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the game day's `finally` removes the sandboxes."""


_STOPPED: list[str] = []  # the stop signal received during the command, if any
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGHUP: "SIGHUP"}
_EXIT_CODES = {"SIGTERM": 143, "SIGHUP": 129}


def _in_finalizer(frame) -> bool:
    """Whether `frame` runs inside a finalizer (`__del__`, weakref.finalize, multiprocessing's
    Finalize), where Python prints an exception and drops it ("Exception ignored in ...")."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__del__" or (code.co_name in ("__call__", "_run_finalizers") and (
                code.co_filename.endswith(("weakref.py", os.path.join("multiprocessing", "util.py"))))):
            return True
        frame = frame.f_back
    return False


def _on_stop_signal(signum, frame) -> None:
    if _in_finalizer(frame):
        # raised here the interrupt would be printed and lost: deliver the signal again shortly
        import threading

        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
        return
    # One signal is enough: ignore repeats so that they cannot cut the cleanup short.
    _STOPPED.append(_SIGNAL_NAMES.get(signum, "SIGINT"))
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    # a hangup (the terminal closed, a scheduler's stop) ends the run like SIGTERM
    raise Terminated() if signum in (signal.SIGTERM, signal.SIGHUP) else KeyboardInterrupt()


def _preload() -> None:
    """Import the C extensions a command loads later before the stop handlers go in: an interrupt
    raised inside an extension's module init (DuckDB's enums, built by nanobind) aborts the whole
    process ("Critical nanobind error") instead of ending the command with its one line."""
    import duckdb  # noqa: F401


def _stop_name(err: BaseException) -> str | None:
    """The stop signal behind `err`: a KeyboardInterrupt, or whatever a library turned it into (a C
    extension being imported when Ctrl-C arrives raises ImportError; dbt wraps it in its own errors)."""
    if _STOPPED:
        return _STOPPED[0]
    if isinstance(err, Terminated):
        return "SIGTERM"
    return "SIGINT" if isinstance(err, KeyboardInterrupt) else None


def _nothing_to_check(err: BaseException) -> None:
    """A `state:` selection with nothing to check (a pull request that changes no model): exit 0."""
    click.echo(printable(f"rerun-safety: nothing to check: {err}"))
    sys.exit(0)


def _fail(err: BaseException, debug: bool) -> None:
    if debug:
        raise err
    click.secho(printable(f"rerun-safety: error: {err}"), fg="red", err=True)
    sys.exit(2)


def _fail_unexpected(err: BaseException, debug: bool) -> None:
    """Anything that is not a verdict exits 2 with one line (the traceback with --debug: the confined
    child's, scrubbed, where the error came from there)."""
    if debug:
        if getattr(err, "child_traceback", ""):
            click.echo(printable(err.child_traceback), err=True)
        raise err
    text = printable(first_line(err)[:400])
    click.secho(f"rerun-safety: error: {type(err).__name__}: {text} (run with --debug for the traceback)",
                fg="red", err=True)
    sys.exit(2)


def _interrupted(text: str, name: str) -> None:
    click.secho(f"rerun-safety: {text.format(name=name)}", fg="red", err=True)
    sys.exit(_EXIT_CODES.get(name, 130))


@contextlib.contextmanager
def exit_codes(debug: bool, interrupted: str, handler=None, stop_first: bool = False, cleanup=None):
    """The one mapping from how a command ends to its exit code, for every command: a stop signal
    130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP) with `interrupted` ("... by {name}"); nothing to check 0; the
    user's mistake (RerunSafetyError) 2 with its line; anything else 2 with one line (the traceback
    with --debug). A verdict is the command's own exit code, never 1 for a crash. The stop handlers
    are in place inside, put back after. `stop_first`: an error after a stop is the interrupt (the
    diff's engines turn it into a query error); otherwise a RerunSafetyError stays the news (the
    game day's cleanup that failed). `cleanup`: run after, whatever happened."""
    from .confine import ChildStopped

    previous = {sig: signal.signal(sig, handler or _on_stop_signal) for sig in STOP_SIGNALS}
    try:
        yield
    except NothingToCheck as err:
        _nothing_to_check(err)
    except ChildStopped as err:  # (it was sent SIGTERM for a hangup here)
        _interrupted(interrupted, _STOPPED[0] if _STOPPED else err.name)
    except (KeyboardInterrupt, Exception) as err:  # noqa: BLE001 - not a verdict: exit 2 with one line, never 1
        name = _stop_name(err)
        if isinstance(err, RerunSafetyError) and not (stop_first and name):
            _fail(err, debug)
        if name:
            _interrupted(interrupted, name)
        _fail_unexpected(err, debug)
    finally:
        _STOPPED.clear()
        for sig, previous_handler in previous.items():
            signal.signal(sig, previous_handler)
        if cleanup is not None:
            cleanup()


_UNCONFINED = click.option(
    "--unconfined", is_flag=True,
    help="Run the project's code without the kernel's confinement (where Linux Landlock is missing): only the "
         "statement guard then keeps hooks and Python models from writing outside the sandboxes. Every report "
         "says so.")


def _confined_gameday(options):
    """The game day in a child process that may write only beneath the work root (see confine/); this
    process checks what the child cannot (the output folder) and writes the reports after it."""
    from .confine import check_available, run_confined
    from .warehouse.base import check_writable_dir, private_work_root

    check_available(False)
    work_root = private_work_root(options.work_root)
    check_writable_dir(options.output_dir, "the output directory")
    with profile_folder(work_root) as copy_dir:
        rules, env, secrets, refused, profiles_dir = child_setup(
            options.project_dir, options.profiles_dir, options.target, options.vars_yaml, [work_root], copy_dir)
        from .report.terminal import TerminalProgress

        with TerminalProgress() as progress:
            report, _ = run_confined(_gameday_child, (replace(options, work_root=work_root, profiles_dir=profiles_dir),
                                                      refused), rules, env, secrets, progress=progress,
                                     stop_name=_stop_name)
    return report


def _quiet_resource_tracker() -> None:
    """Workers stopped on Ctrl-C die holding the locks dbt made in them; multiprocessing's resource
    tracker (started later, with these warning options) removes them and need not say so after the
    command's one line."""
    if "ignore:resource_tracker:UserWarning" not in sys.warnoptions:
        sys.warnoptions.append("ignore:resource_tracker:UserWarning")


def _lint_signal(signum, frame) -> None:
    # dbt swallows KeyboardInterrupt inside an invocation: the lint's compile loop also checks STOP
    from .lint.compile import STOP

    if not _in_finalizer(frame):
        STOP.append(_SIGNAL_NAMES.get(signum, "SIGINT"))
    _on_stop_signal(signum, frame)


def _lint_cleanup() -> None:
    import gc
    from multiprocessing.pool import RUN, Pool

    from .lint.compile import STOP

    STOP.clear()
    # A dbt compile that stops on a failing model can leave its thread pool running; finalised at
    # interpreter exit, its __del__ writes to a closed pipe ("Bad file descriptor" traceback). Collect
    # and stop such pools here, while the interpreter is whole.
    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, Pool) and getattr(obj, "_state", None) == RUN:
            obj.terminate()


def _confined_lint(kwargs: dict):
    """The lint in a child process that may write only beneath the work root (its scratch catalog)
    and the project's target/rerun_safety_lint (dbt's partial parse, reused by the next lint)."""
    from .confine import check_available, run_confined
    from .lint.compile import lint_session_dir
    from .warehouse.base import default_work_root, private_work_root

    check_available(False)
    work_root = private_work_root(default_work_root())
    writable = [work_root]
    project = Path(kwargs["project_dir"]).resolve()
    if (project / "dbt_project.yml").is_file():
        session = lint_session_dir(project, None)
        if session is not None:
            writable.append(session)
    with profile_folder(work_root) as copy_dir:
        rules, env, secrets, _, profiles_dir = child_setup(kwargs["project_dir"], kwargs["profiles_dir"],
                                                            kwargs["target"], kwargs["vars_yaml"], writable, copy_dir)
        result, _ = run_confined(_lint_child, ({**kwargs, "profiles_dir": profiles_dir}, work_root), rules, env,
                                 secrets, stop_name=_stop_name)
    return result


def _lint_child(kwargs: dict, work_root, confinement=None, progress=None):
    """The lint (in the confined child: with the stop signals as in the command)."""
    from dataclasses import replace as replaced

    from .confine import Confinement
    from .lint import run_lint

    if confinement is not None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _lint_signal)
    result = run_lint(**kwargs, work_root=work_root, confined=confinement is not None and confinement.confined)
    return replaced(result, confinement=(confinement or Confinement(False)).note(lint=True))


def _gameday_child(options, refused, confinement, progress):
    """In the confined child: stop signals as in the command, the game day; its progress goes to the
    command's process, which shows it. `refused`: credential-shaped variables the project's code names
    that it did not get (the run's notes say so)."""
    _quiet_resource_tracker()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_stop_signal)
    report = _run_gameday(replace(options, confinement=confinement), progress)
    if refused:
        note = ("environment: the project's code names credential-shaped variables; the game day did not pass "
                "them on (its copy of the profile holds what dbt needs, as dbt secrets): " + ", ".join(refused))
        report = replace(report, notes=(*report.notes, note))
    return report


def _run_gameday(options, progress):
    """The game day, with the fix search after it where --fix asks for one."""
    if options.fix:
        from .fix.search import gameday_with_fixes

        return gameday_with_fixes(options, progress)
    from .gameday import run_gameday

    return run_gameday(options, progress=progress)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(package_name="rerun-safety")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Prove that a dbt project is safe to run twice."""
    ctx.obj = {"debug": debug}


@main.command()
@common_options
@click.option("--select", "-s", multiple=True, help="dbt selection (default: the whole project).")
@click.option("--exclude", multiple=True, help="dbt exclusion.")
@click.option("--vars", "vars_yaml", default=None, help="YAML dict passed to dbt as --vars.")
@click.option("--batch-size", default="day", show_default=True,
              help="The simulated schedule: hour, day, week, month, year, or a duration such as 6h, 2d.")
@click.option("--steps", default=4, show_default=True, type=click.IntRange(1, 1000),
              help="How many batches at the end of the data are replayed (everything before them is "
                   "present for the first build).")
@click.option("--since", default=None, help="Copy only rows from this time on (ISO-8601): the game day costs "
                                            "what the slice costs.")
@click.option("--until", default=None, help="Copy only rows before this time (ISO-8601).")
@click.option("--float-tolerance", default=None, type=float,
              help="Relative tolerance for float columns (default suits float rounding).")
@click.option("--late-fraction", default=None, type=float,
              help="The late scenario replays inputs with a load time (loaded_at_field beside event_time) by "
                   "it; this share of the rows of inputs without one arrive late too (default 0, or 0.05 with "
                   "--late-by).")
@click.option("--late-by", default=None,
              help="How late those rows arrive, e.g. 6h, 2d (default: two batches).")
@click.option("--scenarios", default="default", show_default=True,
              help="Comma-separated: reference,replay,rerun,partial,backfill,late,determinism,concurrent; "
                   "`default` is all of them but concurrent (two runs of a batch at once, PostgreSQL), `all` "
                   "every one.")
@click.option("--output-dir", default=None, type=click.Path(file_okay=False),
              help="Where the reports go (default: <project>/target/rerun_safety).")
@click.option("--threads", default=None, type=click.IntRange(1, 64),
              help="Scenarios run in this many worker processes (default: the machine's CPU count, at most 8).")
@click.option("--max-sandbox-size", default="10GB", show_default=True,
              help="PostgreSQL: a sandbox database may grow to this size (e.g. 500MB, 2GiB); past it, or past the "
                   "server's free space less a margin, the game day ends its sessions and stops (exit 2).")
@click.option("--keep-sandboxes", is_flag=True, help="Keep the sandboxes for a day (for debugging): the report's notes say where; other game days' sweeps leave them until then.")
@click.option("--state", default=None, type=click.Path(file_okay=False),
              help="Folder of a previous manifest.json, for state: selectors (e.g. --select state:modified+).")
@click.option("--defer", is_flag=True,
              help="Accepted beside --state for a command line shared with dbt; the game day builds "
                   "everything upstream of the selection in its sandboxes, so nothing is deferred.")
@click.option("--baseline", default=None, type=click.Path(dir_okay=False),
              help="An earlier report.json (e.g. main's): exit 1 only for models that got worse than there.")
@click.option("--fix", is_flag=True,
              help="After the game day, try candidate fixes of each root cause in sandboxes and report those a game "
                   "day of the changed project proved safe (patches under the output folder's fixes/).")
@click.option("--apply", "apply_fixes", is_flag=True,
              help="With --fix: write the verified fixes into the project's files (refused, with nothing written, "
                   "if any of them changed since the game day read it).")
@_UNCONFINED
@click.pass_context
def gameday(ctx, project_dir, profiles_dir, target, select, exclude, vars_yaml, batch_size, steps, since, until,
            float_tolerance, late_fraction, late_by, scenarios, output_dir, threads, max_sandbox_size,
            keep_sandboxes, state, defer, baseline, fix, apply_fixes, unconfined):
    """Replay every incremental model in sandboxes and diff it against a clean reference build."""
    from .confine import Confinement, prestart

    _quiet_resource_tracker()
    if not unconfined:  # (after the warning options, which the resource tracker it starts takes)
        prestart()  # the confined game day's fork server imports dbt while this process imports the rest
    from .gameday import GamedayOptions, default_threads
    from .report import write_reports
    from .report.terminal import TerminalProgress, print_summary

    debug = ctx.obj["debug"]
    _preload()
    with exit_codes(debug, "interrupted by {name}; sandboxes removed"):
        if apply_fixes and not fix:
            raise ConfigError("--apply writes the fixes --fix verifies: pass --fix too")
        _recover_apply(project_dir)
        options = GamedayOptions.build(
            project_dir=project_dir, profiles_dir=profiles_dir, target=target, select=select,
            exclude=exclude, vars_yaml=vars_yaml, steps=steps, scenarios=scenarios,
            output_dir=output_dir, threads=threads or default_threads(), keep_sandboxes=keep_sandboxes,
            batch_size=batch_size,
            since=since, until=until, float_tolerance=float_tolerance, state=state, baseline=baseline,
            late_fraction=late_fraction, late_by=late_by, fix=fix, max_sandbox_size=max_sandbox_size)
        if unconfined:
            from .confine.wire import scrubbed
            from .secrets import Scrubber

            with TerminalProgress() as progress:
                report = _run_gameday(replace(options, confinement=Confinement(False)), progress)
            # the same scrubber as a confined run's answers pass
            _, _, secrets, _, _ = child_setup(options.project_dir, options.profiles_dir, options.target,
                                               options.vars_yaml, [])
            report = scrubbed(report, Scrubber(secrets))
        else:
            report = _confined_gameday(options)
        paths = write_reports(report, options.output_dir, options.project_dir)
        applied = None
        if apply_fixes:
            from .fix.apply import apply_fixes as apply

            applied = apply(report, options.project_dir)
    print_summary(report, paths)
    if applied is not None:
        click.echo(f"--apply: {len(applied)} fix(es) written: " + (", ".join(str(p) for p in applied) or "none"))
        declared = [f.model for f in report.fixes if f.verified and f.declaration]
        if declared:
            click.echo(f"--apply: left for review (a declaration of what a table is for): {', '.join(declared)}")
        from .fix.apply import outside

        elsewhere = [f"{f.model} ({f.path})" for f in report.fixes if f.verified and not f.declaration and outside(f)]
        if elsewhere:
            click.echo("--apply: left for review (a local package's file outside the project folder): "
                       + ", ".join(elsewhere))
    summary = report.summary()
    if "baseline" in summary:
        worse, before = summary["baseline"]["worse"], summary["baseline"]["unsafe_as_before"]
        click.echo(f"baseline: {len(worse)} model(s) worse than in --baseline"
                   + (f" ({', '.join(worse)})" if worse else "")
                   + (f"; unsafe as before: {', '.join(before)}" if before else ""))
    sys.exit(summary["exit_code"])


@main.command()
@common_options
@click.option("--select", "-s", multiple=True, help="dbt selection (default: every model).")
@click.option("--exclude", multiple=True, help="dbt exclusion.")
@click.option("--vars", "vars_yaml", default=None, help="YAML dict passed to dbt as --vars.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--state", default=None, type=click.Path(file_okay=False),
              help="Folder of a previous manifest.json, for state: selectors (e.g. --select state:modified+).")
@click.option("--defer", is_flag=True,
              help="Accepted beside --state for a command line shared with dbt; the lint compiles against an "
                   "empty scratch catalog, so nothing is deferred.")
@click.option("--batch-size", default=None,
              help="How often the models run (hour, day, 6h, ...), for window-shorter-than-run (default: `schedule:` "
                   "in rerun_safety.yml, else a day).")
@click.option("--with-data", is_flag=True,
              help="Also read, from the target (read-only, one aggregate query per source), how late the rows of "
                   "each source with a load time arrive, for window-shorter-than-lateness. Without it the lint "
                   "does not connect to the target.")
@click.option("--baseline", default=None, type=click.Path(dir_okay=False),
              help="A previous lint's JSON (main's, from --format json): fail only on errors not in it (a finding "
                   "is known by its model, rule and the SQL it points at, not by its line).")
@click.option("--model-budget", default=30.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds of analysis per model; a model that needs more is reported as skipped, with the reason.")
@_UNCONFINED
@click.pass_context
def lint(ctx, project_dir, profiles_dir, target, select, exclude, vars_yaml, fmt, state, defer, batch_size, with_data,
         baseline, model_budget, unconfined):
    """Find unsafe incremental patterns and non-determinism in compiled SQL."""
    import json

    from .lint import render_text

    _quiet_resource_tracker()
    if not unconfined:
        from .confine import prestart

        prestart()  # the confined child's fork server imports dbt while this process imports the rest
    kwargs = dict(project_dir=project_dir, profiles_dir=profiles_dir, target=target, select=select,
                  exclude=exclude, vars_yaml=vars_yaml, state=state, schedule=batch_size, with_data=with_data,
                  model_budget=model_budget)
    _preload()
    compared = None
    with exit_codes(ctx.obj["debug"], "lint interrupted by {name}; scratch catalog removed", handler=_lint_signal,
                    cleanup=_lint_cleanup):
        from .lint import baseline as lint_baseline

        known = lint_baseline.load(baseline) if baseline else None  # a bad file: one line before any work
        _recover_apply(project_dir)
        result = _lint_child(kwargs, None) if unconfined else _confined_lint(kwargs)
        if known is not None:
            compared = lint_baseline.compare(result, known)
            result = compared.result
    if fmt == "json":
        click.echo(json.dumps({**result.to_dict(), **({"baseline": compared.summary()} if compared else {})},
                              indent=2))
    else:
        click.echo(render_text(result, color=sys.stdout.isatty() and not os.environ.get("NO_COLOR")))
        if compared is not None:
            click.echo(compared.line())
    sys.exit((1 if compared.fails else 0) if compared is not None else (1 if result.has_errors else 0))


@main.command()
@click.option("--project-dir", default=".", show_default=True, type=click.Path(file_okay=False))
@click.option("--spark", is_flag=True, help="Also write the Spark shim (dbt-spark's incremental materialization "
                                           "routes partition_overwrite to the package).")
@click.option("--postgres-role", default=None, metavar="NAME",
              help="Print (write nothing) the SQL a DBA runs once to create a game-day role NAME, for a profile "
                   "role that may not create roles; the game day and the lint then use it through "
                   "RERUN_SAFETY_PG_GAMEDAY_ROLE and RERUN_SAFETY_PG_GAMEDAY_PASSWORD.")
@_COMMON[1]
@_COMMON[2]
@click.pass_context
def init(ctx, project_dir, spark, postgres_role, profiles_dir, target):
    """Write the partition_overwrite strategy shim into a dbt project (idempotent)."""
    from .init import write_shim

    if postgres_role is not None:
        with exit_codes(ctx.obj["debug"], "init interrupted by {name}"):
            click.echo(_postgres_role_sql(postgres_role, project_dir, profiles_dir, target), nl=False)
        return
    with exit_codes(ctx.obj["debug"], "init interrupted by {name}"):
        written = [write_shim(Path(project_dir))]
        if spark:
            written.append(write_shim(Path(project_dir), spark=True))
    for path, changed in written:
        click.echo(f"{'wrote' if changed else 'already present:'} {path}")


def _recover_apply(project_dir) -> None:
    """Before the project is read: an --apply that a kill stopped is undone (fix/apply.py's journal)."""
    from .fix.apply import recover

    restored = recover(Path(project_dir))
    if restored:
        click.echo(f"rerun-safety: an --apply stopped before its end was undone: {restored} file(s) of the project "
                   "put back as they were", err=True)


def _postgres_role_sql(name: str, project_dir, profiles_dir, target) -> str:
    """init --postgres-role: the DBA's SQL, for the profile's role where the project's profile names one."""
    from .warehouse.postgres.role import ROLE_PREFIX, init_sql

    if not name or len(name.encode()) > 63 or not name.isprintable() or name.startswith(ROLE_PREFIX):
        raise ConfigError(f"--postgres-role '{name}': a PostgreSQL role name of 1 to 63 bytes, not starting with "
                          f"{ROLE_PREFIX} (the game day's sweeps drop roles of that name)")
    user = None
    if (Path(project_dir) / "dbt_project.yml").is_file():
        from .profiles import load_target_output, resolve_profiles_dir

        try:
            _, _, output = load_target_output(Path(project_dir).resolve(), resolve_profiles_dir(profiles_dir),
                                              target, {})
            from .warehouse.dialects import dialect_for

            user = dialect_for(str(output.get("type") or "")).login_user(output)
        except Exception:  # noqa: BLE001 - without a profile: a placeholder for the profile's role
            user = None
    return init_sql(name, user)


@main.command()
@click.argument("left")
@click.argument("right")
@click.option("--key", "-k", default=None, help="Comma-separated key columns (keyed comparison).")
@click.option("--partition-by", default=None, help="Bucket by this column (dates by day) and list differing partitions.")
@click.option("--where", "where_sql", default=None, help="A boolean SQL condition applied to both sides.")
@click.option("--float-tolerance", "float_tolerance", default=None, metavar="REL",
              help="Float columns are equal within this relative tolerance (absolute below 1; 0: exact). "
                   "Default: 1e-9.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md"]), default="text", show_default=True)
@click.option("--all-columns", is_flag=True,
              help="Show the sampled rows of changed keys with every column (default: the key, then each "
                   "column that differs as left -> right).")
@common_options
@click.pass_context
def diff(ctx, left, right, key, partition_by, where_sql, float_tolerance, fmt, all_columns, project_dir, profiles_dir,
         target):
    """Compare two relations as multisets. A side is schema.table or path/to/file.duckdb:schema.table."""
    from .diff_command import RENDERERS, run_diff

    _preload()
    with exit_codes(ctx.obj["debug"], "diff interrupted by {name}", stop_first=True):
        result = run_diff(left, right, key=tuple(k.strip() for k in (key or "").split(",") if k.strip()),
                          partition_by=partition_by, where=where_sql, project_dir=project_dir,
                          profiles_dir=profiles_dir, target=target, float_tolerance=float_tolerance)
        text = RENDERERS[fmt](replace(result, all_columns=all_columns))
    click.echo(text)
    sys.exit(result.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
