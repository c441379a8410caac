# llm-bot — the front door. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z][a-z0-9-]*:.*## ' $(MAKEFILE_LIST) | sort | \
		awk -F':.*## ' '{printf "  make %-17s %s\n", $$1, $$2}'

LOCK := requirements.lock
RUNTIME_LOCK := requirements-runtime.lock
PIP_COMPILE = $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --all-build-deps \
	--strip-extras --no-emit-index-url --no-emit-find-links -c constraints.txt

# Every package, the build backend included, comes from the hashed lock (--require-hashes):
# a file that is not the one locked is refused. llm-bot itself is then installed without
# dependencies or build isolation (nothing more is downloaded); pip check fails the install
# when the lock is missing something pyproject.toml asks for (run make lock).
$(STAMP): pyproject.toml $(LOCK)
	@echo "make: creating $(VENV) and installing llm-bot with its dev tools from $(LOCK) (once; about a minute)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --progress-bar off --require-hashes --no-deps -r $(LOCK)
	$(BIN)/pip install --quiet --progress-bar off --no-deps --no-build-isolation -e .
	$(BIN)/pip check
	@echo "make: distilling the static embeddings table from the pinned all-MiniLM-L6-v2 (about a minute)"
	$(BIN)/python -m llm_bot.adapters.static_model
	touch $(STAMP)
	@echo "make: installed $(BIN)/llm-bot (not on PATH: run it as $(BIN)/llm-bot, or source $(BIN)/activate)"

TS := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed

# The TypeScript client's packages, exactly as package-lock.json lists them (npm ci).
$(TS_STAMP): $(TS)/package.json $(TS)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Node.js 20 with npm"; exit 1; }
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_STAMP)

.PHONY: ts-install
ts-install: $(TS_STAMP) ## install the TypeScript client's packages from its lockfile (npm ci in clients/typescript)

.PHONY: ts-types
ts-types: $(TS_STAMP) ## regenerate the TypeScript client's types (clients/typescript/src/generated/) from schemas/
	cd $(TS) && npm run --silent types

.PHONY: test-ts
test-ts: $(STAMP) $(TS_STAMP) ## the TypeScript client's tests (node --test) against real RabbitMQ and the service
	$(BIN)/pytest tests/e2e/test_typescript_client.py

.PHONY: install
install: $(STAMP) ## create .venv and install llm-bot with its dev tools from the hashed lock (requirements.lock)

.PHONY: dev
dev: $(STAMP) ## the fake model, consumer, memory worker and inspector in one terminal (prefixed logs; Ctrl-C stops all)
	$(BIN)/llm-bot dev

.PHONY: run
run: $(STAMP) ## run the consumer (needs RabbitMQ, Redis and OPENAI_API_KEY or OPENAI_BASE_URL)
	$(BIN)/llm-bot run

.PHONY: worker
worker: $(STAMP) ## run the memory worker (classify, compact, finalize) beside `make run`
	$(BIN)/llm-bot worker

.PHONY: gateway
gateway: $(STAMP) ## run the OpenAI-compatible gateway on :8000 beside `make run` (needs LLM_BOT_GATEWAY_KEYS)
	$(BIN)/llm-bot gateway

.PHONY: inspect
inspect: $(STAMP) ## the memory inspector in the browser on :8081 (needs LLM_BOT_INSPECTOR_KEYS: see docs/inspector.md)
	$(BIN)/llm-bot inspect

.PHONY: screenshots
screenshots: $(STAMP) ## README's inspector pictures (docs/images/): seeded demo data through the broker, headless Chromium
	$(BIN)/pytest tests/screenshots

.PHONY: demo
demo: $(STAMP) ## a 7-turn conversation through RabbitMQ (with an imported earlier chat) against the built-in fake model
	LLM_BOT_LOG_LEVEL=$${LLM_BOT_LOG_LEVEL:-warning} LLM_BOT_LOG_FORMAT=$${LLM_BOT_LOG_FORMAT:-console} $(BIN)/llm-bot demo

