# natsd: every target creates the virtual environment it needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

FAST := build/mypyc/.stamp
HOT := $(shell find src -name '*.py') tools/build_mypyc.sh

.PHONY: run run-pure test test-compiled lint typecheck unit soak bench bench-quick bench-spark bench-spark-quick compile clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	@touch $(STAMP)

$(FAST): $(STAMP) $(HOT)
	PYTHON=$(BIN)/python tools/build_mypyc.sh
	@touch $(FAST)

## compile: build the mypyc-compiled hot path into build/mypyc (src/ stays pure Python)
compile: $(FAST)

## run: start natsd (compiled hot path) with JetStream on, data in ./data, port 4222, monitoring 8222
run: $(FAST)
	PYTHONPATH=build/mypyc $(BIN)/python -m natsd -js -sd ./data -p 4222 -m 8222

## run-pure: the same with the pure-Python modules
run-pure: $(STAMP)
	$(BIN)/natsd -js -sd ./data -p 4222 -m 8222

## test: lint, type-check, the whole suite on pure Python, then unit+integration compiled
test: lint typecheck
	$(BIN)/python -m pytest -q -p no:cacheprovider
	$(MAKE) test-compiled

test-compiled: $(FAST)
	PYTHONPATH=build/mypyc NATSD_EXPECT_COMPILED=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/unit tests/integration tests/storage tests/jetstream

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

## soak: the long fault-injection tier (kill -9 x1000 and friends), not part of make test
soak: $(FAST)
	PYTHONPATH=build/mypyc $(BIN)/python -m pytest -q -p no:cacheprovider -m soak tests/reliability

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

## bench: natsd vs nats-server side by side (1M msgs, 3 repeats)
bench: $(FAST)
	$(BIN)/python bench/bench.py --repeat 3 --natsd-cmd "env PYTHONPATH=build/mypyc $(BIN)/python -m natsd"

bench-quick: $(FAST)
	$(BIN)/python bench/bench.py --quick --natsd-cmd "env PYTHONPATH=build/mypyc $(BIN)/python -m natsd"

## bench-spark: the Spark connector against natsd and nats-server (1M messages, ~6 min)
bench-spark: $(FAST)
	$(BIN)/python bench/spark_bench.py

bench-spark-quick: $(FAST)
	$(BIN)/python bench/spark_bench.py --messages 100000

bench-pure: $(STAMP)
	$(BIN)/python bench/bench.py --quick

clean:
	rm -rf $(VENV) build *.egg-info
