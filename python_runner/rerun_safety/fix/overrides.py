"""A package model's config fix as a project-level override: the settings written for that model under
`models:` in the user's dbt_project.yml (pure text work on the file, no I/O).

dbt applies the root project's `models:` configs to a package's models over the package's own
dbt_project.yml, but a model file's config() call wins over both: an override is offered only where the
package's file does not set the key itself (candidates.sets_config). The file is edited as text, so its
comments and layout stay, and the edit is checked by reading both versions: the new one must hold
exactly the old data plus these settings, or no override is offered.
"""
from __future__ import annotations

import json
import re
from typing import Any

import yaml

_STEP = 2


def _key_line(line: str, key: str) -> re.Match | None:
    return re.match(rf"""^(\s*)(["']?){re.escape(key)}\2\s*:\s*(#.*)?$""", line.rstrip("\r\n"))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def model_override(text: str, fqn: list[str], settings: dict[str, Any]) -> str | None:
    """dbt_project.yml's text with `+<key>: <value>` for each setting under `models:` at the model's fqn
    (package, folders, model), inserted under the deepest part of that path the file already has
    (None: the file's layout there cannot take it as text, e.g. a flow mapping, or a check failed)."""
    try:
        before = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return None
    if not isinstance(before, dict):
        return None
    lines = text.splitlines(keepends=True)
    path = ["models", *fqn]
    lo, hi, parent, at = 0, len(lines), -1, None  # the block searched, its key's indent, where to insert
    depth = 0
    for depth, key in enumerate(path):
        block = [i for i in range(lo, hi) if _content(lines[i])]
        child = _indent(lines[block[0]]) if block else parent + _STEP
        found = next((i for i in block if _indent(lines[i]) == child and _key_line(lines[i], key)), None)
        if found is None:
            if parent < 0 and any(re.match(rf"""^(["']?){re.escape(key)}\1\s*:""", lines[i]) for i in block):
                return None  # `models: {...}` or another inline value at the top
            break
        parent, at = child, found + 1
        lo, hi = found + 1, next((i for i in range(found + 1, len(lines))
                                  if _content(lines[i]) and _indent(lines[i]) <= child), len(lines))
    else:
        depth = len(path)
    rest = path[depth:]
    indent = parent + _STEP if at is not None else 0
    new = []
    for key in rest:
        new.append(" " * indent + f"{key}:\n")
        indent += _STEP
    new += [" " * indent + f"+{k}: {json.dumps(_plain(v))}\n" for k, v in settings.items()]
    if at is None:  # no `models:` yet: at the end of the file
        head = text if not text or text.endswith("\n") else text + "\n"
        out = head + "".join(new)
    else:
        out = "".join(lines[:at]) + "".join(new) + "".join(lines[at:])
    return out if _adds_exactly(before, out, path, settings) else None


def _adds_exactly(before: dict, text: str, path: list[str], settings: dict[str, Any]) -> bool:
    """The new text's data is the old data plus these settings at `path` (and nothing else)."""
    try:
        after = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    node = after
    for key in path:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return False
        node = node[key]
    for k, v in settings.items():
        if node.get(f"+{k}") != _plain(v):
            return False
        del node[f"+{k}"]
    for depth in range(len(path), 0, -1):  # the keys created for the path, now empty, go too
        parent = after
        for key in path[:depth - 1]:
            parent = parent[key]
        if parent[path[depth - 1]] == {} and not _has(before, path[:depth]):
            del parent[path[depth - 1]]
        elif parent[path[depth - 1]] == {} and _get(before, path[:depth]) is None:  # `models:` with nothing
            parent[path[depth - 1]] = None
    return after == before


def _plain(value: Any) -> Any:
    """A setting's value as YAML data: a one-column key as the column, a longer one as a list."""
    if isinstance(value, (tuple, list)):
        return value[0] if len(value) == 1 else list(value)
    return value


def _get(data: Any, path: list[str]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _has(data: Any, path: list[str]) -> bool:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True
