# natsd: every target creates the virtual environment it needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench bench-quick clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

## run: start natsd with JetStream on, data under ./data, port 4222, monitoring on 8222
run: $(STAMP)
	$(BIN)/natsd -js -sd ./data -p 4222 -m 8222

## test: lint, type-check and run the whole test suite
test: lint typecheck
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

## bench: natsd vs nats-server side by side (1M msgs, 3 repeats)
bench: $(STAMP)
	$(BIN)/python bench/bench.py --repeat 3

bench-quick: $(STAMP)
	$(BIN)/python bench/bench.py --quick

clean:
	rm -rf $(VENV) build *.egg-info
