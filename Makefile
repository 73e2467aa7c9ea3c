# natsd: every target creates the virtual environment it needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# natsd installed in place (pip install -e .) with its hot modules compiled by mypyc
# (setup.py), as a user's install is: the extension modules sit beside their sources in src/.
# They are the very ones the wheel ships: $(WHEEL) is built once, as a user's pip builds it
# (isolated, compiled), and its extension modules are copied into src/, which is what an
# in-place build writes (setup.py's BuildHotPath); one mypyc compile serves the compiled
# tier and wheel-smoke.
FAST := $(VENV)/.compiled
WHEEL := build/wheel/.built
# npm ci writes node_modules/.package-lock.json: the stamp of the installed lock file.
NODE_STAMP := tests/node/node_modules/.package-lock.json
CONSOLE_STAMP := console/node_modules/.package-lock.json
# -ra: the summary lists every skip with its reason (a missing component fails under CI=true).
PYTEST := $(BIN)/python -m pytest -q -ra -p no:cacheprovider
# The in-process, CPU-bound directories (no real-time waits, no processes): pytest-xdist runs
# them on every core; and on pure Python the differential tests too (each waits mostly on
# its nats-server and natsd, and asserts their answers, never their timing). The rest (the
# in-process and real-process clusters with their leases, the fault runs) runs one at a time.
PARALLEL_DIRS := tests/unit tests/raft tests/storage tests/jscore tests/jetstream
XDIST := -n $(shell nproc 2>/dev/null || echo 2)
HOT := $(shell find src/natsd -name '*.py') setup.py
# NATSD_PURE=1: natsd loads its Python sources instead of the compiled modules (natsd/hotpath.py)
PURE := NATSD_PURE=1

.PHONY: docs install run run-pure test test-compiled mutants wheel-smoke node-modules browser console-vendor py313 lint typecheck unit soak bench bench-quick bench-scale bench-curve bench-spark bench-spark-quick compile clean

# The dependencies, and natsd in place without compiling (the compile is $(WHEEL)'s, since
# it must follow every change of a source). --no-build-isolation: this install uses this
# environment's setuptools (the wheel's build is isolated, with [build-system]'s pins).
$(STAMP): pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip 'setuptools>=77' wheel
	NATSD_COMPILE=0 $(BIN)/python -m pip install -q --no-build-isolation -e '.[dev,spark]'
	@touch $(STAMP)

$(WHEEL): $(STAMP) $(HOT)
	rm -rf build/wheel
	$(BIN)/python -m pip wheel -q --no-deps -w build/wheel .
	@touch $(WHEEL)

$(FAST): $(WHEEL)
	find src -name '*.so' -delete
	rm -f src/natsd/hotpath.sha256
	$(BIN)/python -c 'import sys, zipfile; w = zipfile.ZipFile(sys.argv[1]); \
	  [w.extract(n, "src") for n in w.namelist() if n.endswith(".so") or n == "natsd/hotpath.sha256"]' \
	  build/wheel/natsd-*.whl
	NATSD_EXPECT_COMPILED=1 $(BIN)/python -c 'import natsd.core.build as b; assert b.BUILD == "compiled", b.BUILD'
	@touch $(FAST)

## docs: the reference site (docs/, Sphinx with MyST) into build/site; warnings are errors
## (docs/reference/ is generated from the configuration tables and the Spark options)
docs: $(STAMP)
	rm -rf build/site
	$(BIN)/sphinx-build -q -W --keep-going -n -b html docs build/site

## install: .venv with natsd (its hot path compiled, as pip installs it), the nats command
## line and the Spark connector
install: $(FAST)

## compile: build the wheel (compiled) and put its extension modules beside their sources
compile: $(FAST)

## run: start natsd (the installed, compiled build) with JetStream on, data in ./data, port
## 4222, monitoring 8222
run: $(FAST)
	$(BIN)/natsd -js -sd ./data -p 4222 -m 8222

