"""The Airflow example's spark-submit arguments parse with the plan job's own parser (no Airflow needed)."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

from jobs.plan import add_arguments

DAG_FILE = Path(__file__).resolve().parents[2] / "examples" / "airflow_dag.py"


def dag_constant(name: str) -> object:
    for node in ast.parse(DAG_FILE.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{DAG_FILE} defines no {name}")


def rendered(args: list[str]) -> list[str]:
    """The arguments as Airflow renders them for a scheduled run."""
    values = {
        "{{ data_interval_end }}": "2026-11-23T06:00:00+00:00",
        "{{ dag.dag_id }}__{{ run_id }}": "partition_planner__scheduled__2026-11-23T00:00:00+00:00",
    }
    return [values.get(a, a) for a in args]


def test_the_dag_plan_task_arguments_parse_with_the_job_parser():
    import argparse

    args = add_arguments(argparse.ArgumentParser(exit_on_error=False)).parse_args(rendered(dag_constant("PLAN_ARGS")))
    assert args.warehouse == "s3a://platform-lake/partition-planner"
    assert args.as_of == dt.datetime(2026, 11, 23, 6, tzinfo=dt.UTC)
    assert args.run_id == "partition_planner__scheduled__2026-11-23T00:00:00+00:00"
    assert "{{" not in " ".join(rendered(dag_constant("PLAN_ARGS")))
    assert dag_constant("REPORT_COMMAND").startswith("partition-planner report --warehouse ")
