# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
EXAMPLE ?= examples/demo-cluster.json
LISTEN ?= 127.0.0.1:9808
CHART := deploy/helm/topology-hints-exporter

# Some machines set PYTHONDONTWRITEBYTECODE; the suite then recompiles the package in every
# CLI subprocess and pytest rewrites every test module again on every xdist worker (a
# collection of 14 s instead of 2 s here). Bytecode caches are git-ignored and not in the image.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run explain test check lint format generate lock bench clean kube-binaries ksm-binary

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Serve the bundled example cluster; open the printed URL (Ctrl-C stops it).
run: $(STAMP)
	@echo "topology-hints-exporter: serving $(EXAMPLE) at http://$(LISTEN)/ (metrics at http://$(LISTEN)/metrics)"
	$(BIN)/topology-hints-exporter serve --snapshot $(EXAMPLE) --listen-address $(LISTEN) --log-format console

# The same verdicts for people, on every example (exit 1 only says some lack hints).
explain: $(STAMP)
	@for example in examples/*.json; do \
		echo "== $$example"; \
		$(BIN)/topology-hints-exporter explain --snapshot $$example; \
		[ $$? -le 1 ] || exit 1; \
	done

# The suite is spread over the machine's cores (pytest-xdist); each real-cluster module keeps
# to one worker, whose control planes its tests share (tests/realcluster/conftest.py). Two
# workers a core: a real-cluster test spends most of its time waiting for the controller
# (about a third of a core busy), and the other workers use the rest (on 2 cores: 13 min 08 s
# with 2 workers, 11 min 20 s with 4, the same tree).
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
PYTEST_ARGS ?= -n $(WORKERS) --dist loadgroup

test: $(STAMP) lint kube-binaries
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The inner loop: lint and types, then every test that starts no server, image, browser or
# upstream component (tests/quick.py marks them, and fails an unmarked one that does).
QUICK_MARKS := not (server or e2e or browser or image or real or slow)
# Those tests never wait on a server: one worker a core.
CHECK_ARGS ?= -n auto --dist loadgroup

check: $(STAMP) lint
	TOPOLOGY_HINTS_QUICK=1 $(BIN)/python -m pytest $(CHECK_ARGS) -m "$(QUICK_MARKS)"

# The pinned upstream etcd, kube-apiserver, kube-controller-manager and kube-proxy the
# real-cluster tests run (tools/kube): built once from Go modules, then reused. The last
# line printed is their folder.
kube-binaries:
	@$(PYTHON) tools/kube/build.py

# The pinned kube-state-metrics `make bench` runs beside the exporter (tools/ksm): built once
# from its Go module into build/ksm/VERSION, then reused. The last line printed is its folder.
ksm-binary:
	@$(PYTHON) tools/ksm/build.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	# bench/'s scripts import `cluster` top-level, tests import bench.cluster: a run apart.
	$(BIN)/mypy bench/bench.py bench/status_page.py bench/cluster.py bench/render.py bench/report.py \
		bench/ksm.py bench/procstat.py bench/apicost.py bench/memos.py bench/escaping.py \
		bench/render_split.py bench/crosszone.py bench/initial_stream.py
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Rewrite every generated artefact; tests fail when a committed one differs.
generate: $(STAMP)
	$(BIN)/python -m alerts.generate
	$(BIN)/python -m dashboards.generate
	$(BIN)/python -m mixin.generate
	$(BIN)/python examples/generate.py
	$(BIN)/python -m exporter.metrics.reference > docs/metrics.md
	$(BIN)/python -m exporter.report.problems > docs/problems.md
	# The Helm chart reads only files inside its folder: it gets copies (tests/test_helm.py).
	rm -f $(CHART)/files/rules/*.yaml $(CHART)/files/dashboards/*.json
	cp alerts/*.yaml $(CHART)/files/rules/
	cp dashboards/*.json $(CHART)/files/dashboards/

# Pin the image's dependencies, and setuptools to build it, with their hashes (the Dockerfile
# installs only these). Existing pins are kept; `make lock LOCK_ARGS=--upgrade` moves them.
lock: $(STAMP)
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --all-build-deps --strip-extras \
		--no-emit-index-url --no-emit-find-links $(LOCK_ARGS) \
		--output-file requirements.lock pyproject.toml

bench: $(STAMP) ksm-binary
	$(BIN)/python bench/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