## run-pure: the same with the pure-Python modules
run-pure: $(STAMP)
	$(PURE) $(BIN)/natsd -js -sd ./data -p 4222 -m 8222

## test: lint, type-check, the docs build, the whole suite on pure Python (NATSD_PURE=1), then the
## mutation check of the fault suite (mutants), then unit+integration compiled, and the
## replicated-stream fault suite (tests/faults) on the compiled servers only: it runs real
## multi-process clusters through 50 fault cycles, and once is enough; with them, every
## command and program of the README and the site (tests/docs: they run natsd as `make
## install` builds it); then the wheel, built and installed as a user would (wheel-smoke)
test: lint typecheck docs node-modules browser py313
	$(PURE) $(PYTEST) $(XDIST) $(PARALLEL_DIRS) tests/sim tests/differential
	$(PURE) $(PYTEST) --durations=25 --ignore=tests/faults --ignore=tests/wheel --ignore=tests/docs \
	  $(addprefix --ignore=,$(PARALLEL_DIRS) tests/sim tests/differential)
	$(MAKE) mutants
	$(MAKE) test-compiled
	$(MAKE) wheel-smoke

test-compiled: $(FAST)
	NATSD_EXPECT_COMPILED=1 $(PYTEST) $(XDIST) $(PARALLEL_DIRS)
	NATSD_EXPECT_COMPILED=1 $(PYTEST) --durations=15 tests/integration tests/upgrade tests/faults tests/plugin tests/docs

## mutants: plant known bugs (tests/mutants/run.py: a minority commit, a WAL sync that does
## not sync, a PubAck before the commit, ...) one at a time in a copy of src/, run the same
## short kill suite against each (pure Python), and fail unless every one is caught
mutants: $(STAMP)
	$(BIN)/python tests/mutants/run.py

## wheel-smoke: the wheel built as a user's pip builds it (isolated, compiled), installed
## into a fresh virtual environment, and tests/wheel run there against the installed package
wheel-smoke: $(WHEEL)
	rm -rf build/wheel-venv
	$(PYTHON) -m venv build/wheel-venv || python3 -m venv build/wheel-venv
	build/wheel-venv/bin/python -m pip install -q build/wheel/natsd-*.whl pytest pytest-asyncio
	cd tests/wheel && ../../build/wheel-venv/bin/python -m pytest -q -ra -p no:cacheprovider -c pytest.ini .

## node-modules: the nats.js packages of tests/node/package-lock.json (npm ci), for tests/node
node-modules: $(NODE_STAMP) $(CONSOLE_STAMP)

# Without npm: an error under CI=true; elsewhere a warning, and the node tests skip with it.
$(NODE_STAMP): tests/node/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd tests/node && npm ci --no-audit --no-fund --loglevel=error; \
	elif case "$$CI" in true|TRUE|True|1|yes) true;; *) false;; esac; then \
	  echo "CI=true: npm is missing, the node tests cannot run" >&2; exit 1; \
	else \
	  echo "warning: npm not found; tests/node will skip (CI=true makes this an error)" >&2; \
	fi

# The console's front-end packages (console/package-lock.json), whose files the console
# ships vendored: tests/unit/test_console_vendor.py checks the copies against them.
$(CONSOLE_STAMP): console/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd console && npm ci --no-audit --no-fund --loglevel=error; \
	elif case "$$CI" in true|TRUE|True|1|yes) true;; *) false;; esac; then \
	  echo "CI=true: npm is missing, the console's packages cannot be checked" >&2; exit 1; \
	fi

