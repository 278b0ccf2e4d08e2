# The README's two commands: `make demo` and `make check`.
# Two test tiers: `make test` (the inner loop) deselects the tests marked
# `slow` (servers, subprocesses, crash soaks, stateful fuzzing) and measures
# no coverage; `make test-all` runs every test with coverage, as `make check`
# and CI do.
# Another Python in a venv of its own, e.g. what CI runs for 3.13 and 3.12:
#   make test-all PYTHON=python3.13 VENV=.venv-3.13 COVERAGE=
#   make test-versions PYTHON=python3.12 VENV=.venv-3.12
# (`test-versions`: the fast tier plus the tests marked `versions`, those
# that depend most on the interpreter.)
PYTHON ?= python3
VENV ?= .venv
COVERAGE ?= --cov --cov-report=term
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo check lint typing test test-versions test-all bench bench-quick bench-compare docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pipeline demo

lint: $(STAMP)
	$(BIN)/ruff check pipeline tests benchmarks examples conftest.py docs/conf.py docs/pictures.py
	$(BIN)/ruff format --check pipeline tests benchmarks examples conftest.py docs/conf.py docs/pictures.py

typing: $(STAMP)
	$(BIN)/mypy
	$(BIN)/basedpyright --pythonpath $(BIN)/python
	$(BIN)/python -m tests.doc_blocks .docs_typing
	$(BIN)/mypy --strict .docs_typing

test: $(STAMP)
	$(BIN)/pytest -m "not slow"

test-versions: $(STAMP)
	$(BIN)/pytest -m "not slow or versions"

test-all: $(STAMP)
	$(BIN)/pytest $(COVERAGE)

check: lint typing test-all docs bench-compare

docs: $(STAMP)
	$(BIN)/sphinx-build -b html -n -W --keep-going -q docs docs/_build/html

bench: $(STAMP)
	$(BIN)/python -m benchmarks

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks --quick --json benchmarks/results/quick.json
	$(BIN)/python -m benchmarks.compare --report-only

# Report-only: compares the last `make bench-quick` (if any) with the
# recorded figures; never runs the benchmarks, never fails on noise.
bench-compare: $(STAMP)
	$(BIN)/python -m benchmarks.compare --report-only

clean:
	rm -rf $(VENV) .venv-3.* .mypy_cache .pytest_cache .ruff_cache
