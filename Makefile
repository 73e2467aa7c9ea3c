# natsd: every target creates the virtual environment it needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

FAST := build/mypyc/.stamp
# npm ci writes node_modules/.package-lock.json: the stamp of the installed lock file.
NODE_STAMP := tests/node/node_modules/.package-lock.json
# -ra: the summary lists every skip with its reason (a missing component fails under CI=true).
PYTEST := $(BIN)/python -m pytest -q -ra -p no:cacheprovider
HOT := $(shell find src -name '*.py') tools/build_mypyc.sh

.PHONY: run run-pure test test-compiled node-modules lint typecheck unit soak bench bench-quick bench-spark bench-spark-quick compile clean

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

## test: lint, type-check, the whole suite on pure Python, then unit+integration compiled, and
## the replicated-stream fault suite (tests/faults) on the compiled servers only: it runs
## real multi-process clusters through 50 fault cycles, and once is enough
test: lint typecheck node-modules
	$(PYTEST) --ignore=tests/faults
	$(MAKE) test-compiled

test-compiled: $(FAST)
	PYTHONPATH=build/mypyc NATSD_EXPECT_COMPILED=1 $(PYTEST) tests/unit tests/integration tests/storage tests/jetstream tests/jscore tests/raft tests/faults tests/plugin

## node-modules: the nats.js packages of tests/node/package-lock.json (npm ci), for tests/node
node-modules: $(NODE_STAMP)

# Without npm: an error under CI=true; elsewhere a warning, and the node tests skip with it.
$(NODE_STAMP): tests/node/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd tests/node && npm ci --no-audit --no-fund --loglevel=error; \
	elif case "$$CI" in true|TRUE|True|1|yes) true;; *) false;; esac; then \
	  echo "CI=true: npm is missing, the node tests cannot run" >&2; exit 1; \
	else \
	  echo "warning: npm not found; tests/node will skip (CI=true makes this an error)" >&2; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

## soak: the long fault-injection tier (kill -9 x1000 and friends), not part of make test
soak: $(FAST)
	PYTHONPATH=build/mypyc $(PYTEST) -m soak tests/reliability tests/raft tests/storage/test_group_power_loss.py tests/faults

unit: $(STAMP)
	$(PYTEST) tests/unit

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
	rm -rf $(VENV) build *.egg-info tests/node/node_modules