## console-vendor: copy the console's front-end libraries, unmodified, from npm's packages
## (console/package.json pins them) into src/natsd/monitor/console_page/vendor
console-vendor: $(CONSOLE_STAMP)
	cp console/node_modules/htm/preact/standalone.module.js src/natsd/monitor/console_page/vendor/htm-preact-standalone.module.js
	cp console/node_modules/uplot/dist/uPlot.esm.js console/node_modules/uplot/dist/uPlot.min.css src/natsd/monitor/console_page/vendor/
	cp console/node_modules/htm/LICENSE src/natsd/monitor/console_page/vendor/LICENSE-htm
	cp console/node_modules/preact/LICENSE src/natsd/monitor/console_page/vendor/LICENSE-preact
	cp console/node_modules/uplot/LICENSE src/natsd/monitor/console_page/vendor/LICENSE-uplot

## browser: Debian's Chromium, for the console's browser tests (tests/console; Playwright
## drives it and downloads no browser). Installed with apt-get when missing; without it
## the tests fail under CI=true and skip elsewhere.
browser:
	@if command -v chromium >/dev/null 2>&1 || [ -n "$$NATSD_CHROMIUM" ]; then true; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	  echo "warning: no chromium and no apt-get as root to install it; tests/console will skip (fail under CI=true)" >&2; \
	fi

## py313: build/py313, a Python 3.13 environment with the clients that need it
## (tests/py313/requirements.txt: nats.py's newer nats-jetstream), for tests/py313
# the first interpreter that runs as 3.13: on PATH, or pyenv's (whose python3.13 shim only
# runs when 3.13 is the selected version)
PY313 ?= $(shell for p in python3.13 $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.13*/bin/python3.13 \
  /usr/local/bin/python3.13 /usr/bin/python3.13; do \
  $$p -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null && { echo $$p; break; }; \
  done)
PY313_STAMP := build/py313/.installed
py313: $(PY313_STAMP)

# Without Python 3.13: an error under CI=true; elsewhere a warning, and tests/py313 skip.
$(PY313_STAMP): tests/py313/requirements.txt
	@if [ -n "$(PY313)" ]; then \
	  rm -rf build/py313 && $(PY313) -m venv build/py313 && \
	  build/py313/bin/python -m pip install -q -r tests/py313/requirements.txt && \
	  touch $(PY313_STAMP); \
	elif case "$$CI" in true|TRUE|True|1|yes) true;; *) false;; esac; then \
	  echo "CI=true: no Python 3.13 interpreter, tests/py313 cannot run" >&2; exit 1; \
	else \
	  echo "warning: no Python 3.13 interpreter; tests/py313 will skip (CI=true makes this an error)" >&2; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

## soak: the long fault-injection tier (kill -9 x1000 and friends), not part of make test
soak: $(FAST)
	$(PYTEST) -m soak tests/reliability tests/raft tests/storage/test_group_power_loss.py tests/faults tests/sim

unit: $(STAMP)
	$(PYTEST) tests/unit

## bench: natsd vs nats-server side by side (1M msgs, 3 repeats)
bench: $(FAST)
	$(BIN)/python bench/bench.py --repeat 3

bench-quick: $(FAST)
	$(BIN)/python bench/bench.py --quick

## bench-scale: memory, restart time and disk as a file stream grows (natsd beside nats-server)
bench-scale: $(FAST)
	$(BIN)/python bench/scale.py --sizes 10k,100k,1M,10M --pure

## bench-curve: consumers, idle connections, KV (1M keys) and stream growth (natsd beside nats-server)
bench-curve: $(FAST)
	$(BIN)/python bench/curve.py --kv-keys 1M

## bench-spark: the Spark connector against natsd and nats-server (1M messages, ~6 min)
bench-spark: $(FAST)
	$(BIN)/python bench/spark_bench.py

bench-spark-quick: $(FAST)
	$(BIN)/python bench/spark_bench.py --messages 100000

bench-pure: $(STAMP)
	$(PURE) $(BIN)/python bench/bench.py --quick

clean:
	rm -rf $(VENV) build *.egg-info tests/node/node_modules src/natsd/hotpath.sha256
	find src -name '*.so' -delete
