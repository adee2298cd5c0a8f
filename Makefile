# Each target works from a fresh clone: it builds .venv if it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test lint typecheck unit bench bench-lme bench-perf e2e-local clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	# engram-search's own modules need only numpy; its declared deps would bring torch (docs/bench/peers.md).
	$(BIN)/python -m pip install -q --no-deps 'engram-search==0.1.7'
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: venv
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest -q

test: lint typecheck unit

# Each bench run gets its own folder under runs/ (log, rankings, report.md, results.json/.csv, recall.png);
# the bench stores are built once in $(MEMLANE_CACHE_DIR or ~/.cache/memlane)/bench and reused.
RUN_STAMP := $(shell date +%Y%m%d-%H%M%S)

bench: venv
	$(BIN)/memlane bench retrieval locomo --baselines default --out runs/locomo-$(RUN_STAMP)

bench-lme: venv
	$(BIN)/memlane bench retrieval longmemeval-s --baselines default --out runs/longmemeval-s-$(RUN_STAMP)

bench-perf: venv
	$(BIN)/memlane bench perf

# Opt-in real-model smoke of the QA pipeline (not part of `test`): builds llama-cpp-python and a local
# Qwen2.5-Coder-0.5B server under runs/e2e-local/, then extraction, answering and judging on 20 LoCoMo
# questions (docs/bench/qa.md).
e2e-local: venv
	nice -n 19 scripts/e2e_local.sh

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
