"""The documentation cannot drift from the code: the generated pages (docs/cli.md, docs/lint-rules.md)
are what docs/_generate.py writes now, every `rerun-safety` command in the README, the docs and the
example CI workflow parses with the CLI's own options, links resolve, the version agrees everywhere,
and the README stays short."""
from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from rerun_safety.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
WORKFLOW = ROOT / "examples" / "ci" / "rerun-safety.yml"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
MAX_README_LINES = 300

# A fenced block preceded (blank lines aside) by this comment is runnable: its `rerun-safety`
# commands are checked against the CLI.
RUNNABLE = "<!-- runnable -->"
_FENCE = re.compile(r"^```(\w*)\s*$")


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "_generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_blocks(text: str) -> list[tuple[str, bool, str, int]]:
    """(language, runnable, body, first line number) of every fenced block of a Markdown page."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i].strip()) if lines[i].lstrip().startswith("```") else None
        if not m:
            i += 1
            continue
        prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        start, i = i, i + 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        blocks.append((m.group(1), prev == RUNNABLE, "\n".join(body), start + 1))
        i += 1
    return blocks


_OPERATORS = {"&&", "||", ";", "|", "(", ")", "&"}
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")  # GitHub Actions ${{ ... }}: one word, any type


def rerun_safety_commands(script: str) -> list[list[str]]:
    """The argument lists of every `rerun-safety` command in a shell script (continuations joined,
    comments dropped, split at &&, ||, ;, |), without the leading `rerun-safety`."""
    script = _EXPRESSION.sub("1", script.replace("\\\n", " "))
    commands = []
    for line in script.splitlines():
        line = re.sub(r"^\s*\$ ", "", line)  # a prompt in a transcript
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        segment: list[str] = []
        for token in [*lexer, ";"]:
            if token in _OPERATORS:
                words = [w for w in segment if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)] if segment else []
                if words and (words[0] == "rerun-safety" or words[0].endswith("/rerun-safety")):
                    commands.append(words[1:])
                segment = []
            else:
                segment.append(token)
    return commands


def check_command(args: list[str]) -> None:
    """Parse a command line with the CLI's own parser: an unknown command or option, or a value
    the option refuses, raises click's error."""
    ctx = cli.make_context("rerun-safety", list(args), resilient_parsing=False)
    # click 8.2 keeps the subcommand in _protected_args (protected_args warns); older clicks in protected_args
    remaining = [*(ctx.__dict__["_protected_args"] if "_protected_args" in ctx.__dict__ else ctx.protected_args),
                 *ctx.args]
    name, rest = (remaining[0], remaining[1:]) if remaining else (None, [])
    if name is None:
        raise click.UsageError("no command")
    command = cli.get_command(ctx, name)
    if command is None:
        raise click.UsageError(f"no such command {name!r}")
    with ctx:
        command.make_context(name, list(rest), parent=ctx, resilient_parsing=False)


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, args) of the commands in runnable blocks, and of `$ rerun-safety` transcript lines
    in any block, in the README and docs/."""
    found = []
    for page in PAGES:
        for lang, runnable, body, line in code_blocks(page.read_text()):
            if runnable:
                script = body
            else:
                script = "\n".join(ln for ln in body.splitlines() if ln.lstrip().startswith("$ "))
            for args in rerun_safety_commands(script):
                found.append((f"{page.relative_to(ROOT)}:{line}", args))
    return found


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def workflow_commands() -> list[tuple[str, list[str]]]:
    found = []
    for job_name, job in workflow()["jobs"].items():
        for step in job.get("steps", []):
            for args in rerun_safety_commands(step.get("run", "")):
                found.append((f"{job_name}: {step.get('name', '')}", args))
    return found


# --- generated pages -------------------------------------------------------------------------

def test_generated_pages_are_current():
    gen = _generator()
    stale = gen.stale_pages()
    assert not stale, f"stale: {stale}; run .venv/bin/python docs/_generate.py"


def test_cli_page_lists_every_command_and_option():
    text = (DOCS / "cli.md").read_text()
    for name, command in cli.commands.items():
        assert f"## `rerun-safety {name}`" in text
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in text, f"{name} {opt} missing from docs/cli.md"


def test_every_lint_rule_has_a_section_and_an_example():
    from rerun_safety.lint import RULES

    gen = _generator()
    text = (DOCS / "lint-rules.md").read_text()
    for rule_id in RULES:
        assert f"\n## {rule_id}\n" in text
        assert rule_id in gen.EXAMPLES or rule_id in gen.NOT_RUN
    for rule_id in gen.EXAMPLES:
        assert rule_id in RULES, f"example for a rule that no longer exists: {rule_id}"
        assert any(f.rule == rule_id for f in gen.lint_example(rule_id)), f"{rule_id}: example does not trigger it"


# --- commands --------------------------------------------------------------------------------

def test_the_command_extractor():
    script = 'X=1 rerun-safety gameday --steps 2 \\\n  --select a+ && echo ok # rerun-safety nope\n$ rerun-safety lint -s "a b"'
    assert rerun_safety_commands(script) == [["gameday", "--steps", "2", "--select", "a+"], ["lint", "-s", "a b"]]
    check_command(["gameday", "--steps", "2"])
    with pytest.raises(click.NoSuchOption):
        check_command(["gameday", "--no-such-option"])
    with pytest.raises(click.BadParameter):
        check_command(["gameday", "--steps", "zero"])
    with pytest.raises(click.UsageError):
        check_command(["no-such-command"])


def test_readme_and_docs_have_runnable_blocks():
    runnable = [(p.name, line) for p in PAGES for _, r, _, line in code_blocks(p.read_text()) if r]
    assert any(name == "README.md" for name, _ in runnable)
    commands = documented_commands()
    assert {args[0] for _, args in commands} >= {"gameday", "lint"}


@pytest.mark.parametrize("where,args", documented_commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_documented_command_parses(where, args):
    try:
        check_command(args)
    except click.ClickException as err:
        pytest.fail(f"{where}: rerun-safety {' '.join(args)}: {err.format_message()}")


# --- the example CI workflow -------------------------------------------------------------------

def test_workflow_runs_on_pull_requests_and_nightly():
    wf = workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and "schedule" in triggers
    text = WORKFLOW.read_text()
    assert "dbt build" in text
    assert "report.md" in text and "gh pr comment" in text
    assert "junit.xml" in text


def test_workflow_pull_request_job_replays_only_what_changed_against_main():
    by_job: dict[str, list[list[str]]] = {}
    for where, args in workflow_commands():
        by_job.setdefault(where.split(":")[0], []).append(args)
    pr = by_job["pull-request"]
    assert any(a[0] == "lint" for a in pr)
    gameday = [a for a in pr if a[0] == "gameday"]
    assert gameday, "no game day on pull requests"
    args = gameday[0]
    assert "state:modified+" in args and "--state" in args and "--defer" in args and "--baseline" in args
    assert any(a[0] == "gameday" and "--select" not in a for a in by_job["nightly"]), "nightly: the full game day"


@pytest.mark.parametrize("where,args", workflow_commands(), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_workflow_command_parses(where, args):
    try:
        check_command(args)
    except click.ClickException as err:
        pytest.fail(f"examples/ci/rerun-safety.yml, {where}: rerun-safety {' '.join(args)}: {err.format_message()}")


# --- pages -----------------------------------------------------------------------------------

def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    out, in_code = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def test_links_resolve():
    broken = []
    for page in [*PAGES, ROOT / "CHANGELOG.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_every_docs_page_starts_with_an_example():
    """A reference page shows a code block before its first section."""
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        first_section = text.find("\n## ")
        assert 0 <= text.find("\n```") < (first_section if first_section >= 0 else len(text)), \
            f"docs/{page.name}: no example before its first section"


def test_docs_pages_do_not_break_dbt_parsing_of_the_package():
    """dbt_project.yml's docs-paths is docs/: dbt reads these pages in every project that installs
    the package, looking for {% docs %} blocks. Its block lexer must get through each page."""
    from dbt_common.clients.jinja import extract_toplevel_blocks

    for page in sorted(DOCS.glob("*.md")):
        extract_toplevel_blocks(page.read_text(), allowed_blocks={"docs"}, collect_raw_data=False)


# --- version ---------------------------------------------------------------------------------

def test_version_is_the_same_everywhere():
    import rerun_safety

    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1].split("\n[", 1)[0]
    version = re.search(r'^version\s*=\s*"([^"]+)"', project, re.M).group(1)
    assert rerun_safety.__version__ == version
    assert str(yaml.safe_load((ROOT / "dbt_project.yml").read_text())["version"]) == version
    assert f"## [{version}]" in (ROOT / "CHANGELOG.md").read_text()


def _version(pyproject: str) -> str:
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    return re.search(r'^version\s*=\s*"([^"]+)"', project, re.M).group(1)


def test_the_readme_pins_a_release_commit_that_dbt_deps_installs(tmp_path):
    """The README's `revision:` is the full SHA of the release commit (a clone without tags has it): the
    commit exists here, its package version is this one, and `dbt deps` installs the package from a
    git URL at that revision, with its macros and nothing of the tests."""
    import subprocess
    import sys

    pinned = set(re.findall(r"revision:\s*(\S+)", README.read_text()))
    assert len(pinned) == 1 and re.fullmatch(r"[0-9a-f]{40}", next(iter(pinned))), pinned
    sha = next(iter(pinned))

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)

    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone has no history to find the release commit in")
    assert git("cat-file", "-e", f"{sha}^{{commit}}").returncode == 0, f"the pinned commit {sha} is not here"
    assert _version(git("show", f"{sha}:pyproject.toml").stdout) == _version((ROOT / "pyproject.toml").read_text())
    project = tmp_path / "user_project"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: user_project\nversion: '1.0'\nconfig-version: 2\n"
                                             "profile: user_project\n")
    (project / "packages.yml").write_text(f'packages:\n  - git: "file://{ROOT}"\n    revision: {sha}\n')
    dbt = str(Path(sys.executable).with_name("dbt"))
    res = subprocess.run([dbt, "deps", "--project-dir", str(project), "--log-path", str(tmp_path / "logs")],
                         capture_output=True, text=True, cwd=project)
    assert res.returncode == 0, res.stdout + res.stderr
    installed = project / "dbt_packages" / "rerun_safety"
    assert yaml.safe_load((installed / "dbt_project.yml").read_text())["name"] == "rerun_safety"
    assert (installed / "macros").is_dir() and list((installed / "macros").rglob("*.sql"))


def test_make_demo_installs_no_spark_and_make_test_does():
    """`make demo` (the README's first command) installs only the runner: pyspark is ~0.5 GB and the
    demo runs on DuckDB. `make test` installs the test and Spark extras. Read from make's dry run."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[1]

    def installs(target: str) -> list[str]:
        out = subprocess.run(["make", "-n", "-B", target], cwd=root, capture_output=True, text=True, check=True).stdout
        return [ln for ln in out.splitlines() if "pip install" in ln and "--upgrade pip" not in ln]

    assert installs("demo") == [".venv/bin/pip install --quiet -e ."]
    assert installs("test") == [".venv/bin/pip install --quiet -e '.[test,spark]'"]
