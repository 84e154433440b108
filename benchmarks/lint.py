"""Benchmark `rerun-safety lint` on a generated 500-model dbt project (DuckDB).

    .venv/bin/python benchmarks/lint.py [--models 500] [--keep]

Generates the project in a temp dir (sources, staging views, and incremental models of every kind,
safe and unsafe, each reading a ref), installs this package with `dbt deps`, then runs the lint
in-process twice: cold (full dbt parse) and warm (dbt's partial parse reused). Prints models per
second, total time and the share of each phase, and checks that exactly the unsafe models were
flagged. Precision and recall on a labelled corpus of safe and unsafe shapes: lint_corpus.py.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# (kind, expected rules, model body); {up} is the upstream ref
KINDS = [
    ("delete_insert", [], """{{{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}}}
select id, ts, amount from {up}
{{% if is_incremental() %}}where ts >= (select max(ts) - interval '1 day' from {{{{ this }}}}){{% endif %}}
"""),
    ("merge", [], """{{{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}}}
select id, ts, amount from {up}
{{% if is_incremental() %}}where ts >= (select max(ts) - interval '2 hours' from {{{{ this }}}}){{% endif %}}
"""),
    ("partition_aligned", [], """{{{{ config(materialized='incremental', incremental_strategy='partition_overwrite',
          partition_key={{'field': 'day', 'granularity': 'day'}}) }}}}
select id, ts, amount, cast(date_trunc('day', ts) as date) as day from {up}
{{% if is_incremental() %}}where ts >= (select date_trunc('day', max(ts)) from {{{{ this }}}}){{% endif %}}
"""),
    ("view", [], """select id, ts, amount * 2 as amount from {up}
"""),
    ("dedup_total", [], """{{{{ config(materialized='table') }}}}
select * from (select *, row_number() over (partition by amount order by ts desc, id) as rn from {up}) d where rn = 1
"""),
    ("append_lookback", ["append-reread"], """{{{{ config(materialized='incremental', incremental_strategy='append') }}}}
select id, ts, amount from {up}
{{% if is_incremental() %}}where ts >= (select max(ts) - interval '1 hour' from {{{{ this }}}}){{% endif %}}
"""),
    ("watermark", ["watermark-strict-gt"], """{{{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}}}
select id, ts, amount from {up}
{{% if is_incremental() %}}where ts > (select max(ts) from {{{{ this }}}}){{% endif %}}
"""),
    ("partition_unaligned", ["partition-lookback-unaligned"], """{{{{ config(materialized='incremental', incremental_strategy='partition_overwrite',
          partition_key={{'field': 'day', 'granularity': 'day'}}) }}}}
select id, ts, amount, cast(date_trunc('day', ts) as date) as day from {up}
{{% if is_incremental() %}}where ts >= (select max(ts) - interval '9 seconds' from {{{{ this }}}}){{% endif %}}
"""),
    ("random", ["nondeterministic-function"], """{{{{ config(materialized='table') }}}}
select id, ts, amount, random() as score from {up}
"""),
    ("limit", ["limit-without-order"], """{{{{ config(materialized='table') }}}}
