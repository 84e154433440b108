"""Sizes and limits of the diff. Read at call time (`limits.X`), so a test can set them."""

SAMPLE_ROWS = 5
MAX_PARTITIONS = 400
MAX_BUCKETS = 1 << 18
RANGE_ROWS_PER_BUCKET = 64

# PostgreSQL's aggregate cost barely depends on the number of groups: smaller buckets there
# mean fewer rows to read again.
PG_RANGE_ROWS_PER_BUCKET = 64
HASH_ROWS_PER_BUCKET = 128
MAX_LISTED_BUCKETS = 50_000  # more differing buckets than this: compare every row instead
MAX_LISTED_KEYS = 20_000  # unmatched keys read back to filter the float pairing and column search, at most
CHUNK_ROWS = 200_000  # two connections: rows per side held in memory at once
MAX_TOLERANCE_ROWS = 200_000  # unmatched rows read back for the float pairing, at most
SPARK_CHUNK_ROWS = 2_000_000  # Spark: rows of differing buckets per query (each one a scan; only unmatched groups return)
WIDE_COLUMNS = 32  # keyed on one column, from this many compared columns: the differing keys by a join (keyed.py)
WIDE_MAX_ROWS = 2_000_000  # ... on DuckDB, up to this many rows a side (the join holds every key and hash)
WIDE_GROUP_COLUMNS = 30  # ... DuckDB hashes each side's columns in groups of at most this many (PostgreSQL: one
# group: its aggregate costs more per group, and it reads the differing keys' rows by address)
