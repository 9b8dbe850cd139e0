# Targets the README documents: `make test` (and `make demo` once the end-to-end issue lands).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := .make
SYSTEM_PACKAGES := unixodbc-dev tdsodbc docker-compose

.PHONY: test lint system-deps venv clean

$(STAMP):
	mkdir -p $(STAMP)

# System packages: ODBC driver manager + FreeTDS ODBC driver, and a Java runtime for Spark.
system-deps: | $(STAMP)
	@missing=""; \
	for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = "0" ]; then \
			echo "Installing system packages:$$missing"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
		else \
			echo "Missing system packages:$$missing"; \
			echo "Run: sudo apt-get update && sudo apt-get install -y$$missing"; \
			exit 1; \
		fi; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall only when the dependency declaration changes.
$(STAMP)/installed: pyproject.toml $(BIN)/python | $(STAMP)
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: system-deps $(STAMP)/installed

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest

clean:
	rm -rf $(VENV) $(STAMP) .airflow-test-home .pytest_cache .ruff_cache

# The pipeline end to end on the SQL Server CDC simulator: a few minutely DAG runs and a
# source-versus-target check per table (demo/run_demo.py; everything it writes is in .demo/).
.PHONY: demo
demo: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python demo/run_demo.py
