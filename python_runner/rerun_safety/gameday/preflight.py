"""Configuration errors the game day can name before it replays anything (exit 2).

The `partition_overwrite` strategy raises these itself, but only on an incremental run (a first
build never calls a strategy), so a game day would otherwise spend its reference build and
then report the model as `error` in every scenario. These checks mirror the strategy macro's
(macros/_internal/_partition_overwrite.sql) with the same wording.
"""
from __future__ import annotations

from typing import Iterable

from ..errors import ConfigError
from ..project import Model

GRANULARITIES = ("hour", "day", "month", "year")
STRATEGY = "partition_overwrite"
_SHAPE = ("partition_key='<column>', partition_key=['<column>', ...] or "
          "partition_key={'field': '<date or timestamp column>', 'granularity': 'day'}")


def _fail(model: Model, message: str) -> ConfigError:
    return ConfigError(f"model {model.name} (incremental_strategy='{STRATEGY}'): {message}")


def partition_key_columns(model: Model) -> tuple[list[str], str | None]:
    """The partition_key's column names and granularity; ConfigError when the shape is wrong."""
    raw = model.partition_key
    if raw is None or raw == "" or raw == [] or raw == {}:
        raise _fail(model, f"partition_key is not set. Add {_SHAPE} to the model's config")
    if isinstance(raw, dict):
        field = raw.get("field")
        if not field or not isinstance(field, str):
            raise _fail(model, f"partition_key is a dict without a 'field' column name (got {raw!r}). Use {_SHAPE}")
        granularity = raw.get("granularity") or "day"
        if not isinstance(granularity, str) or granularity.lower() not in GRANULARITIES:
            raise _fail(model, f"partition_key granularity '{granularity}' is unknown. "
                               f"Set 'granularity' to one of {', '.join(GRANULARITIES)}")
        return [field], granularity.lower()
    if isinstance(raw, str):
        return [raw], None
    if isinstance(raw, (list, tuple)) and all(isinstance(n, str) and n for n in raw):
        return list(raw), None
    raise _fail(model, f"partition_key must be {_SHAPE}; got {raw!r}")


def transactions_off(target_output: dict) -> str:
    """The profile setting that runs statements outside a transaction, or ''."""
    if target_output.get("disable_transactions"):
        return "disable_transactions: true"
    if target_output.get("autocommit"):
        return "autocommit: true"
    return ""


def check_config(models: Iterable[Model], target_output: dict, target_name: str) -> None:
    """Before any sandbox exists: the strategy's config and the profile's transaction mode."""
    po = [m for m in models if m.incremental and m.strategy == STRATEGY]
    for m in po:
        partition_key_columns(m)
    off = transactions_off(target_output)
    if po and off:
        names = ", ".join(sorted(m.name for m in po))
        raise ConfigError(f"target '{target_name}' sets {off}, but {names} use incremental_strategy="
                          f"'{STRATEGY}', whose delete and insert must run in one transaction: remove "
                          f"{off.split(':')[0]} from the target, or pick another strategy for those models")


def check_columns(model: Model, columns: Iterable[str]) -> None:
    """After the reference build: every partition_key column is a column of the built model."""
    if not (model.incremental and model.strategy == STRATEGY):
        return
    names, _ = partition_key_columns(model)
    built = list(columns)
    lower = {c.lower() for c in built}
    for name in names:
        if name.lower() not in lower:
            raise _fail(model, f"partition_key names '{name}', which is not a column of the model "
                               f"(columns: {', '.join(built)}). Set partition_key to one of them")
