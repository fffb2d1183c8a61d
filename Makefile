# secretferry — every command a human or CI needs. `make test` is what .ci/run calls.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEVCLUSTER_DIR ?= .devcluster

.PHONY: setup control-plane lint typecheck imports test test-unit test-integration demo demo-down \
        cluster-up cluster-down crds chart-crds bench clean

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing secretferry with its dev tools"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

setup: $(STAMP)

control-plane:
	@bash hack/build-control-plane.sh >/dev/null

lint: setup
	$(BIN)/ruff check operator tests bench
	$(BIN)/ruff format --check operator tests bench

typecheck: setup
	$(BIN)/mypy operator/secretferry

imports: setup
	$(BIN)/lint-imports

test-unit: setup
	$(BIN)/pytest -q tests/unit

test-integration: setup control-plane
	$(BIN)/pytest -q tests/integration

test: setup control-plane lint typecheck imports
	$(BIN)/pytest -q -ra tests

crds: setup
	$(BIN)/secretferry crds crds/

chart-crds: crds
	bash hack/sync-chart-crds.sh

cluster-up: setup control-plane
	@$(BIN)/python -m secretferry.devcluster up --dir $(DEVCLUSTER_DIR)

cluster-down: setup
	@$(BIN)/python -m secretferry.devcluster down --dir $(DEVCLUSTER_DIR)

demo: setup control-plane
	@$(BIN)/python hack/demo.py

demo-down: setup
	@$(BIN)/python hack/demo.py --down

bench: setup control-plane
	@for b in bench/bench_*.py; do echo "==> $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEVCLUSTER_DIR) .mypy_cache .ruff_cache .pytest_cache
