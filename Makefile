# The two commands a newcomer types (see README):
#   make demo   -- set up a virtual environment and run the main job on the embedded default
#   make test   -- set up a virtual environment and run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test test-all lint bench clean

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

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
