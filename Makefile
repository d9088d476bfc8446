# tether: `make demo` runs the refund example end to end on SQLite; `make test` runs
# ruff, mypy --strict and the test suite. Both create .venv on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DB ?= sqlite:///.tether/demo.db

.PHONY: test demo lint typecheck unit bench bench-peers clean document-schema plan-schema \
	sqlite-statements

$(BIN)/tether: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres]'
	touch $(BIN)/tether

lint: $(BIN)/tether
	$(BIN)/ruff check src tests bench examples

typecheck: $(BIN)/tether
	$(BIN)/mypy

unit: $(BIN)/tether
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=25 \
		--ignore=tests/stores/test_postgres_restart.py
	$(BIN)/python -m pytest tests/stores/test_postgres_restart.py

test: lint typecheck unit

# The core schema `tether check` validates documents with (tether.dsl.document_schema),
# generated from the pydantic models; a test fails while it is stale.
document-schema: $(BIN)/tether
	$(BIN)/python -m tether.dsl.document_schema_gen

# The SQLite store's statements compiled ahead of time (tether.stores.sqlite_statements), so
# that a command on SQLite needs no SQLAlchemy; a test fails while the file is stale.
sqlite-statements: $(BIN)/tether
	$(BIN)/python -m tether.stores.sqlite_statements_gen

# The core schema the in-place `tether resume` reads stored plans with
# (tether.compiler.plan_schema), generated from the plan models; a test fails while stale.
plan-schema: $(BIN)/tether
	$(BIN)/python -m tether.compiler.plan_schema_gen

demo: $(BIN)/tether
	PATH="$(abspath $(BIN)):$$PATH" DEMO_DB="$(DEMO_DB)" bash examples/demo.sh

bench: $(BIN)/tether
	$(BIN)/python bench/run.py
	$(BIN)/python bench/workers.py
	$(BIN)/python bench/concurrency_claim.py
	$(BIN)/python bench/worker_cpu.py

bench-peers: $(BIN)/tether
	$(BIN)/python bench/peers.py

clean:
	rm -rf .tether .pytest_cache .mypy_cache .ruff_cache
