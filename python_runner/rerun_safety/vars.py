"""`--vars`: the YAML dictionary a user passes to dbt, refused in one line when it is not one or when its
aliases would expand without bound once dbt copies and serialises it."""
from __future__ import annotations

import yaml

from .errors import ConfigError


def parse_vars(vars_yaml: str | None) -> dict:
    if not vars_yaml:
        return {}
    try:
        data = yaml.safe_load(vars_yaml)
    except yaml.YAMLError as err:
        raise ConfigError(f"--vars is not valid YAML: {str(err).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("--vars must be a YAML dictionary, e.g. '{key: value}'")
    size = _expanded_size(data, {})
    if size > MAX_VARS_VALUES:
        raise ConfigError(f"--vars expands to more than {MAX_VARS_VALUES:,} values through its YAML aliases "
                          f"({'a recursive alias' if size == float('inf') else f'{size:,.0f}'}): write the "
                          "values out, without aliases that repeat them")
    return data


# what --vars may expand to once its YAML aliases are written out (dbt copies and serialises them whole)
MAX_VARS_VALUES = 100_000


def _expanded_size(value, memo: dict) -> float:
    """How many values `value` holds with every alias written out (an alias is one shared object in
    PyYAML's result: counted once per place it appears, without walking it again)."""
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, dict):
        memo[key] = float("inf")  # reached again while counting it: an alias to itself
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in value.items())
    elif isinstance(value, (list, tuple, set)):
        memo[key] = float("inf")
        size = 1 + sum(_expanded_size(v, memo) for v in value)
    else:
        size = 1
    memo[key] = size
    return size
