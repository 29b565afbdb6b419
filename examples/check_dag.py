"""make test-airflow: load examples/airflow_dag.py with Airflow's DagBag; exit 1 on any import error."""

from __future__ import annotations

import sys
from pathlib import Path

try:  # Airflow 3.1+
    from airflow.dag_processing.dagbag import DagBag
except ImportError:  # earlier releases
    from airflow.models.dagbag import DagBag

bag = DagBag(dag_folder=str(Path(__file__).with_name("airflow_dag.py")))
if bag.import_errors:
    for path, error in bag.import_errors.items():
        print(f"{path}: {error}", file=sys.stderr)
    sys.exit(1)
dag = bag.dags["partition_planner"]  # in memory: get_dag would ask the metadata database
tasks = {t.task_id: t for t in dag.tasks}
assert set(tasks) == {"plan", "report"}, tasks
assert tasks["plan"].retries == 2 and "report" in tasks["plan"].downstream_task_ids
print(f"DAG {dag.dag_id}: tasks {sorted(tasks)}, plan retries {tasks['plan'].retries}, no import errors")
