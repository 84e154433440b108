"""PostgreSQL's SQL: hashes by each type's hash opclass, pg_catalog reads, and what it does cheaply."""
from __future__ import annotations

import re
from typing import Sequence

from sqlglot import exp

from ..dialect import Dialect

# Types without an extended hash function: hashed through their text form.
_TEXT_HASHED = ("json", "xml", "point", "line", "lseg", "box", "path", "polygon", "circle", "user-defined", "money")

# The extended hash function of each type's default hash opclass (the one `hash_record_extended` and
# hash joins use, so it agrees with `=`: -0.0 = 0.0, 1.0 = 1.00, 'a ' = 'a' in char(n)), called per
# column; a row() record costs about twice as much.
_HASH_FUNCS = {
    "smallint": "hashint2extended", "integer": "hashint4extended",
    "text": "hashtextextended", "character varying": "hashtextextended", "character": "hashbpcharextended",
    "real": "hashfloat4extended", "double precision": "hashfloat8extended", "numeric": "hash_numeric_extended",
    "uuid": "uuid_hash_extended", "jsonb": "jsonb_hash_extended", "interval": "interval_hash_extended",
    "timestamp without time zone": "timestamp_hash_extended", "time without time zone": "time_hash_extended",
}

# information_schema's columns and tables, and a materialized view's the way information_schema would
# show them (its data_type: a built-in type's name without modifiers, ARRAY, or USER-DEFINED)
_MATVIEW_TYPE = ("case when t.typelem <> 0 and t.typlen = -1 then 'ARRAY' when tn.nspname = 'pg_catalog' "
                 "then format_type(a.atttypid, null) when t.typtype = 'd' and bn.nspname = 'pg_catalog' "
                 "then format_type(t.typbasetype, null) else 'USER-DEFINED' end")
_COLUMNS = (
    "select table_catalog::text, table_schema::text, table_name::text, column_name::text, data_type::text, "
    "ordinal_position::int from information_schema.columns union all "
    "select current_database()::text, n.nspname::text, r.relname::text, a.attname::text, "
    f"{_MATVIEW_TYPE}, a.attnum::int from pg_attribute a join pg_class r on r.oid = a.attrelid "
    "join pg_namespace n on n.oid = r.relnamespace join pg_type t on t.oid = a.atttypid "
    "join pg_namespace tn on tn.oid = t.typnamespace left join pg_type b on b.oid = t.typbasetype "
    "left join pg_namespace bn on bn.oid = b.typnamespace "
    "where r.relkind = 'm' and a.attnum > 0 and not a.attisdropped and has_table_privilege(r.oid, 'select')")
_TABLES = (
    "select table_catalog::text, table_schema::text, table_name::text, table_type::text from information_schema.tables "
    "union all select current_database()::text, n.nspname::text, r.relname::text, 'MATERIALIZED VIEW' "
    "from pg_class r join pg_namespace n on n.oid = r.relnamespace where r.relkind = 'm'")
_CATALOG = (f"select c.table_catalog, c.table_schema, c.table_name, c.column_name, c.data_type, t.table_type "
            f"from ({_COLUMNS}) as c left join ({_TABLES}) as t on c.table_catalog = t.table_catalog "
            f"AND c.table_schema = t.table_schema AND c.table_name = t.table_name")


def _null_hash(i: int) -> int:
    """A fixed 64-bit constant per column position (the hash of NULL there), as a signed bigint."""
    v = ((i + 1) * 0x9E3779B97F4A7C15) & (2**64 - 1)
    return v - 2**64 if v >= 2**63 else v


def resolved_address(output: dict) -> dict[str, str] | None:
    """What a confined child's environment needs so that libpq resolves no name there (no UDP for DNS):
    PGHOSTADDR, the first address of the host (libpq still checks TLS against the host's name); {} where
    nothing needs resolving (an address, a socket folder); None where libpq must resolve itself (several
    hosts, a PGHOSTADDR of the job's own, a name this machine does not resolve)."""
    import ipaddress
    import os
    import socket

    host = str(output.get("host") or "")
    if not host or host.startswith("/"):
        return {}
    if "," in host or os.environ.get("PGHOSTADDR"):
        return None
    try:
        ipaddress.ip_address(host)
        return {}
    except ValueError:
        pass
    try:
        port = int(output.get("port") or 5432)
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError, TypeError, UnicodeError):
        return None
    return {"PGHOSTADDR": str(found[0][4][0])} if found else None



