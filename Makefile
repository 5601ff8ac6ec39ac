# misstriage: two commands, `make demo` and `make test`, on a fresh machine with Python >= 3.11.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE := examples/helpcentre

.PHONY: demo test lint format install bench clean

$(STAMP): pyproject.toml scripts/bootstrap_venv.py
	$(PYTHON) scripts/bootstrap_venv.py $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv>=0.5,<1"
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/misstriage evaluate --qrels $(EXAMPLE) \
		--run bm25=$(EXAMPLE)/runs/bm25.trec \
		--run bm25-expanded=$(EXAMPLE)/runs/bm25-expanded.trec \
		--k 3 --depth 5 --depths 1,3,5,10

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/evaluate_msmarco_scale.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
