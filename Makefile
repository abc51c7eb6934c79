# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint install fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Set everything up on the embedded defaults and run the gateway on 127.0.0.1:$${PORT:-8000}.
run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/run.sh

## The whole suite: lint, migration and schema drift checks, tests (SQLite unless DATABASE_URL is set).
test: $(STAMP)
	$(BIN)/ruff check .
	DJANGO_SETTINGS_MODULE=gateway.settings.test $(BIN)/python manage.py makemigrations --check --dry-run
	DJANGO_SETTINGS_MODULE=gateway.settings.test $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null
	$(BIN)/python -m pytest

## Schemathesis against a live gateway (tests/e2e/test_schema_fuzz.py): all phases, 100 examples per operation.
fuzz: $(STAMP)
	FUZZ_PHASES=examples,coverage,fuzzing FUZZ_MAX_EXAMPLES=100 FUZZ_TIMEOUT=1800 \
		$(BIN)/python -m pytest tests/e2e/test_schema_fuzz.py -p no:randomly
