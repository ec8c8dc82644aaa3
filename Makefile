# make run   the app on its embedded default: SQLite, kombu's filesystem broker, demo data
# make test  the whole test suite (DATABASE_URL / CELERY_BROKER_URL from the environment)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint bench

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

run: export DEBUG ?= 1
run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py create_queue --project demo --name "Label the demo failures" --filter outcome=failure
	$(BIN)/python manage.py judge --config heuristic --project demo --here
	$(BIN)/python manage.py ensure_login
	@echo "Open http://$(HOST):$(PORT)/ (API schema: http://$(HOST):$(PORT)/api/schema/)"
	@trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(BIN)/celery -A config worker --beat --loglevel=WARNING --concurrency=2 -Q default,gpu,export & worker=$$!; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT) --noreload

test: $(VENV)/.installed
	$(BIN)/python -m pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(VENV)/.installed
	$(BIN)/python bench/ingest.py
