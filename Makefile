# Two commands on a fresh machine:
#   make demo   - the game day on the bundled example project (DuckDB)
#   make test   - the test suite (DuckDB files and a throwaway PostgreSQL server)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install clean

# the demo needs the runner only (DuckDB); the tests add pytest and Spark (pyspark is ~0.5 GB).
# The runner's modules are byte-compiled once, as a wheel install does: an editable install under
# PYTHONDONTWRITEBYTECODE compiles them again in every process (30 ms for `rerun-safety diff`).
$(BIN)/.installed-demo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m compileall -q python_runner >/dev/null
	touch $@

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,spark]'
	$(BIN)/python -m compileall -q python_runner >/dev/null
	touch $@ $(BIN)/.installed-demo

install: $(BIN)/.installed

demo: $(BIN)/.installed-demo
	$(BIN)/python examples/shop/generate_data.py --out examples/shop/shop.duckdb
	cd examples/shop && ../../$(BIN)/dbt deps --profiles-dir . --quiet
	cd examples/shop && ../../$(BIN)/rerun-safety gameday --profiles-dir . --output-dir target/rerun_safety; \
	  rc=$$?; [ $$rc -le 1 ] || exit $$rc; echo "report: examples/shop/target/rerun_safety/report.html"

test: $(BIN)/.installed
	$(BIN)/python tests/_shards.py --durations=25

clean:
	rm -rf $(VENV) examples/shop/target examples/shop/*.duckdb integration_tests/target