class PostgresDialect(Dialect):
    row_addresses = True  # ctid
    concurrent_sides = True
    planner_statistics = True
    union_bucket_aggregate = True
    keyed_comparison = "address"
    folds_unquoted_to_lower = True
    drop_cascade = " cascade"
    cheap_clones = True  # a template database
    overlapping_runs = None  # advisory locks hold the first run's transaction open (overlap.py)
    cheap_row_hash = False
    distinct_on = True
    physical_row_order = True
    dbt_rejects_insert_overwrite = True
    dbt_microbatch_merges = True

    display_name = "PostgreSQL"
    default_schema = "public"
    double_type = "double precision"

    def row_hash(self, parts: Sequence[str]) -> str:
        if not parts:
            return "cast(0 as bigint)"
        # Uses each type's hash opclass, so it agrees with `=`: -0.0 = 0.0, 1.0 = 1.00, NaN = NaN.
        return f"hash_record_extended(row({', '.join(parts)}), 0)"

    def typed_row_hash(self, items: Sequence[tuple[str, str]]) -> str:
        """Each column hashed by its own type's hash function seeded by its position (NULL: a constant
        per position), the column hashes XORed, and the result through one more hash of all its 64
        bits. That last step matters for sums: `hash_record_extended` combines its columns linearly
        (h = 31 h + hash(col)), so swapping one column's values between two rows of a bucket keeps
        the sum of their hashes, up to wraparound (two thirds of such swaps went unseen). bigint is
        hashed from all 64 bits (its own hash folds them to 32 first); types without a function here
        share one `hash_record_extended(row(...))`."""
        if not items:
            return "cast(0 as bigint)"
        terms, rest = [], []
        for i, (expr, typ) in enumerate(items):
            if typ == "bigint":
                term = f"hashint4extended({i + 1}, {expr})"  # the value as the seed: all 64 bits mixed
            elif typ == "numeric":
                # numeric's hash returns the seed for NaN, Infinity and -Infinity alike: those (and only a
                # value whose hash happens to equal the seed) are hashed as float8, which tells them apart
                term = (f"case when hash_numeric_extended({expr}, {i + 1}) = {i + 1} then "
                        f"hashfloat8extended(cast({expr} as double precision), {i + 1}) "
                        f"else hash_numeric_extended({expr}, {i + 1}) end")
            elif typ == "boolean":
                term = f"hashint4extended(cast({expr} as integer), {i + 1})"
            elif typ in _HASH_FUNCS:
                term = f"{_HASH_FUNCS[typ]}({expr}, {i + 1})"
            else:
                rest.append(expr)
                continue
            terms.append(f"coalesce({term}, ({_null_hash(i)}))")
        if rest:
            terms.append(f"hash_record_extended(row({', '.join(rest)}), {len(items) + 1})")
        return f"hashint4extended(0, {' # '.join(terms)})"

    def hashed_as_text(self, data_type: str) -> bool:
        return data_type in _TEXT_HASHED or data_type.startswith(_TEXT_HASHED)

    def long_in_list(self, expr: str, values: str, wide: bool) -> str:
        # A constant array is hashed once (PostgreSQL 14+) and, unlike a semi-join, filters inside the
        # workers of a parallel scan.
        return f"{expr} = any(array[{values}]::{'numeric' if wide else 'bigint'}[])"

    def bucket_division(self, operand: str, lo: int, width: int, widened: bool) -> str:
        if widened:
            # numeric `/` keeps the fraction; the span is at least 2**31, so the width is at least
            # 2**13 and the quotient fits a bigint.
            return f"cast(div({operand} - ({lo}), {width}) as bigint)"
        return super().bucket_division(operand, lo, width, widened)

    def catalog_query(self) -> str:
        """information_schema leaves materialized views out: they come from pg_catalog."""
        return _CATALOG

    def table_stats(self, con, schema: str, name: str, columns: Sequence[str]) -> tuple | None:
        """Only for a plain table analyzed since its last 10% of changes, with a histogram or common
        values for every column. The numbers are a sample's: they only size buckets."""
        lit = lambda v: exp.Literal.string(v).sql(dialect="postgres")  # noqa: E731
        rows = con.fetchall(
            f"select c.reltuples, s.n_mod_since_analyze, st.attname, cast(st.histogram_bounds as text), "
            f"cast(st.most_common_vals as text) from pg_catalog.pg_class c "
            f"join pg_catalog.pg_namespace n on n.oid = c.relnamespace "
            f"left join pg_catalog.pg_stat_user_tables s on s.relid = c.oid "
            f"left join pg_catalog.pg_stats st on st.schemaname = n.nspname and st.tablename = c.relname "
            f"and not st.inherited and st.attname in ({', '.join(lit(c) for c in columns)}) "
            f"where c.relkind = 'r' and n.nspname = {lit(schema)} and c.relname = {lit(name)}")
        if not rows or rows[0][0] is None or rows[0][0] < 1 or rows[0][1] is None or rows[0][1] > 0.1 * rows[0][0]:
            return None
        found = {}
        for _n, _m, att, hist, mcv in rows:
            try:
                values = [int(v) for text in (hist, mcv) if text for v in text.strip("{}").split(",") if v != "NULL"]
            except ValueError:
                return None
            if att is None or not values:
                return None
            found[att] = (min(values), max(values))
        if set(found) != set(columns):
            return None
        return (int(rows[0][0]), *(v for c in columns for v in found[c]))

    def sorted_values(self, column: exp.Expression, sep: str | None) -> exp.Expression | None:
        lit = exp.Literal.string(sep) if sep is not None else None
        items = column if sep is None else exp.func("string_to_array", column, lit)
        picked = exp.select("v").from_(exp.Unnest(expressions=[items]).as_("u", table=["v"])).order_by("v")
        ordered = exp.Array(expressions=[picked])
        return ordered if sep is None else exp.func("array_to_string", ordered, lit)

    def diff_session_settings(self) -> list[str]:
        # Bucket aggregates with the default 4MB spill to disk. No JIT: the row hash of a wide table
        # is one long expression, which LLVM took seconds to compile in every parallel worker, for a
        # query that then runs in a fraction of that (150 columns, 200,000 rows: the rows step 6.8 s
        # with JIT, 1.4 s without).
        return ["set work_mem = '128MB'", "set jit = off"]

    def warm_output(self) -> dict | None:
        return {"type": "postgres", "host": "127.0.0.1", "port": 5432, "user": "warm", "password": "",
                "dbname": "warm", "schema": "warm", "threads": 1}

    def child_environment(self, output: dict, environ) -> tuple[dict[str, str], bool]:
        from .role import GAMEDAY_PASSWORD_ENV, GAMEDAY_ROLE_ENV

        # the team's game-day role (init --postgres-role): the sandboxes' role, not a credential of the job
        env = {k: environ[k] for k in (GAMEDAY_ROLE_ENV, GAMEDAY_PASSWORD_ENV) if k in environ}
        address = resolved_address(output)
        if address is None:
            return env, False
        return {**env, **address}, True  # PGHOSTADDR: libpq resolves no name in the child

    def login_user(self, output: dict) -> str | None:
        return str(output.get("user") or "") or None

    def address_text(self) -> str:
        return "cast(ctid as text)"

    def at_addresses(self, addresses) -> str:
        return f"ctid = any(array[{', '.join(repr(t) for t in addresses)}]::tid[])"

    def refusal_words(self):
        from ..refusals import ROLE, SANDBOX_FILE

        # what the game day's own role may not do (role.py): a superuser's, the owner of another database or
        # role, a membership it lacks (inside its sandbox it owns everything); and a statement that writes a
        # server file, refused before it is sent (redirect.refuse_server_files)
        return ((ROLE, re.compile(r"(?:must be (?:a )?superuser|must be owner of|must be a member of|must have "
                                  r"privileges of|permission denied (?:to|for))[^\n]*"), False),
                (SANDBOX_FILE, re.compile(r'refused in the sandbox: [^\n]*?(?:"([^"]*)"[^\n]*|$)', re.M), False))

    def network_needs(self, output: dict) -> tuple[tuple[int, ...] | None, bool, bool]:
        host = str(output.get("host") or "")
        try:
            port = int(output.get("port") or 5432)
        except (TypeError, ValueError):
            port = 5432
        socket = not host or host.startswith("/")  # libpq: a folder as the host is the server's socket's
        return ((), True, True) if socket else ((port,), True, False)


POSTGRES = PostgresDialect("postgres")
