"""The PostgreSQL disk budget's arithmetic (warehouse/postgres/budget.py): sizes as users write them, the
snapshot refused where it does not fit, the margin kept free. The watchdog on a real server is in
test_confinement.py."""
from __future__ import annotations

import pytest

from rerun_safety.errors import ConfigError
from rerun_safety.warehouse.postgres.budget import FreeSpace, check_snapshot, margin, parse_size, shown
from support.gameday import run_cli


@pytest.mark.parametrize("text, size", [("500MB", 500_000_000), ("2GiB", 2 * 1024 ** 3), ("10GB", 10 ** 10),
                                        ("1.5 gb", 1_500_000_000), ("33554432", 32 * 1024 ** 2), (None, 10 ** 10)])
def test_sizes_as_users_write_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["10 parsecs", "-5GB", "1kB", "31MB", "GB", "1e9"])
def test_a_size_that_is_not_one_is_refused_in_words(text):
    with pytest.raises(ConfigError, match=r"--max-sandbox-size .* is not a size of at least 32 MB \(an empty"):
        parse_size(text)


def test_a_snapshot_must_fit_the_sandbox_size_and_the_free_space_less_the_margin():
    gb = 1000 ** 3
    assert margin(100 * gb) == 10 * gb and margin(2 * gb) == gb
    roomy = FreeSpace(50 * gb, 100 * gb, "/srv/pg")
    assert roomy.budget() == 40 * gb
    check_snapshot(5 * gb, 10 * gb, roomy)  # fits both
    with pytest.raises(ConfigError, match=r"the sources take 12.0 GB in the target database, more than "
                                          r"--max-sandbox-size 10.0 GB allows"):
        check_snapshot(12 * gb, 10 * gb, roomy)
    tight = FreeSpace(15 * gb, 100 * gb, "/srv/pg")
    with pytest.raises(ConfigError, match=r"would not fit in the PostgreSQL server's free space: 15.0 GB free on "
                                          r"/srv/pg, of which the game day leaves 10.0 GB free"):
        check_snapshot(6 * gb, 10 * gb, tight)
    check_snapshot(6 * gb, 10 * gb, FreeSpace(None, None, "", "not visible"))  # only the sandbox size then
    assert shown(1234) == "1.2 kB" and shown(999) == "999 B"


def test_a_bad_max_sandbox_size_is_one_line_and_exit_2(tmp_path):
    code, out, err = run_cli(["gameday", "--project-dir", str(tmp_path), "--max-sandbox-size", "lots"])
    assert code == 2
    assert err.strip().splitlines() == ["rerun-safety: error: --max-sandbox-size 'lots' is not a size of at "
                                        "least 32 MB (an empty PostgreSQL database takes about 8 MB): use e.g. "
                                        "500MB, 10GB, 2GiB"]
