"""A package model's fix as a project-level setting in the user's dbt_project.yml: config written for
that model under `models:`, or a var of the package under `vars:` (pure text work on the file, no I/O).

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
    return project_setting(text, ["models", *fqn], {f"+{k}": v for k, v in settings.items()}, replace=False)


def package_var(text: str, package: str, name: str, value: Any) -> str | None:
    """dbt_project.yml's text with the var `name` set for `package` (`vars: {package: {name: value}}`, which
    dbt reads before the root's global vars and the package's own); a value already set there is replaced
    on its line (None: the layout cannot take it as text, or a check failed)."""
    return project_setting(text, ["vars", package], {name: value}, replace=True)


def project_setting(text: str, path: list[str], settings: dict[str, Any], replace: bool) -> str | None:
    """The text with each `key: value` of `settings` under the mapping at `path`, inserted under the
    deepest part of that path the file already has; a key the mapping has: its value replaced on the key's
    own line where `replace` (one setting), else None."""
    try:
        before = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return None
    if not isinstance(before, dict):
        return None
    lines = text.splitlines(keepends=True)
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
        block = [i for i in range(lo, hi) if _content(lines[i])]
        child = _indent(lines[block[0]]) if block else parent + _STEP
        has = [k for k in settings if any(_indent(lines[j]) == child and _key_line(lines[j], k) or
                                          _indent(lines[j]) == child and _set_line(lines[j], k) for j in block)]
        if has and (not replace or len(settings) > 1):
            return None
        for k, v in settings.items():  # a key the mapping already has: its value replaced on its line
            i = next((i for i in block if _indent(lines[i]) == child and _set_line(lines[i], k)), None)
            if i is not None:
                m = _set_line(lines[i], k)
                end = "\n" if lines[i].endswith("\n") else ""
                note = f"  {m.group(4)}" if m.group(4) else ""
                lines[i] = f"{m.group(1)}{m.group(2)}{k}{m.group(2)}: {json.dumps(_plain(v))}{note}{end}"
            elif any(_indent(lines[j]) == child and _key_line(lines[j], k) for j in block):
                return None  # the key opens a block of its own
        text = "".join(lines)
        settings = {k: v for k, v in settings.items()
                    if not any(_indent(lines[j]) == child and _set_line(lines[j], k) for j in block)}
        if not settings:
            return text if _adds_exactly(before, text, path, {}, replaced=True) else None
    rest = path[depth:]
    indent = parent + _STEP if at is not None else 0
    new = []
    for key in rest:
        new.append(" " * indent + f"{key}:\n")
        indent += _STEP
    new += [" " * indent + f"{k}: {json.dumps(_plain(v))}\n" for k, v in settings.items()]
    if at is None:  # no such top-level key yet: at the end of the file
        head = text if not text or text.endswith("\n") else text + "\n"
        out = head + "".join(new)
    else:
        out = "".join(lines[:at]) + "".join(new) + "".join(lines[at:])
    return out if _adds_exactly(before, out, path, settings) else None


def _set_line(line: str, key: str) -> re.Match | None:
    """`key: <a scalar>` on one line (a value a setting can replace)."""
    m = re.match(rf"""^(\s*)(["']?){re.escape(key)}\2\s*:\s*([^\s#{{\[|>][^#]*?)\s*(#.*)?$""", line.rstrip("\r\n"))
    return m if m and m.group(3) else None


def _adds_exactly(before: dict, text: str, path: list[str], settings: dict[str, Any], replaced: bool = False) -> bool:
    """The new text's data is the old data plus these settings at `path` (and nothing else); `replaced`:
    the settings replaced values the old data had (compared with the old data's values swapped in)."""
    try:
        after = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    if replaced:
        return isinstance(after, dict) and _swap(after, path, _get(before, path)) == before
    node = after
    for key in path:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return False
        node = node[key]
    for k, v in settings.items():
        if node.get(k) != _plain(v):
            return False
        del node[k]
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


def _swap(data: dict, path: list[str], old: Any) -> dict:
    """`data` with the mapping at `path` replaced by `old`'s keys' values where both have them."""
    node = data
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and isinstance(old, dict):
        for k in node:
            if k in old:
                node[k] = old[k]
    return data
