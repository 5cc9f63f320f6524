# The two commands a fresh machine needs: `make demo` and `make test`. Each installs what it needs.
# `make check` is the fast lane while working: lint, types and the unit tests, no PostgreSQL.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup web js a2a03 hermes postgres chromium demo check test lint typecheck unit suite screens bench clean

setup: $(VENV)/.installed web

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The official Supabase JavaScript client for the tests, from the lock file (skipped, and its
# tests with it, on a machine without Node).
js: tests/js/node_modules/.installed

tests/js/node_modules/.installed: tests/js/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix tests/js --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "no npm: the supabase-js tests will be skipped"; fi

# The real A2A 0.3 server the run-a2a tests also run against: a2a-sdk 0.3.26 can't share a
# venv with 1.3, so it has one of its own inside .venv (its tests are skipped where it can't
# be built).
a2a03: $(VENV)/a2a03/.installed

$(VENV)/a2a03/.installed: | $(VENV)/.installed
	@$(PY) -m venv $(VENV)/a2a03 \
		&& $(VENV)/a2a03/bin/pip install --quiet 'a2a-sdk[http-server]==0.3.26' 'uvicorn>=0.29,<1' \
		&& touch $@ \
		|| echo "no a2a-sdk 0.3 venv: the tests against the real 0.3 server will be skipped"

# The real Hermes (hermes-agent 0.19.0) the Hermes plug-in is tested in: it pins its
# dependencies exactly, so it has a venv of its own inside .venv with this package installed
# editable into it (its tests are skipped where it can't be built).
hermes: $(VENV)/hermes/.installed

$(VENV)/hermes/.installed: pyproject.toml | $(VENV)/.installed
	@$(PY) -m venv $(VENV)/hermes \
		&& $(VENV)/hermes/bin/pip install --quiet 'hermes-agent==0.19.0' \
		&& $(VENV)/hermes/bin/pip install --quiet -e . \
		&& touch $@ \
		|| echo "no Hermes venv: the Hermes plug-in's tests will be skipped"

postgres:
	@bin/ensure-postgres

# The web app the relay serves at /app/: its packages from web's lock file, bundled into
# web/dist (skipped on a machine without Node: the relay then says how to build it).
web: web/dist/index.html

web/node_modules/.installed: web/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix web --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "no npm: the web app isn't built (its browser tests will be skipped)"; fi

web/dist/index.html: web/node_modules/.installed web/build.mjs $(shell find web/src -type f 2>/dev/null)
	@if [ -f web/node_modules/.installed ]; then npm run --prefix web --silent build; fi

# Debian's Chromium, which the web app's browser tests drive (installed when missing).
chromium:
	@bin/ensure-chromium

demo: setup postgres
	bin/demo

# Each lane runs every step (-k) even when one fails, so one run shows every problem; it still
# fails if any step did. `check` runs its steps side by side (-j, output grouped per step): a
# cold mypy takes about 20 s, which then overlaps the unit tests instead of adding to them.
check: setup
	@$(MAKE) --no-print-directory -k -j3 -Otarget lint typecheck unit

test: setup postgres chromium
	@$(MAKE) --no-print-directory -k lint typecheck suite

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# Tests that need no PostgreSQL or relay: tests/conftest.py marks the others `integration`.
unit: setup
	YUI_FUZZ_SCALE=0.25 $(BIN)/pytest -q -n 2 --dist loadfile -m "not integration"

# The whole suite, integration tests included.
suite: setup postgres js a2a03 hermes
	$(BIN)/pytest -q -n 2 --dist loadfile

# Photograph every preset the web app draws into docs/screens/ (the tests photograph them into
# a temporary folder otherwise).
screens: setup postgres chromium
	YUI_SCREENS=docs $(BIN)/pytest -q tests/test_web_screens.py

bench: setup postgres js
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache tests/js/node_modules web/node_modules web/dist
