"""The only place that knows engines: per engine (`duckdb/`, `postgres/`, `spark/`) its dialect (the
SQL pieces that differ and the capabilities algorithms choose by), its connections, its sandboxes
(snapshots, clones, release), what the diff reads and where the lint compiles; `base.py` has what
they share (the work-folder protocol too). `dialects.dialect_for` and the factories of `engines.py`
are the ways in; this package's own import loads no engine."""
