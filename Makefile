# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format typecheck install fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## Set everything up on the embedded defaults and run the gateway on 127.0.0.1:$${PORT:-8000}.
run: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/run.sh

## The whole suite: lint, the layers contract, types, migration and schema drift checks, tests (SQLite unless
## DATABASE_URL is set).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	DJANGO_SETTINGS_MODULE=gateway.settings.test $(BIN)/python manage.py makemigrations --check --dry-run
	DJANGO_SETTINGS_MODULE=gateway.settings.test $(BIN)/python manage.py spectacular --validate --fail-on-warn --file /dev/null
	$(BIN)/python -m pytest

## Schemathesis against a live gateway (tests/e2e/test_schema_fuzz.py): all phases, 100 examples per operation.
fuzz: $(STAMP)
	FUZZ_PHASES=examples,coverage,fuzzing FUZZ_MAX_EXAMPLES=100 FUZZ_TIMEOUT=1800 \
		$(BIN)/python -m pytest tests/e2e/test_schema_fuzz.py -p no:randomly

## Lint only: ruff's rules, ruff's formatting (check, no rewrite) and the import layers (pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

## Rewrite the code into ruff's format and apply ruff's safe fixes.
format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## Static types: mypy with the Django and DRF plugins ([tool.mypy] in pyproject.toml).
typecheck: $(STAMP)
	$(BIN)/mypy
