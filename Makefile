# misstriage: two commands, `make demo` and `make test`, on a fresh machine with Python >= 3.11.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE := examples/helpcentre

.PHONY: demo demo-evaluate demo-gate test lint format install screenshots bench bench-evaluate bench-import bench-queue bench-dashboard bench-load-fault bench-bomb bench-suite clean

$(STAMP): pyproject.toml scripts/bootstrap_venv.py
	$(PYTHON) scripts/bootstrap_venv.py $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv>=0.5,<1"
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'
	# Bytecode compiled once (as pip does by default): every command starts without compiling
	# its imports again, even where PYTHONDONTWRITEBYTECODE keeps Python from caching them
	# (a third of a second of each `misstriage evaluate`).
	$(BIN)/python -m compileall -q app
	# The compiled pass over large logs (numba) compiled once, kept on disk beside its source:
	# the first large log is not kept waiting some 30 s; and evaluate's pass over a TREC run
	# and the log pass built ahead of time into a module that loads without numba
	# (app/eval/aot.py, about four minutes).
	$(BIN)/python -c "from app.eval.cluster_stream import warm; warm()"
	touch $(STAMP)

install: $(STAMP)

# `make demo PORT=8800` serves on another port (links in exports and downloads follow it).
PORT ?= 8000
demo: $(STAMP)
	$(BIN)/misstriage demo --port $(PORT)

# The offline evaluation of the demo's golden set and runs, no server (clusters from its corpus).
demo-evaluate: $(STAMP)
	$(BIN)/misstriage evaluate --qrels $(EXAMPLE) --corpus $(EXAMPLE)/corpus.jsonl \
		--run bm25=$(EXAMPLE)/runs/bm25.trec \
		--run bm25-expanded=$(EXAMPLE)/runs/bm25-expanded.trec \
		--run rrf=$(EXAMPLE)/runs/rrf.trec \
		--k 10 --depth 50

# The CI gate on the demo's series: commit 3 (rrf) against commit 2 (bm25-expanded), as a CI
# job would run it on a push, printed as the markdown of a pull-request comment. Commit 3 drops
# R@50: the gate fails (exit 1) and names the documents that left the candidates; this target
# reports that and succeeds (it fails on exit 2, bad input).
demo-gate: $(STAMP)
	@$(BIN)/misstriage gate --qrels $(EXAMPLE)/qrels.tsv --queries $(EXAMPLE)/queries.jsonl \
		--baseline $(EXAMPLE)/runs/bm25-expanded.trec --run $(EXAMPLE)/runs/rrf.trec \
		--depth 50 --k 10 --format markdown; status=$$?; echo; \
	echo "misstriage gate exited $$status (0 passed, 1 failed: a CI job stops here, 2 bad input)"; \
	test $$status -le 1

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The suite on every core (pytest-xdist): each worker has its own databases and server ports.
# `make test PYTEST_WORKERS=0` runs it in one process.
PYTEST_WORKERS ?= auto

test: lint
	$(BIN)/pytest -n $(PYTEST_WORKERS)

# Benchmarks: scripts that print their figures (targets included); none is a test.
bench: bench-evaluate bench-import bench-queue bench-dashboard bench-load-fault bench-bomb

bench-evaluate: $(STAMP)
	$(BIN)/python benchmarks/evaluate_msmarco_scale.py

bench-import: $(STAMP)
	$(BIN)/python benchmarks/import_run_http.py

bench-queue: $(STAMP)
	$(BIN)/python benchmarks/queue_http.py

# How fast a decompression bomb is refused on every upload path (and a long JSONL line read).
bench-bomb: $(STAMP)
	$(BIN)/python benchmarks/bomb_refusal.py

# The whole suite as CI runs it, on a fresh clone, three times (about 15 minutes).
bench-suite: $(STAMP)
	$(BIN)/python benchmarks/suite_time.py

bench-dashboard: $(STAMP)
	$(BIN)/python benchmarks/dashboard_http.py

# Every page at 1440 and 768 px as lead and reviewer (docs/screenshots/pages/) and the
# README's two pictures, from a fresh demo in headless Chromium.
screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

# 64 reviewers for 2 minutes against 2 app processes on a throwaway PostgreSQL cluster, with an
# app process killed and PostgreSQL restarted midway; fails unless 0 lost, 0 doubled, 0 stuck.
bench-load-fault: $(STAMP)
	$(BIN)/python benchmarks/load_fault.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
