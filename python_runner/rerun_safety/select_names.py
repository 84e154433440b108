"""A `--select` that can match nothing, told before dbt parses the project (which takes a minute on a
large one), with the closest names.

Only plain terms are checked (`orders`, `+orders+`, `2+orders`, `@orders`, `marts.orders`): a term
with a method (`tag:`, `path:`, `state:`), a wildcard or a path is left to dbt. A plain term matches a
model's, seed's or snapshot's name (a file's stem, or a `name:` in the project's YAML), a folder
beneath the model, seed or snapshot paths, or a package; a dotted term (an fqn, `orders.v2`) when each
part does. The names come from reading the files, never from running anything, and the check says
nothing when it cannot read them (dbt answers then).
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Iterable, Sequence

import yaml

_PATH_KEYS = (("model-paths", "models"), ("seed-paths", "seeds"), ("snapshot-paths", "snapshots"))
_NAME_LINE = re.compile(r"^\s*-?\s*name:\s*['\"]?([\w.-]+)", re.MULTILINE)
_GRAPH = re.compile(r"^(?:\d*\+|@)?(?P<name>.*?)(?:\+\d*)?$")
_FILES = (".sql", ".py", ".csv")


def _project_names(root: Path, names: set[str], files: set[str]) -> str | None:
    """Add the names a dbt project (at `root`) defines; its packages folder (None: unreadable)."""
    try:
        doc = yaml.safe_load((root / "dbt_project.yml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("name"), str):
        names.add(doc["name"].lower())
    for key, default in _PATH_KEYS:
        paths = doc.get(key, [default])
        for rel in paths if isinstance(paths, list) else [default]:
            base = root / str(rel)
            if not base.is_dir():
                continue
            for path in base.rglob("*"):
                if path.is_dir():
                    names.add(path.name.lower())
                elif path.suffix in _FILES:
                    files.add(path.stem.lower())
                elif path.suffix in (".yml", ".yaml"):
                    try:
                        names.update(n.lower() for n in _NAME_LINE.findall(path.read_text(errors="replace")))
                    except OSError:
                        continue
    folder = doc.get("packages-install-path", "dbt_packages")
    return str(folder) if isinstance(folder, str) else "dbt_packages"


def known_names(project_dir: Path) -> tuple[set[str], set[str]] | None:
    """(every name a plain term may match, the models', seeds' and snapshots' file names), or None."""
    names: set[str] = set()
    files: set[str] = set()
    packages = _project_names(project_dir, names, files)
    if packages is None:
        return None
    folder = project_dir / packages
    if folder.is_dir():
        for pkg in sorted(folder.iterdir()):
            if pkg.is_dir():
                names.add(pkg.name.lower())
                _project_names(pkg, names, files)
    return names | files, files


def _terms(select: Iterable[str]) -> list[str]:
    return [t for s in select for t in re.split(r"\s+", s.strip()) if t]


def _plain(term: str) -> str | None:
    """The name a plain term selects by (graph operators taken off), or None: not a plain term."""
    name = _GRAPH.match(term)["name"]
    if not name or any(c in name for c in ":*?/[]\\") or name.endswith(_FILES):
        return None
    return name.lower()


def unmatched(project_dir: Path, select: Sequence[str]) -> str:
    """When no term of the selection can match anything: what to tell the user, else ""."""
    terms = _terms(select)
    if not terms:
        return ""
    found = known_names(project_dir)
    if found is None:
        return ""
    names, files = found
    missing: list[str] = []
    for term in terms:
        # an intersection (a,b) matches nothing when one of its parts does not
        parts = [_plain(p) for p in term.split(",")]
        if any(p is None for p in parts):
            return ""  # a method, a wildcard or a path: dbt decides
        bad = [p for p in parts if not all(x in names or re.fullmatch(r"v\d+", x) for x in p.split("."))]
        if not bad:
            return ""
        missing += bad
    pieces = []
    for name in dict.fromkeys(missing):
        close = closest(name, files)
        pieces.append(f"no model, seed, snapshot, folder or package is named {name}"
                      + (f" (did you mean {', '.join(close)}?)" if close else ""))
    return "; ".join(pieces)


def closest(name: str, candidates: Iterable[str]) -> list[str]:
    """Up to three of `candidates` that look like `name`."""
    return difflib.get_close_matches(name.lower(), sorted({c.lower() for c in candidates}), n=3, cutoff=0.6)
