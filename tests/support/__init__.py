"""What the tests share: PostgreSQL servers and profiles (common), game-day helpers and the example's
game day on every engine (gameday), the in-process Spark (spark) and a standalone Spark cluster
(spark_cluster), and the helpers of the reliability tests (reliability): spawned game days, leftovers,
kills. The tests folder is on sys.path (conftest.py), so `from support.common import ...` works from a
test, a fixture's load_data.py and a benchmark."""
