"""What the lint reads of a manifest node's config, for core.py and the notes beside it."""
from __future__ import annotations

from typing import Any

from ..project import hook_sql


def config_get(node, key: str) -> Any:
    cfg = node.config
    value = getattr(cfg, key, None)
    if value is None and hasattr(cfg, "get"):
        value = cfg.get(key)
    return value


def hooks(node, key: str) -> list[str]:
    return hook_sql(config_get(node, key))


def is_incremental(node) -> bool:
    return node is not None and getattr(node.config, "materialized", None) == "incremental"
