# secretferry — every command a human or CI needs. `make test` is what .ci/run calls.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEVCLUSTER_DIR ?= .devcluster

.PHONY: setup settings-doc control-plane lint typecheck imports test test-unit test-integration demo demo-down \
        cluster-up cluster-down crds chart-crds bench bench-full clean node-deps postgres-deps image release \
        argocd go-tools

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing secretferry with its dev tools"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

setup: $(STAMP)

# The control plane and the node's kubelet + kube-scheduler, built from source once per version.
control-plane:
	@bash hack/build-control-plane.sh --node >/dev/null

# Debian packages for the local node and its images (containerd, runc, buildah, ...); needs root.
node-deps:
	@bash hack/node-deps.sh

# Debian's PostgreSQL server (package `postgresql`) for the dev server's dynamic-secret leases and
# their tests, which start a throwaway cluster as `nobody` in a temporary directory; needs root.
postgres-deps:
	@bash hack/postgres-deps.sh

# pause, busybox, the Python base and localhost/secretferry:dev as OCI archives (cached by content);
# the operator image goes into the running local node when there is one.
image: setup node-deps
	@out=$$(bash hack/build-node-images.sh) && echo "$$out" \
	  && if [ -f $(DEVCLUSTER_DIR)/state.json ]; then \
	    $(BIN)/python -m secretferry.devcluster load-image "$$(sed -n 's/^secretferry=//p' <<< "$$out")" --dir $(DEVCLUSTER_DIR); \
	  fi

lint: setup
	$(BIN)/ruff check operator tests bench
	$(BIN)/ruff format --check operator tests bench

typecheck: setup
	$(BIN)/mypy operator/secretferry

imports: setup
	$(BIN)/lint-imports

test-unit: setup
	$(BIN)/pytest -q tests/unit

test-integration: setup control-plane node-deps postgres-deps
	$(BIN)/pytest -q tests/integration

test: setup control-plane node-deps postgres-deps lint typecheck imports
	$(BIN)/pytest -q -ra tests

crds: setup
	$(BIN)/secretferry crds -o crds

# docs/settings.md from the Settings model (tests/unit/test_settings_reference.py fails on drift).
settings-doc: setup
	$(BIN)/secretferry settings-reference > docs/settings.md

chart-crds: crds
	bash hack/sync-chart-crds.sh

# docs/argocd/: Argo CD health checks, the refresh action and argo-cd chart values, from the CRDs,
# hack/argocd/*.lua and reasons.py (tests/unit/test_argocd.py fails on drift).
argocd: setup
	$(BIN)/python hack/gen-argocd.py

# The Go test tools, built once per content into ~/.cache/secretferry/go-tools/: hack/luacheck (Argo
# CD's Lua interpreter for docs/argocd/) and hack/kstatus (cli-utils' kstatus). Tests build them too.
go-tools:
	@bash hack/build-go-tool.sh hack/luacheck
	@bash hack/build-go-tool.sh hack/kstatus

cluster-up: setup control-plane node-deps
	@$(BIN)/python -m secretferry.devcluster up --dir $(DEVCLUSTER_DIR)

cluster-down: setup
	@$(BIN)/python -m secretferry.devcluster down --dir $(DEVCLUSTER_DIR)

# KEEP=1 leaves everything running and prints how to look around; `make demo-down` stops it.
demo: setup control-plane node-deps
	@$(BIN)/python hack/demo.py $(if $(KEEP),--keep)

demo-down: setup
	@$(BIN)/python hack/demo.py --down

# dist/: wheel, sdist, chart, operator image archive and SHA256SUMS for secretferry.__version__
# (hack/release.sh; CONTRIBUTING.md has the whole procedure). SKIP_IMAGE=1 leaves the image out,
# ALLOW_DIRTY=1 allows uncommitted changes (a trial run).
release: setup $(if $(SKIP_IMAGE),,node-deps)
	@bash hack/release.sh $(if $(SKIP_IMAGE),--skip-image) $(if $(ALLOW_DIRTY),--allow-dirty)

# The quick one: every bench/bench_*.py once at its own default sizes (smaller than the README's:
# e.g. 100 and 1,000 SecretSyncs, not 10,000), on the `tuned` control plane; a smoke run of the
# scripts, not the README's figures. `make bench-full` reproduces those.
bench: setup control-plane
	@for b in bench/bench_*.py; do echo "==> $$b"; $(BIN)/python $$b || exit 1; done

# The README's Benchmarks table, row by row in its order (hours on 2 cores): each line below is one
# script invocation the table quotes, and make prints it before running it. Every report starts
# with the machine, its load, the commit and the control-plane profile with its non-default flags;
# `tuned` (the table's) unless the line says `--control-plane production`.
bench-full: setup control-plane node-deps
	$(BIN)/python bench/bench_operator_scale.py --sizes 1000,10000 --scopes 10,100
	$(BIN)/python bench/bench_operator_scale.py --sizes 10000 --scopes 100 --control-plane production --no-periodic
	$(BIN)/python bench/bench_operator_scale.py --rest 10,100
	$(BIN)/python bench/bench_streams.py
	$(BIN)/python bench/bench_streams.py --quick --event-generation all
	$(BIN)/python bench/bench_node.py --changes 20 --failover
	$(BIN)/python bench/bench_template_bomb.py
	$(BIN)/python bench/bench_template_bomb.py --gap 1.5
	$(BIN)/python bench/bench_template_bomb.py --bombs 0 --reapply-bombs 40
	$(BIN)/python bench/bench_template_bomb.py --bombs 0 --reapply-bombs 200
	$(BIN)/python bench/bench_outage.py
	$(BIN)/python bench/bench_outage.py --expire-tokens
	$(BIN)/python bench/bench_outage.py --mode stop
	$(BIN)/python bench/bench_devserver.py
	$(BIN)/python bench/bench_ratelimit.py --sizes 1000,10000 --scopes 10,100
	$(BIN)/python bench/bench_push.py --pushes 1000 --rest 30
	$(BIN)/python bench/bench_cluster_secretsync.py --n 1000
	$(BIN)/python bench/bench_webhook.py --n 1000
	$(BIN)/python bench/bench_login.py --logins 200

clean:
	rm -rf $(VENV) $(DEVCLUSTER_DIR) .mypy_cache .ruff_cache .pytest_cache
