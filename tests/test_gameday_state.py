"""CI on pull requests: `--select state:modified+ --state DIR` replays only what changed, and
`--baseline report.json` fails only on models that got worse than in the baseline."""
from __future__ import annotations

import json
import os
import sys

import pytest

from support.common import FIXTURES
from support.gameday import by_name, copy_project, dbt_deps, load_report, run_cli

sys.path.insert(0, str(FIXTURES / "cadence"))
import cadence_data  # noqa: E402  (a name no other fixture uses)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from dbt.cli.main import dbtRunner

    tmp = tmp_path_factory.mktemp("state")
    project = copy_project(FIXTURES / "cadence", tmp / "cadence")
    cadence_data.load_duckdb(str(project / "cadence.duckdb"))
    dbt_deps(project, project)
    # production's artifacts: the manifest before the change
    res = dbtRunner().invoke(["parse", "--project-dir", str(project), "--profiles-dir", str(project),
                              "--target-path", str(tmp / "prod_state"), "--quiet"])
    assert res.success
    model = project / "models" / "orders_dup.sql"
    model.write_text(model.read_text().replace("interval '2 days'", "interval '3 days'"))
    return {"project": project, "state": tmp / "prod_state", "tmp": tmp}


def gameday(p: dict, out: str, *extra: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(p["project"])
    try:
        return run_cli(["gameday", "--project-dir", str(p["project"]), "--profiles-dir", str(p["project"]),
                        "--output-dir", str(p["tmp"] / out), "--scenarios", "replay", *extra])
    finally:
        os.chdir(cwd)


def test_state_modified_replays_only_what_changed_and_baseline_fails_only_on_worse(project):
    code, stdout, stderr = gameday(project, "pr", "--select", "state:modified+", "--state", str(project["state"]),
                                   "--defer")
    assert code == 1, stderr
    report = load_report(project["tmp"] / "pr")
    # the changed model and what reads it; no other incremental model of the project is replayed
    assert sorted(by_name(report)) == ["orders_dup", "orders_dup_daily", "orders_dup_rollup"]
    assert by_name(report)["orders_dup"]["verdict"] == "duplicates"

    # main's report has the same unsafe models: nothing got worse, exit 0
    code, stdout, stderr = gameday(project, "pr2", "--select", "state:modified+", "--state", str(project["state"]),
                                   "--baseline", str(project["tmp"] / "pr" / "report.json"))
    assert code == 0, stderr
    summary = load_report(project["tmp"] / "pr2")["summary"]
    assert summary["baseline"] == {"worse": [], "unsafe_as_before": ["orders_dup", "orders_dup_rollup",
                                                                    "orders_dup_daily"], "fixed": []}
    comment = (project["tmp"] / "pr2" / "report.md").read_text()
    assert comment.startswith("### ✅") and "- 0 model(s) worse than in the baseline\n" in comment
    assert "baseline: 0 model(s) worse than in --baseline; unsafe as before:" in stdout

    # a baseline where the changed model was safe: it got worse, exit 1
    main = json.loads((project["tmp"] / "pr" / "report.json").read_text())
    for m in main["models"]:
        if m["name"] == "orders_dup":
            m["verdict"] = "safe"
    (project["tmp"] / "main.json").write_text(json.dumps(main))
    code, stdout, stderr = gameday(project, "pr3", "--select", "state:modified+", "--state", str(project["state"]),
                                   "--baseline", str(project["tmp"] / "main.json"))
    assert code == 1, stderr
    assert load_report(project["tmp"] / "pr3")["summary"]["baseline"]["worse"] == ["orders_dup"]


@pytest.mark.parametrize("args, message", [
    (["--state", "/nonexistent/state"], "--state /nonexistent/state: no manifest.json there"),
    (["--baseline", "/nonexistent/report.json"], "--baseline /nonexistent/report.json: cannot read it"),
])
def test_bad_state_or_baseline_exit_2(project, args, message):
    code, _, stderr = gameday(project, "bad", "--select", "state:modified+", *args)
    assert code == 2
    assert len(stderr.strip().splitlines()) == 1 and message in stderr


def test_a_baseline_that_is_not_a_report(project):
    (project["tmp"] / "junk.json").write_text('{"rows": 3}')
    code, _, stderr = gameday(project, "bad", "--baseline", str(project["tmp"] / "junk.json"))
    assert code == 2 and "not a game-day report.json" in stderr


def test_lint_takes_the_same_state_selection(project):
    cwd = os.getcwd()
    os.chdir(project["project"])
    try:
        code, stdout, stderr = run_cli(["lint", "--project-dir", str(project["project"]), "--profiles-dir",
                                        str(project["project"]), "--select", "state:modified", "--state",
                                        str(project["state"]), "--defer", "--format", "json"])
    finally:
        os.chdir(cwd)
    assert code == 1, (stdout, stderr)
    findings = json.loads(stdout)["findings"]
    # only the changed model is linted: its lookback append, nothing from the other models
    assert {f["model"] for f in findings} == {"orders_dup"}
    assert "append-reread" in {f["rule"] for f in findings}


def test_a_pull_request_with_nothing_to_replay_passes_with_one_line(project):
    """CI on a pull request that changes no model, or only a table that no incremental model reads:
    `state:modified+` selects nothing to check, and the game day and the lint pass (exit 0) saying so,
    instead of failing every ordinary pull request with exit 2. Without `state:` it stays an error."""
    from dbt.cli.main import dbtRunner

    pr_state = project["tmp"] / "pr_state"  # main's manifest = this branch: nothing changed
    res = dbtRunner().invoke(["parse", "--project-dir", str(project["project"]), "--profiles-dir",
                              str(project["project"]), "--target-path", str(pr_state), "--quiet"])
    assert res.success
    code, stdout, stderr = gameday(project, "nothing", "--select", "state:modified+", "--state", str(pr_state))
    assert (code, stderr.strip()) == (0, ""), stderr
    assert stdout.strip() == "rerun-safety: nothing to check: the selection matches no model (--select state:modified+)"
    assert not (project["tmp"] / "nothing" / "report.json").exists()
    cwd = os.getcwd()
    os.chdir(project["project"])
    try:
        code, stdout, stderr = run_cli(["lint", "--project-dir", str(project["project"]), "--profiles-dir",
                                        str(project["project"]), "--select", "state:modified+", "--state",
                                        str(pr_state)])
    finally:
        os.chdir(cwd)
    assert (code, stdout.strip()) == (0, "rerun-safety: nothing to check: the selection matches no model "
                                         "(--select state:modified+)"), stderr
    model = project["project"] / "models" / "revenue_daily.sql"
    original = model.read_text()
    model.write_text(original + "\n-- reviewed\n")  # a table that no incremental model reads
    try:
        code, stdout, stderr = gameday(project, "table_only", "--select", "state:modified+", "--state", str(pr_state))
        assert code == 0, stderr
        assert stdout.strip() == ("rerun-safety: nothing to check: no incremental model among the 1 selected "
                                  "(--select state:modified+): nothing to replay")
        # the same selection without state: a typo in a CI selector still fails
        code, _, stderr = gameday(project, "no_state", "--select", "revenue_daily")
        assert code == 2 and "no incremental model is selected" in stderr
    finally:
        model.write_text(original)


def _workflow_steps() -> dict[str, str]:
    """The `run:` scripts of examples/ci/rerun-safety.yml, by job and step name."""
    import yaml

    flow = yaml.safe_load((FIXTURES.parents[1] / "examples" / "ci" / "rerun-safety.yml").read_text())
    return {f"{job}: {step['name']}": step["run"] for job, spec in flow["jobs"].items()
            for step in spec["steps"] if "run" in step and "name" in step}


def _run_step(repo, script: str) -> tuple[int, str]:
    """A workflow step's script in the repository, as the runner runs it (bash -e), with the
    workflow's environment; game days replay one scenario to keep the test short."""
    import subprocess

    script = script.replace("rerun-safety gameday ", "rerun-safety gameday --scenarios replay ")
    env = dict(os.environ, DBT_PROFILES_DIR=str(repo), DBT_TARGET="local",
               PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def test_the_ci_example_passes_an_ordinary_pull_request_and_fails_a_worse_one(tmp_path):
    """The CI example's own commands, run against a git repository with a main branch (its nightly
    job leaves the manifest and the report) and two pull-request branches: one that changes no model
    passes with one line; one that makes a safe model append its lookback fails, and its comment
    (report.md) names only that model as worse."""
    import shutil
    import subprocess

    steps = _workflow_steps()
    repo = copy_project(FIXTURES / "cadence", tmp_path / "repo")
    cadence_data.load_duckdb(str(repo / "cadence.duckdb"))
    dbt_deps(repo, repo)
    (repo / ".gitignore").write_text("target/\nlogs/\ndbt_packages/\n*.duckdb\nprod-artifacts/\nmain-report/\n")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com", *args], cwd=repo,
                       check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "main")
    # nightly on main: the manifest for state:modified and the report for --baseline (as downloaded)
    for name in ("nightly: manifest.json for the pull requests' state:modified", "nightly: the full game day"):
        code, out = _run_step(repo, steps[name])
        assert code in (0, 1), out  # main has unsafe models on purpose: the nightly report is red
    shutil.copytree(repo / "target" / "rerun_safety", repo / "main-report")
    assert by_name(load_report(repo / "main-report"))["clicks_merged"]["verdict"] == "safe"
    lint, gameday_step = steps["pull-request: lint the changed models"], steps["pull-request: game day of the changed models"]

    # a pull request that changes no model
    git("checkout", "-q", "-b", "docs-only")
    (repo / "README.md").write_text("how to run the project\n")
    git("add", "-A")
    git("commit", "-q", "-m", "docs")
    for script in (lint, gameday_step):
        code, out = _run_step(repo, script)
        assert (code, out.strip()) == (0, "rerun-safety: nothing to check: the selection matches no model "
                                          "(--select state:modified+)"), out

    # a pull request that turns a safe merge into an append over its lookback
    git("checkout", "-q", "main")
    git("checkout", "-q", "-b", "append-clicks")
    model = repo / "models" / "clicks_merged.sql"
    model.write_text(model.read_text().replace("incremental_strategy='merge'", "incremental_strategy='append'"))
    git("commit", "-q", "-am", "append clicks")
    shutil.rmtree(repo / "target" / "rerun_safety")
    code, out = _run_step(repo, lint)
    assert code == 1 and "clicks_merged" in out and "append-reread" in out, out
    code, out = _run_step(repo, gameday_step)
    assert code == 1, out
    report = load_report(repo / "target" / "rerun_safety")
    assert sorted(by_name(report)) == ["clicks_merged"]
    assert report["summary"]["baseline"]["worse"] == ["clicks_merged"]
    comment = (repo / "target" / "rerun_safety" / "report.md").read_text()
    assert "- 1 model(s) worse than in the baseline" in comment and "clicks\\_merged" in comment
    for other in ("orders\\_dup", "orders\\_watermark", "clicks\\_appended"):
        assert other not in comment
