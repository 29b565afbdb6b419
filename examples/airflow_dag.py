"""Airflow: plan the fleet every six hours with spark-submit, then write the reports.

Retries are safe: the run id is the DAG run's, so a retried task that finds its clusters committed writes
nothing and exits 0, and a retry overlapping a manual run cannot share a version with it (the commit claims
versions with Delta's optimistic concurrency). ``--as-of`` pins the snapshot to the data interval, so a
backfill plans from the snapshots of its own time.

``make test`` parses ``PLAN_ARGS`` with the job's own argument parser; ``make test-airflow`` installs
Airflow and its Spark provider in a separate virtualenv and loads this file with ``DagBag``.
"""

from __future__ import annotations

import datetime as dt

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

# spark-submit application arguments (Jinja-templated by Airflow); a literal list, so tests can read it
PLAN_ARGS = [
    "--warehouse",
    "s3a://platform-lake/partition-planner",
    "--config",
    "conf/production.toml",
    "--as-of",
    "{{ data_interval_end }}",
    "--run-id",
    "{{ dag.dag_id }}__{{ run_id }}",
    "--log-level",
    "WARNING",
]
REPORT_COMMAND = (
    "partition-planner report --warehouse s3a://platform-lake/partition-planner --out /srv/reports/{{ ds }}"
)

with DAG(
    dag_id="partition_planner",
    schedule="0 */6 * * *",
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": dt.timedelta(minutes=10)},
    tags=["kafka", "partition-planner"],
) as dag:
    plan = SparkSubmitOperator(
        task_id="plan",
        application="jobs/plan.py",
        py_files="dist/partition_planner.zip",  # make package
        packages="io.delta:delta-spark_2.13:4.4.1",
        conf={"spark.sql.session.timeZone": "UTC"},
        application_args=PLAN_ARGS,
        conn_id="spark_default",
    )
    report = BashOperator(task_id="report", bash_command=REPORT_COMMAND)
    plan >> report
