# The two commands of the README: `make run` and `make test`.
# The interpreter of the venv: the distribution's CPython 3.11 when the machine has one that can make a venv
# (Debian's, like the official python:3.11 images', is built with profile-guided optimisation and LTO; pyenv's
# default build is not, and runs the gateway's request path with about 20% more CPU), else python3 from PATH.
PYTHON ?= $(shell for p in /usr/local/bin/python3.11 /usr/bin/python3.11; do \
	$$p -c 'import ensurepip, venv' 2>/dev/null && { echo $$p; exit; }; done; echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# pip-tools for `make lock`, in a venv of its own (never the project's).
# (one per interpreter version: markers such as python_full_version < "3.11.3" decide what the locks hold).
LOCK_TOOLS ?= /tmp/model-gateway-pip-tools-$(shell $(PYTHON) -c 'import platform; print(platform.python_version())')
LOCK_FLAGS := --quiet --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links \
	--build-deps-for editable

.PHONY: run test test-billing-sqlite lint format typecheck install fuzz lock docs

## The venv from the lock file only: every package pinned with its hashes (requirements-dev.lock: runtime + dev),
## then the project itself in place without dependencies and with the locked setuptools (no build isolation).
$(STAMP): requirements-dev.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

## Re-pin pyproject.toml's ranges into requirements-dev.lock (runtime + dev: make install, make test, CI) and
## requirements.lock (runtime: the Dockerfile), with hashes, for Python 3.11 on Linux x86_64. Pins that still fit
## are kept; `make lock LOCK_ARGS=--upgrade` takes the newest of everything, `LOCK_ARGS='--upgrade-package django'`
## of one. The runtime lock starts from the dev lock's pins, so the image runs the versions the tests ran.
lock:
	test -x $(LOCK_TOOLS)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_TOOLS) \
		&& $(LOCK_TOOLS)/bin/python -m pip install --quiet --upgrade pip 'pip-tools==7.6.2'; }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOLS)/bin/pip-compile $(LOCK_FLAGS) $(LOCK_ARGS) --extra dev \
		-o requirements-dev.lock pyproject.toml
	grep -E '^[A-Za-z0-9]' requirements-dev.lock | cut -d' ' -f1 > requirements.lock
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOLS)/bin/pip-compile $(LOCK_FLAGS) -o requirements.lock pyproject.toml

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
	case "$${DATABASE_URL:-}" in postgres*) $(MAKE) test-billing-sqlite;; esac

## The billing and credits tests on SQLite (the default database), for when the suite ran on PostgreSQL: the hold and
## the settlement are one statement each there and steps in a transaction on SQLite, from one definition
## (gateway/billing/statements.py). About 30 seconds.
test-billing-sqlite: $(STAMP)
	env -u DATABASE_URL $(BIN)/python -m pytest tests/billing tests/accounts

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

## Regenerate the table of environment variables in docs/configuration.md from the code (stdlib only, no venv).
docs:
	$(PYTHON) scripts/config_table.py
