"""The rule registry (`RULES`: id, severity, what, fix, check) and running the rules on one model:
hits become findings, located in the model's file, with the model's suppressions applied."""
from __future__ import annotations

import re
from typing import Iterable

from ..context import ModelContext
from ..findings import ERROR, INFO, WARNING, Finding
from .base import Rule
from .config import (adapter_trap, config_columns, microbatch_postgres, own_strategy, unique_key_ignored,
                     unknown_strategy)
from .determinism import (clock_window, limit_without_order, order_not_total,
                          nondeterministic_function)
from .attributes import stale_attribute
from .hooks import hook_append, hook_writes_other
from .lookback import window_over_batch
from .windows import (append_reread, inclusive_window_bound, late_watermark, partition_lookback_unaligned,
                      window_shorter_than_lateness, window_shorter_than_run,
                      self_state, this_in_first_build, watermark_strict_gt)


RULES: dict[str, Rule] = {r.id: r for r in (
    Rule("append-reread", ERROR,
         "append (or the default strategy, delete+insert or merge, without unique_key: dbt then deletes nothing "
         "and inserts) whose incremental filter re-reads rows already written: a lookback or `>=` on a "
         "watermark from {{ this }}, or no filter at all",
         "Use delete+insert or merge with unique_key (or partition_overwrite) so re-read rows replace "
         "themselves, or drop already-loaded rows with `not exists` against {{ this }}.", append_reread),
    Rule("unique-key-ignored", ERROR, "unique_key configured with incremental_strategy 'append', which ignores it",
         "Switch to delete+insert or merge, or remove unique_key if rows really are append-only.", unique_key_ignored),
    Rule("watermark-strict-gt", ERROR,
         "watermark filter `col > (select max(col) from {{ this }})`: after a half-committed batch, or with "
         "late or tied events, rows below the new max are never loaded",
         "Re-read a lookback (`>=` max minus an interval, aligned to a grain) with delete+insert/merge on "
         "unique_key, or use rerun_safety.window_filter / microbatch.", watermark_strict_gt),
    Rule("late-watermark", ERROR,
         "a watermark on the event time (`event_ts > (select max(event_ts) from {{ this }})`, or `>=`) over a "
         "source that declares a separate load time (`loaded_at_field` beside `config: {event_time: ...}`, "
         "or `meta: {rerun_safety: {loaded_at: col}}`): rows that land late are never read. A lookback from "
         "the watermark is not judged",
         "Filter on the load time, or re-read a lookback at least as long as the lateness with a keyed "
         "strategy.", late_watermark),
    Rule("window-shorter-than-run", ERROR,
         "a lookback from the watermark of {{ this }} (`>= max(col) - interval ...`, or a bare `>=` on an "
         "instant) that reaches back less than one run of the schedule (`schedule:` in rerun_safety.yml, or "
         "lint --batch-size; default a day): after a half-committed run, the rows it did not commit that are "
         "older than the reach are never read again. A `>=` on a date column reaches its whole last day",
         "Reach back at least one run, plus how late rows arrive (`- interval '1 day'` for a daily run), with "
         "delete+insert or merge on unique_key; or set `schedule:` to how often the model really runs.",
         window_shorter_than_run),
    Rule("window-shorter-than-lateness", ERROR,
         "with `lint --with-data` only: a lookback from the watermark on a source's event time "
         "(`event_ts >= (select max(event_ts) - interval ... from {{ this }})`) that reaches back less than "
         "how late that source's rows arrive: the 99th percentile of load time minus event time, read from "
         "the target in one query per source (`loaded_at_field` beside `config: {event_time: ...}`, or "
         "`meta: {rerun_safety: {loaded_at: col}}`). A row loaded after the window has moved past its event "
         "time is never read",
         "Reach back at least the observed lateness (plus one run), with delete+insert or merge on "
         "unique_key; or filter on the load time instead.", window_shorter_than_lateness),
    Rule("stale-attribute", WARNING,
         "an incremental model that cuts its rows to a batch and joins the current state of something that "
         "changes (an untimed source, or a table or view built only from such: a customer's segment, a "
         "product's price), copying its columns into rows it writes once: a change there never reaches rows "
         "already written, while a rebuild would show it. Not for point-in-time (range) joins, snapshots, "
         "or inputs declared `static` in rerun_safety.yml",
         "Join the attributes where they are read (a view or a table rebuilt from the incremental facts), or "
         "re-read the rows whose attributes changed (merge on unique_key over the keys changed since the last "
         "run); declare a truly fixed input `static` in rerun_safety.yml.", stale_attribute),
    Rule("partition-lookback-unaligned", ERROR,
         "partition_overwrite whose lookback starts inside a partition (not truncated to the partition_key "
         "granularity): the oldest partition is replaced by its tail",
         "Start the batch at a partition boundary: `date_trunc('<grain>', max(col)) - interval '<n> <grain>'`, "
         "or use rerun_safety.window_filter(col, grain='<grain>').", partition_lookback_unaligned),
    Rule("nondeterministic-function", ERROR,
         "now()/current_timestamp/current_date/getdate, random(), uuid functions and the like: two builds "
         "of the same input differ. The clock in a table or view is a note where no incremental model reads "
         "what it computes: rebuilt in full, with no model below reading that column (or none at all)",
         "Derive the value from the data or pass it in as a var (e.g. the window end); for an audit column, "
         "list it in meta.rerun_safety.ignore_columns.", nondeterministic_function),
    Rule("clock-window", ERROR,
         "a filter on the clock (`current_date - 14`, `now() - interval ...`) in an incremental model or one "
         "that feeds it: the batch depends on when it runs. A warning in the incremental branch of a keyed "
         "write (merge or delete+insert on unique_key, partition_overwrite, microbatch): a rerun re-reads "
         "the same or a larger window and replaces by key, and only a gap between runs longer than the "
         "window or a backfill of older days misses rows",
         "Bound the batch by the data, not the clock: a lookback from the watermark of {{ this }} "
         "(`>= (select max(day) - 14 from {{ this }})`) or the window vars (rerun_safety.window_filter).",
         clock_window),
    Rule("self-state", ERROR,
         "an incremental model whose output reads its own previous output ({{ this }} beyond a watermark or "
         "`not exists` filter): running totals, previous-day lookups, unions with {{ this }}",
         "Compute the value from the sources alone (a window function over the source history, or re-read "
         "the whole lookback), or rebuild the model in full; filter on {{ this }} only for a watermark.",
         self_state),
    Rule("this-in-first-build", ERROR,
         "an incremental model whose first-build SQL (is_incremental() false) reads {{ this }}, in a CTE or "
         "anywhere: the relation does not exist before the first build, which fails on PostgreSQL even when "
         "nothing uses the CTE; a --full-refresh reads the table it replaces",
         "Move the read of {{ this }} (the CTE too) inside `{% if is_incremental() %}`.", this_in_first_build),
    Rule("window-over-batch", ERROR,
         "a window that looks across rows (lag, lead, a running or moving sum/avg/count/min/max) over rows "
         "that the incremental branch alone filters to the batch: the first rows of each batch see no "
         "predecessor. Not when the window is partitioned by the filtered column (whole partitions are read), "
         "its result is filtered again to the batch after it (a lookback read for the window, then trimmed), "
         "or the batch is unioned with rows read back from {{ this }} before it (the previous active rows)",
         "Read the rows the window needs: a lookback for the window's reach, then keep only the batch's rows "
         "after it (`where day >= ...` in an outer select), or re-read whole partitions "
         "(`where user_id in (select user_id from <new rows>)` with the window partitioned by user_id).",
         window_over_batch),
    Rule("config-column-missing", ERROR, "partition_key or unique_key names a column the compiled model lacks",
         "Fix the spelling in config(), or add the column to the model's select.", config_columns),
    Rule("dedup-order-not-total", ERROR,
         "a row picked or numbered by an order that can tie: row_number() = 1 or <= n, a row_number or ntile "
         "column, DISTINCT ON, first_value/last_value/nth_value/lag/lead of another column (no order by, or no "
         "column known to be unique: by a GROUP BY, DISTINCT, unique_key, unique tests or constraints, through "
         "joins on unique keys); string_agg/listagg/array_agg without order by. rank()/dense_rank() keep every "
         "tied row and are not flagged",
         "End the order by with a unique column (declared as unique_key or with a unique test), e.g. "
         "`order by updated_at desc, event_id`; give an ordered aggregate its order by.", order_not_total),
    Rule("limit-without-order", ERROR, "`limit` / `fetch first` without `order by`: an arbitrary subset",
         "Add an order by over a unique column, or filter instead of limiting.", limit_without_order),
    Rule("inclusive-window-bound", ERROR,
         "inclusive `between` (or `>=` start and `<=` end) on the window vars: the boundary row is in two windows",
         "Use the half-open window `col >= start and col < end`, e.g. rerun_safety.window_filter(col).",
         inclusive_window_bound),
    Rule("microbatch-postgres", WARNING,
         "microbatch on dbt-postgres: a MERGE upsert per batch keeps rows deleted upstream (a warning, not an "
         "error: dbt-postgres requires the unique_key this needs). A note when "
         "unique_key is the event_time column (or derived from it at the batch grain): each batch replaces "
         "whole keys, and only a key whose rows all disappear upstream stays",
         "Use delete+insert over the window (rerun_safety.window_filter) or rerun_safety's partition_overwrite.",
         microbatch_postgres),
    Rule("adapter-trap", ERROR,
         "config dbt-duckdb/dbt-postgres reject or ignore: insert_overwrite, partition_overwrite without "
         "partition_key or without the root shim, microbatch with unique_key on DuckDB, partition_by on a "
         "plain DuckDB table (warning)",
         "Use partition_overwrite with partition_key and run `rerun-safety init` for the shim; drop unique_key "
         "from DuckDB microbatch models.", adapter_trap),
    Rule("hook-append", ERROR,
         "a pre_hook/post_hook that INSERTs into a table without a key: every rerun appends its rows again "
         "(not when the hooks first DELETE from that table, the INSERT has ON CONFLICT or skips rows already "
         "there, or the table is declared in meta.rerun_safety.log_tables as one row per run)",
         "Delete the batch's rows from the table before inserting them (a delete + insert in the hooks), "
         "insert with ON CONFLICT on a key, or, for a run log, declare it: "
         "`meta={'rerun_safety': {'log_tables': ['schema.table']}}`.", hook_append),
    Rule("hook-writes-other", ERROR,
         "a pre_hook/post_hook that deletes from, truncates or updates a relation other than the model's own (a "
         "parent it consumes, a source, another model): a rerun or a partial run then reads that relation without "
         "what the hook took (not when the hooks insert into it again after the delete: they replace what they "
         "cover)",
         "Leave the parent as it is and filter what the model has processed in its own SQL (an anti-join on "
         "{{ this }}, or a window on the run's time), or let the parent's own model drop what it no longer needs.",
         hook_writes_other),
    Rule("unknown-strategy", ERROR,
         "an incremental_strategy that no macro implements (no get_incremental_<name>_sql in the project, the "
         "model's package or the adapter): the first build works, every incremental run fails",
         "Name a strategy the adapter has (append, delete+insert, merge, microbatch; partition_overwrite with "
         "this package's shim), or define get_incremental_<name>_sql in the root project.", unknown_strategy),
    Rule("own-strategy", INFO,
         "an incremental strategy (get_incremental_<name>_sql) or a materialization that is the project's own: "
         "the rules cannot read what it writes",
         "Nothing to change; run the game day, which replays it like any other model.", own_strategy),
    Rule("compile-error", WARNING, "the model could not be compiled (full-refresh or incremental branch); "
         "the message says why",
         "Fix the model so `dbt compile` succeeds (or, if it needs data the scratch catalog lacks, declare the "
         "source's columns in YAML); the other rules could not check it."),
    Rule("python-model", INFO, "a Python model: the SQL rules do not apply to it",
         "Nothing to do; the game day replays Python models like the others."),
    Rule("sql-parse-error", WARNING, "sqlglot could not parse the compiled SQL in the target's dialect",
         "Check the SQL; if it is valid for the warehouse, suppress with a reason. The other rules skipped "
         "this branch."),
    Rule("incremental-branch-unchecked", WARNING,
         "the incremental branch could not be compiled without writing to the target, so only the "
         "full-refresh SQL was checked",
         "Grant CREATEDB to the lint user (a scratch database is created and dropped), or lint against DuckDB."),
    Rule("suppression-missing-reason", ERROR, "a lint_ignore entry without a reason (it suppresses nothing)",
         "Write `{rule: <id>, reason: <why this is safe>}`."),
    Rule("suppression-unknown-rule", WARNING, "a lint_ignore entry names a rule that does not exist",
         "Use one of the rule ids in the table."),
)}