.PHONY: fake-model
fake-model: $(STAMP) ## serve the fake OpenAI-compatible model on :8089 (for make run without a key)
	$(BIN)/llm-bot fake-model --port 8089

# make test spreads the suite over TEST_WORKERS pytest-xdist workers: most integration and
# end-to-end time is waiting (on the broker, child processes, timeouts), which workers
# overlap even on 2 cores. --dist loadgroup keeps the tests of one session cluster in one
# worker (tests/support/workers.py); e2e and integration go first, the longest tests out
# early. TEST_WORKERS=0: one process, in order.
TEST_WORKERS ?= 4

.PHONY: test
test: $(STAMP) $(TS_STAMP) ## run the whole suite (the TypeScript client's tests too) against real RabbitMQ and Redis, 4 workers
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup tests/e2e tests/integration tests/unit

.PHONY: test-unit
test-unit: $(STAMP) ## unit tests: no RabbitMQ, Redis or promtool needed (the infra-marked ones are left to infra-check); one process per core
	$(BIN)/pytest tests/unit -m "not infra" -n auto

.PHONY: test-integration
test-integration: $(STAMP) ## integration tests against real RabbitMQ and Redis (the service in-process)
	$(BIN)/pytest tests/integration

.PHONY: test-e2e
test-e2e: $(STAMP) ## end-to-end tests: llm-bot run / worker as processes, driven through the broker
	$(BIN)/pytest tests/e2e

.PHONY: infra-check
infra-check: $(STAMP) ## validate infra/: promtool on alert rules, their tests, prometheus.yml and the dashboard's queries; compose and kustomize when installed
	@command -v promtool >/dev/null 2>&1 || { \
		echo "promtool is missing: install Debian's prometheus package (apt-get install -y prometheus)"; exit 1; }
	promtool check rules infra/prometheus/alerts.yml
	promtool test rules infra/prometheus/tests.yml
	promtool check config infra/prometheus/prometheus.yml
	$(BIN)/pytest tests/unit -m infra
	@if docker compose version >/dev/null 2>&1; then \
		echo "docker compose -f infra/compose.yaml config -q"; \
		docker compose -f infra/compose.yaml config -q; \
	else \
		echo "docker compose is not available: infra/compose.yaml not checked"; \
	fi
	@if command -v kubectl >/dev/null 2>&1; then \
		echo "kubectl kustomize infra/k8s"; \
		kubectl kustomize infra/k8s >/dev/null; \
	else \
		echo "kubectl is not available: infra/k8s not checked"; \
	fi

.PHONY: lint
lint: $(STAMP) $(TS_STAMP) ## ruff (lint + format check), mypy --strict, schema drift check (the TypeScript types too), tsc
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/llm-bot schemas --check
	cd $(TS) && npm run --silent check-types && npx tsc -p tsconfig.json --noEmit

.PHONY: format
format: $(STAMP) ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

.PHONY: schemas
schemas: $(STAMP) ## regenerate the JSON Schemas in schemas/ from the pydantic models
	$(BIN)/llm-bot schemas
	@if [ -f $(TS_STAMP) ]; then cd $(TS) && npm run --silent types; else \
		echo "make: run make ts-types too (the TypeScript client's types follow schemas/)"; fi

.PHONY: lock
lock: $(STAMP) ## regenerate the hashed locks from pyproject.toml and the versions pinned in constraints.txt
	$(PIP_COMPILE) --extra dev -o $(LOCK) pyproject.toml
	$(PIP_COMPILE) --extra qdrant -o $(RUNTIME_LOCK) pyproject.toml

.PHONY: audit
audit: $(STAMP) ## pip-audit the locked packages against the PyPI advisory database (needs its network)
	$(BIN)/pip-audit --require-hashes --disable-pip --no-deps -r $(LOCK)

.PHONY: clean
clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build *.egg-info \
		$(TS)/node_modules $(TS)/dist
