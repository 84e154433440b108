"""The example project's game day on every engine, side by side: verdicts, root causes, contamination
and wall time, each compared with DuckDB's. The test suite runs examples/shop on DuckDB and PostgreSQL
(tests/test_gameday_shop.py) and Spark on its own fixture through both dbt-spark methods
(tests/test_gameday_spark.py); the whole example on Spark costs 4-7 minutes per method, so it is here.

    .venv/bin/python benchmarks/engines.py                      # duckdb, postgres, spark_thrift
    .venv/bin/python benchmarks/engines.py --engines duckdb,spark,spark_thrift
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.gameday import SHOP_ENGINES, shop_gameday  # noqa: E402


def summary(run: dict) -> dict:
    report = run["report"]
    return {"verdicts": {m["name"]: m["verdict"] for m in report["models"]},
            "root_causes": sorted(report["summary"]["root_causes"]),
            "contaminated": sorted(report["summary"]["contaminated"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="duckdb,postgres,spark_thrift",
                    help=f"comma-separated, from {', '.join(SHOP_ENGINES)}; DuckDB is always run first")
    a = ap.parse_args()
    engines = ["duckdb"] + [e for e in a.engines.split(",") if e and e != "duckdb"]
    unknown = [e for e in engines if e not in SHOP_ENGINES]
    if unknown:
        print(f"unknown engine(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="rerun_safety_engines_"))
    server = cluster = None
    results: dict[str, dict] = {}
    try:
        for engine in engines:
            if engine == "postgres" and server is None:
                from support.common import start_pg_server

                server = start_pg_server()
            if engine == "spark_thrift" and cluster is None:
                from support.spark_cluster import start_spark_cluster

                cluster = start_spark_cluster(base / "spark_cluster")
            run = shop_gameday(engine, base / engine, {"postgres": server, "spark_thrift": cluster}.get(engine))
            results[engine] = {"summary": summary(run), "seconds": run["seconds"], "code": run["code"],
                               "unchanged": run["before"] == run["after"]}
            print(f"[engines] {engine}: exit {run['code']}, {run['seconds']:.0f} s, user data "
                  f"{'unchanged' if results[engine]['unchanged'] else 'CHANGED'}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
        if server is not None:
            server.stop()
    reference = results["duckdb"]["summary"]
    failures = 0
    print(f"\n{'model':40} " + " ".join(f"{e:>14}" for e in results))
    for name in sorted(reference["verdicts"]):
        print(f"{name:40} " + " ".join(f"{r['summary']['verdicts'].get(name, '-'):>14}" for r in results.values()))
    for engine, r in results.items():
        same = r["summary"] == reference and r["code"] == results["duckdb"]["code"] and r["unchanged"]
        failures += not same
        print(f"{engine}: {'same verdicts, root causes and contamination as DuckDB' if same else 'DIFFERS from DuckDB'}"
              f" ({r['seconds']:.0f} s, {r['seconds'] / results['duckdb']['seconds']:.1f}x DuckDB's wall time)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
