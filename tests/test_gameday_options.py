"""Options that would let a game day end "safe" without running anything twice, or expand without bound,
are refused in one line (exit 2), before any sandbox exists."""
from __future__ import annotations

import pytest

from support.gameday import hostile_project, run_cli

BOMB = ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n")


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("scenarios", ["reference", ",", "reference,"])
def test_scenarios_that_rerun_nothing_are_refused(tmp_path, scenarios):
    code, out, err = run_cli(["gameday", "--project-dir", str(tmp_path), "--output-dir", str(tmp_path / "out"),
                              "--scenarios", scenarios])
    assert (code, out) == (2, "")
    assert _one_line(err) == ("rerun-safety: error: --scenarios selects nothing but the reference build, which "
                              "cannot show a rerun defect: choose one or more of replay, rerun, partial, backfill, "
                              "concurrent, "
                              "late, determinism")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("vars_yaml,what", [(BOMB, "(1,234,573)"), ("a: &a [1, *a]", "(a recursive alias)")])
def test_vars_whose_aliases_expand_without_bound_are_refused(tmp_path, vars_yaml, what):
    code, out, err = run_cli(["gameday", "--project-dir", str(tmp_path), "--output-dir", str(tmp_path / "out"),
                              "--vars", vars_yaml])
    assert (code, out) == (2, "")
    assert _one_line(err) == ("rerun-safety: error: --vars expands to more than 100,000 values through its YAML "
                              f"aliases {what}: write the values out, without aliases that repeat them")
    assert not (tmp_path / "out").exists()


def test_late_alone_without_a_late_share_is_refused(tmp_path):
    p = hostile_project(tmp_path)
    code, out, err = run_cli(["gameday", "--project-dir", str(p["project"]), "--profiles-dir", str(p["project"]),
                              "--output-dir", str(tmp_path / "out"), "--scenarios", "late"])
    assert (code, out) == (2, "")
    assert _one_line(err) == ("rerun-safety: error: --scenarios late runs nothing without --late-fraction or "
                              "--late-by (inputs with a load time arrive by it in every other scenario): add one, "
                              "or choose other scenarios")
    assert not (tmp_path / "out").exists()
