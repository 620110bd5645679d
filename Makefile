# Two commands do all the set-up themselves [O1]: `make run` serves the API, `make test` tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
WEB ?= 2
WORKERS ?= 2

.PHONY: install run serve-prod test lint bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py bootstrap > .demo.json
	@$(PY) -c "import json; d = json.load(open('.demo.json')); print(json.dumps(d)); print(); print('Try:'); print(f'curl -H \"Authorization: Bearer {d[\"token\"]}\" http://127.0.0.1:$(PORT)/v1/bots/{d[\"bot\"]}/memory')"
	$(PY) manage.py runserver 127.0.0.1:$(PORT)

# [G3] Production serving on this machine: gunicorn and rundramatiq on PostgreSQL + Redis.
serve-prod: install
	WEB=$(WEB) WORKERS=$(WORKERS) PORT=$(PORT) PY=$(PY) scripts/serve_prod.sh

test: install
	$(VENV)/bin/pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

bench: install
	$(PY) -m bench
