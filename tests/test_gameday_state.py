"""CI on pull requests: `--select state:modified+ --state DIR` replays only what changed, and
`--baseline report.json` fails only on models that got worse than in the baseline."""
from __future__ import annotations

import json
import os
import sys

import pytest

from _support import FIXTURES
from gameday_support import by_name, copy_project, dbt_deps, load_report, run_cli

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
