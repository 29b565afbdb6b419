"""``sql``'s views over the tables, in Spark: committed plans and moves, raw rows, the latest plans.

Readers only ever see committed plan versions: a ``plans`` / ``moves`` row
counts when a ``plan_runs`` row with ``status = 'committed'`` names its run,
cluster and version (DESIGN.md).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.store import TableStore

COMMIT_KEYS = ["cluster_id", "plan_version", "run_id"]


def committed_runs(store: TableStore) -> DataFrame:
    return store.read_or_empty("plan_runs").where(F.col("status") == "committed").select(*COMMIT_KEYS).distinct()


def committed(store: TableStore, name: str) -> DataFrame:
    """Rows of ``plans`` or ``moves`` that belong to committed versions."""
    return store.read_or_empty(name).join(F.broadcast(committed_runs(store)), on=COMMIT_KEYS, how="left_semi")


def register_views(spark: SparkSession, store: TableStore) -> list[str]:
    """Temp views for ad hoc SQL: inputs and plan_runs as stored, plans/moves committed only."""
    names = []
    for name in ("brokers", "partitions", "throughput"):
        if store.exists(name):
            store.read(name).createOrReplaceTempView(name)
            names.append(name)
    store.read_or_empty("plan_runs").createOrReplaceTempView("plan_runs")
    for name in ("plans", "moves"):
        committed(store, name).createOrReplaceTempView(name)
        store.read_or_empty(name).createOrReplaceTempView(f"{name}_raw")
    spark.sql(
        "CREATE OR REPLACE TEMP VIEW plans_latest AS SELECT p.* FROM plans p JOIN "
        "(SELECT cluster_id, max(plan_version) AS plan_version FROM plans GROUP BY cluster_id) l "
        "USING (cluster_id, plan_version)"
    )
    return [*names, "plan_runs", "plans", "moves", "plans_raw", "moves_raw", "plans_latest"]