# ---------------------------------------------------------------------------------------------
# Running rules on one model
# ---------------------------------------------------------------------------------------------

def locate(raw_code: str, needles: Iterable[str]) -> int | None:
    """1-based line of the first match of the first needle that matches, skipping comment lines."""
    lines = raw_code.splitlines()
    for pattern in needles:
        rx = re.compile(pattern, re.IGNORECASE)
        for i, line in enumerate(lines, 1):
            stripped = line.strip()
            if stripped.startswith("--") or stripped.startswith("{#"):
                continue
            if rx.search(line):
                return i
    return None


def make_finding(ctx: ModelContext, rule_id: str, message: str, *, branch: str = "", line: int | None = None,
                 severity: str = "", key: str = "") -> Finding:
    """`key`: the construct's identity (its SQL as sqlglot prints it), for the finding's fingerprint;
    else the message (without where it is)."""
    from ..baseline import fingerprint

    rule = RULES[rule_id]
    where = f"{ctx.path}:{line}" if ctx.path and line else ctx.path
    text = f"{message} ({where})" if where else message
    return Finding(rule=rule_id, model=ctx.name, severity=severity or rule.severity, message=text,
                   hint=rule.fix, unique_id=ctx.unique_id, path=ctx.path, line=line, branch=branch,
                   fingerprint=fingerprint(ctx.name, rule_id, key or message))


