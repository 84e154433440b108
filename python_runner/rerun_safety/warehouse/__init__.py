"""The only place that knows engines. Each engine is one `Adapter` (adapter.py) in its folder
(`duckdb/`, `postgres/`, `spark/`), registered once in `registry.ADAPTERS`: its dialect (the SQL pieces
that differ and the capabilities algorithms choose by), its sandboxes (an `Engine`: snapshots, clones,
release), what the diff reads and where the lint compiles; `base.py` has what they share (the work-folder
protocol, `SourceTable`, the clock's names). `dialects.dialect_for` and the factories of `engines.py` are
the ways in; this package imports no feature (tests/test_imports.py) and its own import loads no engine's
client."""