select id, ts, amount from {up} limit 100
"""),
]


def scaffold(root: Path, name: str, project_extra: str = "") -> None:
    """An empty DuckDB dbt project named `name` in `root` (its file `<name>.duckdb`), with this
    package installed from the repository and the partition_overwrite shim."""
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "dbt_project.yml").write_text(
        f"name: {name}\nversion: '1.0.0'\nconfig-version: 2\nprofile: {name}\nmodel-paths: ['models']\n"
        "macro-paths: ['macros']\n" + project_extra)
    (root / "profiles.yml").write_text(
        f"{name}:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: {root / (name + '.duckdb')}\n"
        "      schema: analytics\n      threads: 1\n")
    (root / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (root / "macros" / "get_incremental_partition_overwrite_sql.sql").write_text(
        "{% macro get_incremental_partition_overwrite_sql(arg_dict) %}\n"
        "  {{ return(rerun_safety.get_incremental_partition_overwrite_sql(arg_dict)) }}\n{% endmacro %}\n")


def generate(root: Path, n_models: int) -> dict[str, list[str]]:
    """Write the project; return the expected rule ids per model."""
    scaffold(root, "bench", "models:\n  bench:\n    +materialized: view\n")
    (root / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: raw\n    schema: raw\n    tables:\n" +
        "".join(f"      - name: events_{i}\n" for i in range(10)))
    expected: dict[str, list[str]] = {}
    for i in range(n_models):
        kind, rules, body = KINDS[i % len(KINDS)]
        # every 10th model reads a source, the others a model 1-9 positions earlier (a ref chain)
        parent = i - 1 - (i % 9)
        up = "{{ source('raw', 'events_%d') }}" % (i % 10) if i % 10 == 0 or parent < 0 else \
            "{{ ref('m%04d') }}" % parent
        folder = root / "models" / f"group_{i // 50:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"m{i:04d}.sql").write_text(f"-- {kind}\n" + body.format(up=up))
        if rules:
            expected[f"m{i:04d}"] = sorted(rules)
        if kind == "dedup_total":  # id is declared unique: it makes the dedup order total
            with (folder / "schema.yml").open("a") as fh:
                if fh.tell() == 0:
                    fh.write("version: 2\nmodels:\n")
                fh.write(f"  - name: m{i:04d}\n    columns:\n      - name: id\n        data_tests: [unique]\n")
    return expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--keep", action="store_true", help="keep the generated project")
    parser.add_argument("--parallel", choices=["auto", "on", "off"], default="auto",
                        help="compile incremental branches in a second process (auto: when a core is free)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rerun_safety_bench_lint_"))
    project = tmp / "bench"
    try:
        expected = generate(project, args.models)
        dbt = str(Path(sys.executable).parent / "dbt")
        subprocess.run([dbt, "deps", "--project-dir", str(project), "--profiles-dir", str(project),
                        "--log-path", str(tmp / "logs")], check=True, capture_output=True)
        t = time.perf_counter()
        from rerun_safety.lint import run_lint  # noqa: E402  (dbt and sqlglot imports timed apart)
        import dbt.cli.main  # noqa: F401,E402
        import_time = time.perf_counter() - t
        print(f"generated {args.models} models in {project}; import of dbt + rerun_safety.lint: {import_time:.2f} s")
        ok = True
        for label in ("cold (full dbt parse)", "warm (partial parse)"):
            t, cpu = time.perf_counter(), time.process_time()
            result = run_lint(project_dir=project, profiles_dir=project,
                              parallel={"auto": None, "on": True, "off": False}[args.parallel])
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
            got: dict[str, list[str]] = {}
            for f in result.findings:
                if f.severity == "error":
                    got.setdefault(f.model, []).append(f.rule)
            got = {k: sorted(v) for k, v in got.items()}
            match = got == expected
            ok = ok and match
            tm = result.timings
            compile_time = sum(tm.get(k, 0.0) for k in ("dbt_ls", "scratch", "compile"))
            phases = {"dbt parse": tm.get("dbt_parse", 0.0), "compile (ls, scratch, 2 passes)": compile_time,
                      "sqlglot parse": tm.get("sqlglot_parse", 0.0), "rules": tm.get("rules", 0.0)}
            other = max(wall - sum(phases.values()), 0.0)
            print(f"\n{label}: {len(result.models)} models in {wall:.2f} s = {len(result.models) / wall:.1f} models/s "
                  f"(CPU time of this process {cpu:.2f} s; load average {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} cores)")
            for name, seconds in {**phases, "other (profile, setup)": other}.items():
                print(f"  {name:<32} {seconds:6.2f} s  {100 * seconds / wall:5.1f} %")
            print("  compile detail: " + ", ".join(f"{k} {tm[k]:.2f} s" for k in
                                                   ("dbt_ls", "scratch", "scratch_tables", "compile_full",
                                                    "scratch_models", "compile_incremental") if k in tm) +
                  (" (incremental pass in a second process, overlapping the full-refresh pass; its parse "
                   f"{tm['pass2_process_parse']:.2f} s)" if "pass2_process_parse" in tm else
                   " (both passes in this process)"))
            counts = Counter(r for rules in got.values() for r in rules)
            print(f"  findings: {dict(sorted(counts.items()))}; flagged {len(got)} models, expected "
                  f"{len(expected)}: {'match' if match else 'MISMATCH'}")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {project}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
