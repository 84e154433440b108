"""Multiset diff of two relations: bucket checksums in the warehouse first, rows only where they differ.

How it works
  1. Each side is cut into buckets: by key range (one integer key), by the hash of the key
     (other keys), by the row hash (no key) or by a partition column. Per bucket the warehouse
     computes `count(*)` and `sum(row hash)`; only those aggregates are compared.
     With hash buckets a plain `count(*), sum(row hash)` of both sides comes first, so identical
     tables cost one checksum scan; range and column buckets are cheap enough to go first.
  2. Only buckets whose checksums differ are read again, row by row, and compared as multisets
     of (key, row hash) in SQL (one connection) or in Python, bucket chunk by bucket chunk (two
     connections: only bucket checksums and the rows of differing buckets cross). A few sample
     rows are fetched at the end.

PostgreSQL specifics (all plain SELECTs; the session only sets work_mem)
  - Both sides' bucket checksums are one aggregate over a UNION ALL, which the planner runs as a
    Partial HashAggregate in parallel workers (`max_parallel_workers_per_gather`, default 2).
    Grouped by an expression of a unique key, the planner expects one group per row and never
    picks a parallel plan; over a UNION ALL it expects few groups. One side alone (two databases)
    gets an empty second branch for the same reason, and the two databases run at the same time.
  - The row hash calls each column type's own extended hash function (see `PostgresDialect.typed_row_hash`), about
    twice as fast as `hash_record_extended(row(...))`, and mixes the result once more.
  - Key-range buckets of an analyzed table are sized from `pg_stats` (no min/max scan); the
    bucket boundaries change no answer, only the speed.
  - The re-read of differing buckets filters with a constant array (hashed, parallel) and keeps
    one `ctid` per differing row, so the sample rows are fetched by address, not by a third scan.

Exactness (the same equality as `EXCEPT ALL` on each engine)
  - A row present twice is two rows: `{1,1,2}` and `{1,2,2}` differ, with or without a key.
  - NULL is a value: NULL equals NULL, and `(1, NULL)` differs from `(NULL, 1)`.
  - Floats (double, real) are equal within a relative tolerance, see "Floats" below; with
    `float_tolerance=0` they are hashed by exact value: `0.1 + 0.2` differs from `0.3`. `-0.0`
    equals `0.0` and NaN equals NaN, as the engines' own `=` and `EXCEPT ALL` decide.
  - PostgreSQL numerics compare by value (`1.0` equals `1.00`), as `=` does.
  - A column whose type differs between the sides is compared by its text form on both sides and
    the change is listed in `type_changes`: a timestamp that lost its microseconds differs, one
    that kept them compares equal; `1.0` and `1.00` across a decimal scale change differ.
  - Row identity is a 64-bit hash (DuckDB `hash(...)`; PostgreSQL: each type's hash opclass
    function, so it follows `=`), and a bucket matches when its count and the sum of its hashes
    match. The row hash is mixed non-linearly at the end, so values swapped between two rows of
    a bucket change the sum (`hash_record_extended` is linear in its columns and kept it).
    DuckDB's `hash(a, b, ...)` XORs its last column's hash into a mix of the others, so it is
    hashed once more for the same reason. One limit: PostgreSQL hashes timestamp, time and
    interval values through a 32-bit fold of their 64 bits, so about one pair of different
    values in 2^32 shares a hash (bigint, whose own hash folds too, is hashed from all 64 bits
    here). Otherwise two different multisets are taken as equal only on a 64-bit sum collision.

Floats
  Two float values a, b are equal when |a - b| <= tol * max(|a|, |b|, 1): relative for magnitudes
  above 1, absolute (tol) below, so that a sum that should be 0 and came out as 1e-13 is still 0.
  The default tol, DEFAULT_FLOAT_TOLERANCE = 1e-9, is about 4,500 times the 64-bit machine epsilon: the
  order of summation moves a sum of 10^6 values by about 1e-14 of its size, and the worst-case
  bound n * eps stays below 1e-9 up to 10^7 same-sign terms; a change of one part in a billion is
  still found. 32-bit columns (real) use at least 2^-20 (~9.5e-7), eight times their own epsilon.
  Integers, decimals, strings, dates and keys stay exact; a column whose type differs between the
  sides is compared by its text form, exactly.
  - Checksums: each float is rounded before hashing to a grid no wider than its tolerance (to
    p = 1 + ceil(-log2 tol) significant bits by a Veltkamp split for |x| >= 1, to multiples of
    2^(1-p) below 1; infinities and NaN as they are), so equal rounded values are always within
    the tolerance and tables equal up to float noise keep their checksums.
  - Two values within the tolerance on either side of a rounding boundary round apart: their
    buckets differ and are confirmed row by row. Where a row left unmatched by the (rounded) row
    hash on the left and one on the right have the same non-float columns and rounded floats
    within two tolerances, their buckets are read again with exact float values and the rows
    paired in Python (same key and non-float columns, every float within the tolerance); a key
    whose rows all pair is no longer changed. Over MAX_TOLERANCE_ROWS unmatched rows the pairing is skipped and the counts are
    those of the rounded values (the tables differ anyway).

Modules
  results  the sides, the result, the error     plan     columns, row hashes, bucketing
  sql      the engines' SQL pieces, filters      buckets  bucket checksums, differing buckets
  floats   float tolerance, rounding, pairing    rows     row-level multiset comparison
  limits   sizes and limits (read at call time)  samples  the sample rows, columns of a pair
  keyed    a wide keyed table: differing keys    core     compare, diff_relations
           by a join, their columns compared     fingerprint  a relation's row count and row-hash
                                                          sum (a fix's clean build vs the first)
"""
from __future__ import annotations

from .core import compare, diff_relations
from .floats import (DEFAULT_FLOAT_TOLERANCE, FLOAT_ABS_FLOOR, REAL_MIN_TOLERANCE, check_float_tolerance,
                     float_tolerance_of, floats_close, round_float_sql)
from .limits import (CHUNK_ROWS, HASH_ROWS_PER_BUCKET, MAX_BUCKETS, MAX_LISTED_BUCKETS, MAX_PARTITIONS,
                     MAX_TOLERANCE_ROWS, PG_RANGE_ROWS_PER_BUCKET, RANGE_ROWS_PER_BUCKET, SAMPLE_ROWS)
from .results import DiffError, DiffResult, Side
from .sql import columns_of, parse_where, row_hash

__all__ = ["CHUNK_ROWS", "DEFAULT_FLOAT_TOLERANCE", "FLOAT_ABS_FLOOR", "HASH_ROWS_PER_BUCKET", "MAX_BUCKETS",
           "MAX_LISTED_BUCKETS", "MAX_PARTITIONS", "MAX_TOLERANCE_ROWS", "PG_RANGE_ROWS_PER_BUCKET",
           "RANGE_ROWS_PER_BUCKET", "REAL_MIN_TOLERANCE", "SAMPLE_ROWS", "DiffError", "DiffResult", "Side",
           "check_float_tolerance", "columns_of", "compare", "diff_relations", "float_tolerance_of", "floats_close",
           "parse_where", "round_float_sql", "row_hash"]
