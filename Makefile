# partition-planner: `make demo` runs the job end to end, `make test` runs the suite.
# Both create .venv and install what they need on a fresh clone.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export TZ := UTC
export SPARK_LOCAL_IP := 127.0.0.1

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WAREHOUSE ?= warehouse
PKG_ZIP := dist/partition_planner.zip

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project (editable) with test extras

demo: $(STAMP) ## write a synthetic fleet into ./warehouse and plan it
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/partition-planner demo --warehouse $(WAREHOUSE)

test: $(STAMP) ## run the whole test suite (unit, Spark, end to end)
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/python -m pytest -q

test-unit: $(STAMP) ## only the pure assigner tests (no Spark)
	$(BIN)/python -m pytest -q tests/unit

FIGURES := bench/results/figures.jsonl
BENCH := PYSPARK_PYTHON=$(abspath $(BIN))/python BENCH_FIGURES=$(abspath $(FIGURES)) $(BIN)/python

bench: $(STAMP) package ## benchmarks, ending in one table of figures and goals: read side on the demo warehouse; small fleets against the Spark floor; the plan job vs bare read+write at 250k and 1M partitions; import of 100k partitions; every strategy at 10k and 1M
	mkdir -p $(dir $(FIGURES)) && rm -f $(FIGURES)
	$(BENCH) bench/bench_read_side.py --warehouse $(WAREHOUSE)
	$(BENCH) bench/bench_floor.py
	$(BENCH) bench/bench_plan.py --partitions 250000 --clusters 10 --repeat 3 --warmup 1
	$(BENCH) bench/bench_plan.py --partitions 1000000 --clusters 100 --repeat 3 --warmup 1 --goal 1.5
	$(BENCH) bench/bench_import.py
	$(BENCH) bench/bench_assigners.py
	$(BIN)/python bench/figures.py $(FIGURES)

bench-readme: bench ## make bench, then write its table of figures into README.md (between the bench-table markers)
	$(BIN)/python bench/figures.py $(FIGURES) --readme README.md

AIRFLOW_VENV := .venv-airflow

test-airflow: ## load examples/airflow_dag.py with Airflow's DagBag (installs Airflow into .venv-airflow; not in make test)
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet "apache-airflow==3.3.2" "apache-airflow-providers-apache-spark==6.3.4"
	AIRFLOW_HOME=$$(mktemp -d) $(AIRFLOW_VENV)/bin/python examples/check_dag.py

lint: $(STAMP) ## ruff + mypy (strict on assigners/, schemas/ and jobs/)
	$(BIN)/ruff check .
	$(BIN)/mypy

format: $(STAMP) ## fix what ruff can fix
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

package: $(STAMP) ## zip of jobs/ assigners/ schemas/ for spark-submit --py-files
	$(BIN)/python -m jobs.package $(PKG_ZIP)

run: $(STAMP) package ## spark-submit the plan job on $(WAREHOUSE) (local master)
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/spark-submit --master 'local[2]' --py-files $(PKG_ZIP) \
		jobs/plan.py --warehouse $(WAREHOUSE)

sql-shell: $(STAMP) ## SQL prompt over the tables and views; one query: make sql-shell Q="SELECT * FROM plan_runs"
	PYSPARK_PYTHON=$(abspath $(BIN))/python $(BIN)/partition-planner sql --warehouse $(WAREHOUSE) $(if $(Q),"$(Q)")

clean: ## remove the venv, the demo warehouse and build output
	rm -rf $(VENV) $(AIRFLOW_VENV) $(WAREHOUSE) dist build .pytest_cache .hypothesis .mypy_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

.PHONY: help install demo test test-unit test-airflow bench bench-readme lint format package run sql-shell clean
