"""Fixtures for the `partition_overwrite` strategy tests: one dbt project per engine and module."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
