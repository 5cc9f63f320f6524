# The two commands a fresh machine needs: `make demo` and `make test`. Each installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup postgres demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

postgres:
	@bin/ensure-postgres

demo: setup postgres
	bin/demo

test: setup postgres
	$(BIN)/ruff check .
	$(BIN)/pytest -q -n 2 --dist loadfile

bench: setup postgres
	$(BIN)/python -m bench.run

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
