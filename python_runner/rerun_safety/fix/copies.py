"""The copy of a project a fix's verifying game day changes (fix/search.py): the user's files are never touched.

What a copy leaves out, the links dbt deps made into the project pointed at the copy's own folders, and a
local package outside the project folder copied beside it and linked in its place.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

# what a copy of the project leaves out: dbt's output, logs, and DuckDB files (a profile names its
# database by a path from the working folder, not from the project)
_NOT_COPIED = shutil.ignore_patterns("target", "logs", ".git", "*.duckdb", "*.duckdb.wal", "__pycache__")


def not_copied(work_root: Path):
    """The ignore function of a copy: _NOT_COPIED, and the work root itself where it lies inside the
    project (a copy into it would copy itself)."""
    root = work_root.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        return set(_NOT_COPIED(folder, names)) | {n for n in names if (Path(folder) / n).resolve() == root}
    return ignore


def relink(copy: Path, project_dir: Path) -> None:
    """Each symbolic link of the copy that points into the project (dbt deps links a local package
    under dbt_packages/ by its absolute path) made to point to the same place in the copy: else the
    copy would build the user's files instead of the changed ones."""
    root = project_dir.resolve()
    for folder, dirs, files in os.walk(copy):
        for name in dirs + files:
            link = Path(folder) / name
            if not link.is_symlink():
                continue
            target = (link.parent / os.readlink(link)).resolve()
            if target == root or root in target.parents:
                link.unlink()
                link.symlink_to(os.path.relpath(copy / target.relative_to(root), link.parent))


def copy_package(folder: Path, copy: Path, link: Path, root: Path) -> None:
    """A local package outside the project folder copied into the fix's folder (once), and the copy of the
    project's link to it pointed there: the candidate changes the copy, never the package (what it holds of
    the project itself, a package's integration_tests folder, and its own dbt output are left out)."""
    into = folder / "packages" / link.name
    if not into.exists():
        def ignore(where: str, names: list[str]) -> set[str]:
            out = set(_NOT_COPIED(where, names))
            for n in names:
                p = Path(where) / n
                if n in ("dbt_packages", "dbt_modules") or (p.is_dir() and (p / "dbt_project.yml").is_file()
                                                           and p.resolve() != root):
                    out.add(n)  # another project (its integration_tests) and installed packages
            return out

        shutil.copytree(root, into, ignore=ignore, symlinks=True)
    target = copy / link
    if target.is_symlink() or target.exists():
        target.unlink()
    target.symlink_to(into)
