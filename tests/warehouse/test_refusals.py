"""Each engine types what it refused (warehouse/refusals.py, asked through registry.refusals): the game day reads kinds and paths, never an
engine's error text."""
from __future__ import annotations

from rerun_safety.warehouse.refusals import KERNEL, ROLE, SANDBOX_FILE
from rerun_safety.warehouse.registry import refusals


def _one(message):
    found = refusals(message)
    assert len(found) == 1, found
    return found[0]


def test_the_kernel_refusing_a_write_in_each_engines_words():
    duck = _one('IO Error: Cannot open file "/data/out.csv": Permission denied')  # DuckDB
    assert (duck.kind, duck.text, duck.path) == (KERNEL, 'Cannot open file "/data/out.csv": Permission denied',
                                                 "/data/out.csv")
    assert _one("OSError: [Errno 30] Read-only file system: '/etc/x'").path == "/etc/x"  # Python
    assert _one("java.io.IOException: Mkdirs failed to create file:/data/exp/_temporary/0 (exists=false)").path == "/data/exp"
    assert _one("java.io.FileNotFoundException: file:/data/o.parquet (Permission denied)").path == "/data/o.parquet"


def test_a_privilege_the_role_lacks_and_a_file_the_sandbox_refused():
    role = _one("ERROR:  must be owner of database shop\nDETAIL: ...")
    assert (role.kind, role.text) == (ROLE, "must be owner of database shop")
    duck = _one('Permission Error: Cannot access file "/data/o.csv" - file system operations are disabled by '
                'configuration')
    assert (duck.kind, duck.path, duck.engine_setting) == (SANDBOX_FILE, "/data/o.csv", True)
    pg = _one('refused in the sandbox: COPY TO "/exports/x.csv" writes a file on the server')
    assert (pg.kind, pg.path, pg.engine_setting) == (SANDBOX_FILE, "/exports/x.csv", False)


def test_kinds_come_in_order_and_the_earliest_of_a_kind_wins():
    message = ("must be superuser to COPY\nPermission denied: '/a'\n"
               'Cannot open file "/b": Permission denied')
    assert [(r.kind, r.path) for r in refusals(message)] == [(KERNEL, "/a"), (ROLE, "")]
    assert refusals("Runtime Error: division by zero") == [] and refusals("") == []