def run_rules(ctx: ModelContext) -> list[Finding]:
    """Every rule on one model, each construct reported once (full-refresh branch first)."""
    findings, seen = [], set()
    for rule in RULES.values():
        if rule.check is None:
            continue
        for hit in rule.check(ctx):
            ident = (hit.rule, hit.key or hit.message)
            if ident in seen:
                continue
            seen.add(ident)
            findings.append(make_finding(ctx, hit.rule, hit.message, branch=hit.branch,
                                         line=locate(ctx.raw_code, hit.needles), severity=hit.severity,
                                         key=hit.key))
    return findings


def suppressions(ctx: ModelContext) -> tuple[dict[str, str], list[Finding]]:
    """The model's `meta.rerun_safety.lint_ignore` as {rule: reason}, plus findings for bad entries."""
    entries = ctx.rerun_safety_meta.get("lint_ignore") or []
    if isinstance(entries, (str, dict)):
        entries = [entries]
    allowed, problems = {}, []
    for entry in entries:
        rule = entry.get("rule") if isinstance(entry, dict) else entry
        reason = entry.get("reason") if isinstance(entry, dict) else None
        rule = str(rule or "").strip()
        if rule and rule not in RULES:
            problems.append(make_finding(ctx, "suppression-unknown-rule",
                                         f"lint_ignore names unknown rule '{rule}'", branch="config",
                                         line=locate(ctx.raw_code, (r"lint_ignore",))))
            continue
        if not rule or not str(reason or "").strip():
            problems.append(make_finding(ctx, "suppression-missing-reason",
                                         f"lint_ignore entry for rule '{rule or '?'}' has no reason, so it "
                                         "suppresses nothing", branch="config",
                                         line=locate(ctx.raw_code, (r"lint_ignore",))))
            continue
        allowed[rule] = str(reason).strip()
    return allowed, problems


def lint_model(ctx: ModelContext, extra: Iterable[Finding] = (), run: bool = True) -> tuple[list[Finding], list[Finding]]:
    """(findings, suppressed findings) for one model; `extra` are findings made outside the rules
    (compile and parse errors), subject to the same suppressions."""
    allowed, problems = suppressions(ctx)
    kept, suppressed = [], []
    for f in [*extra, *(run_rules(ctx) if run else [])]:
        (suppressed if f.rule in allowed else kept).append(f)
    return kept + problems, suppressed
