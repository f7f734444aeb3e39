# The two commands a newcomer types (see README):
#   make demo   -- set up a virtual environment and run the main job on the embedded default
#   make test   -- set up a virtual environment and run the test suite
# Before a release:
#   make bench-quick -- rerun the benchmarks that take under 5 minutes and refresh the tables
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test test-all lint bench bench-quick clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

demo: setup
	$(BIN)/neuract demo

test: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q

test-all: setup
	$(BIN)/python -m pytest -q -m ""

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: setup
	$(BIN)/python benchmarks/run_all.py

# the benchmarks that take under 5 minutes each on 2 cores (dynamics, inference, twin speed),
# then the README table and benchmarks/results/summary.md (docs/benchmarks.md)
BENCH_QUICK := bench_dynamics.py bench_inference.py bench_twin.py

bench-quick: setup
	for s in $(BENCH_QUICK); do $(BIN)/python benchmarks/$$s || exit 1; done
	$(BIN)/python benchmarks/summarize.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
