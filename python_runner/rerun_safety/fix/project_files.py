"""Where a model's file and its package's settings are, as the first game day's project has them (for
fix/search.py; `first` is that game day's gameday.core.Finished): the model's file beneath the project
folder, whether the search may patch it, the texts its window can read (its SQL and the macros it calls)
and the dbt_project.yml files whose vars apply to it."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from .package_vars import window_vars


def read(path: Path) -> str:
    """A file's text with its line ends as they are (a CRLF file stays CRLF in its patch and when applied)."""
    return path.read_bytes().decode("utf-8")


MACRO_CALL = re.compile(r"\b(?:(\w+)\.)?(\w+)\s*\(")


def texts(manifest, node) -> list[str]:
    """A model's SQL and that of every macro it calls, through the macros they call (dbt's own left out).
    dbt records only the macros a parse ran (not those inside `{% if is_incremental() %}`): the calls
    written in the text count too, by package and name."""
    def called(text: str, package: str, recorded) -> list[str]:
        found = list(recorded or [])
        for pkg, name in MACRO_CALL.findall(text):
            found += [u for u in (f"macro.{pkg or package}.{name}", f"macro.{root}.{name}") if u in manifest.macros]
        return found

    root = getattr(getattr(manifest, "metadata", None), "project_name", None) or ""
    out, seen = [str(getattr(node, "raw_code", "") or "")], set()
    todo = called(out[0], node.package_name, getattr(node.depends_on, "macros", []))
    while todo:
        uid = todo.pop()
        macro = manifest.macros.get(uid)
        if uid in seen or macro is None or macro.package_name.startswith("dbt"):
            continue
        seen.add(uid)
        out.append(str(macro.macro_sql or ""))
        todo += called(out[-1], macro.package_name, getattr(macro.depends_on, "macros", []))
    return out


def readers(first, package: str, name: str) -> list[str]:
    """The judged models of `package` whose SQL or macros read the var `name` (a scoped var reaches them all)."""
    manifest = first.project.manifest
    out = []
    for m in first.plan.judged:
        node = manifest.nodes.get(m.unique_id)
        if node is not None and node.package_name == package and \
                any(v.name == name for v in window_vars(texts(manifest, node))):
            out.append(m.unique_id)
    return out


def yaml_data(text: str) -> dict:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def package_yaml(first, node) -> dict:
    """The dbt_project.yml of the package a node is in ({} for the root project's)."""
    if node.package_name == first.project.name:
        return {}
    source = first.project.manifest.files.get(getattr(node, "file_id", None) or "")
    root = getattr(getattr(source, "path", None), "project_root", None)
    path = Path(root) / "dbt_project.yml" if root else None
    return yaml_data(read(path)) if path is not None and path.is_file() else {}


def model_file(first, uid: str) -> Path | None:
    """The model's file where this project reads it: beneath the project folder (a package's, beneath its
    install folder) by its path in its package. dbt's absolute path can be a stale parse's, of the folder
    the project was copied from."""
    node = first.project.manifest.nodes[uid]
    rel = str(getattr(node, "original_file_path", "") or "")
    base = first.options.project_dir
    if node.package_name != first.project.name:
        base = base / install_folder(first) / node.package_name
    if rel and (base / rel).is_file():
        return base / rel
    source = first.project.manifest.files.get(getattr(node, "file_id", None) or "")
    path = getattr(getattr(source, "path", None), "absolute_path", None)
    return Path(path) if path else None


def install_folder(first) -> str:
    project_yml = first.options.project_dir / "dbt_project.yml"
    setting = yaml_data(read(project_yml)).get("packages-install-path") if project_yml.is_file() else None
    return str(setting or "dbt_packages")


def outside_package(first, path: Path) -> tuple[Path, Path] | None:
    """For a file of a local package outside the project folder (`local: ../`, as a package's
    integration_tests project has it; dbt deps links it under the install folder): (that link, relative to
    the project; the package's folder). The search patches a copy of that folder, linked in its copy of the
    project; the patch is for the package's own files, in that folder. None for any other file."""
    project = first.options.project_dir
    folder = project / install_folder(first)
    try:
        inside = path.relative_to(folder)
    except ValueError:
        return None
    link = folder / inside.parts[0] if inside.parts else None
    if link is None or not link.is_symlink():
        return None
    try:
        root = link.resolve()
    except OSError:
        return None
    if root.is_relative_to(project.resolve()) or not root.is_dir():
        return None
    return link.relative_to(project), root


def kept(first, path: Path) -> str:
    """Why the search cannot patch this file ('' when it can): `dbt deps` installed it (and replaces it), or
    it lies outside the project folder other than in a local package that dbt deps linked (outside_package),
    which the search's copy does not hold."""
    project = first.options.project_dir.resolve()
    try:
        real = path.resolve()
    except OSError:
        return f"its file could not be read where the project has it ({path})"
    if outside_package(first, path) is not None:
        return ""
    if real.is_relative_to((project / install_folder(first)).resolve()):
        return "the package's installed file is not changed (dbt deps replaces it)"
    if not real.is_relative_to(project):
        return (f"its file is outside the project folder ({real}): the fix search changes only files inside it, "
                "in a copy")
    return ""


