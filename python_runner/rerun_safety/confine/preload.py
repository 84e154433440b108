"""Imported once by the fork server of confined children (see confine/__init__.py): what every game day
and lint imports, so that a child starts with it in memory. Importing starts no thread."""
import dbt.cli.main  # noqa: F401
import duckdb  # noqa: F401

import rerun_safety.cli  # noqa: F401
import rerun_safety.gameday.core  # noqa: F401
import rerun_safety.lint  # noqa: F401
import rerun_safety.report  # noqa: F401

try:  # the adapters a game day loads, where installed
    import dbt.adapters.duckdb  # noqa: F401
    import dbt.adapters.postgres  # noqa: F401
except ImportError:
    pass
