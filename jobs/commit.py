"""Writing a run: ``plans`` and ``moves`` side by side, then the ``plan_runs`` rows that commit it.

Write order is the commit protocol (DESIGN.md): a crash before the last commit leaves rows
no reader counts (they belong to no committed run); the rerun supersedes them.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from assigners import COMMITTED, FAILED
from jobs.history import History, txn_id
from jobs.outcomes import ClusterOutcome
from jobs.spark_planner import coerce_to_spec
from jobs.stages import stage
from jobs.store import Supersede, TableStore
from schemas import MOVES, PLAN_RUNS, PLANS


def write_plan_tables(
    store: TableStore, planned_df: DataFrame, outcomes: list[ClusterOutcome], run_id: str, metadata: dict[str, Any]
) -> None:
    """Append plans and moves for the committed clusters, skipping commits a crashed try already made.

    The two tables are written at the same time (two Spark jobs from two
    threads): no reader counts either before the plan_runs row exists, so
    their mutual order does not matter, and the wall time is one write, not two.
    """
    versions = {o.cluster_id: int(o.plan_version or 0) for o in outcomes if o.status == COMMITTED and not o.done_by}
    jobs = []
    for name, select in (("plans", plans_columns), ("moves", moves_columns)):
        recorded = store.txn_versions(name, [txn_id(run_id, c) for c in versions])
        pending = {c: v for c, v in versions.items() if recorded[txn_id(run_id, c)] != v}
        if pending:
            rows = planned_df.where(F.col("topic").isNotNull() & F.col("cluster_id").isin(sorted(pending)))
            jobs.append((name, select(rows), pending))
    if not jobs:
        return

    def append(name: str, rows: DataFrame, pending: dict[str, int]) -> None:
        with stage(store.spark, f"write_{name}", clusters=len(pending)) as info:
            info["version"] = store.append(
                name,
                rows,
                supersede=Supersede(pending),
                txns={txn_id(run_id, c): v for c, v in pending.items()},
                metadata=metadata,
            )

    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="write") as pool:
        for future in [pool.submit(append, *job) for job in jobs]:
            future.result()  # re-raises a failed write: plan_runs is then not written


def plans_columns(planned_df: DataFrame) -> DataFrame:
    return planned_df.select(PLANS.column_names)


def moves_columns(planned_df: DataFrame) -> DataFrame:
    renamed = {"to_replicas": F.col("replicas"), "to_leader": F.col("leader")}
    return planned_df.where(F.col("kind").isNotNull()).select(
        [renamed.get(c, F.col(c)).alias(c) for c in MOVES.column_names]
    )


def plan_runs_rows(
    outcomes: list[ClusterOutcome], run_id: str, started_at: dt.datetime, finished_at: dt.datetime
) -> pd.DataFrame:
    """One plan_runs row per outcome; ``error`` only on failed rows, everything else in ``notes``."""
    rows = []
    for o in outcomes:
        rows.append(
            {
                "run_id": run_id,
                "cluster_id": o.cluster_id,
                "plan_version": o.plan_version,
                "snapshot_ts": o.snapshot_ts,
                "strategy": o.strategy,
                "status": o.status,
                "error": o.error if o.status == FAILED else None,
                "config_hash": o.config_hash,
                "started_at": started_at,
                "finished_at": finished_at,
                "notes": "\n".join(o.notes) or None,  # one note per line
                **{k: o.metrics.get(k) for k in PLAN_RUNS.metric_columns},
                "config_json": o.config_json,
            }
        )
    return pd.DataFrame(rows, columns=PLAN_RUNS.column_names)


def write_plan_runs(
    spark: SparkSession,
    store: TableStore,
    outcomes: list[ClusterOutcome],
    history: History,
    run_id: str,
    started_at: dt.datetime,
    metadata: dict[str, Any],
) -> None:
    """The commit marker: one row per cluster, except repeats of an already recorded failure."""
    fresh = [
        o
        for o in outcomes
        if not o.done_by and not (o.status == FAILED and history.recorded_failure(o.cluster_id, o.error))
    ]
    if not fresh:
        return
    pdf = coerce_to_spec(plan_runs_rows(fresh, run_id, started_at, dt.datetime.now(dt.UTC)), PLAN_RUNS)
    with stage(spark, "write_plan_runs", rows=len(pdf)) as info:
        info["version"] = store.append(
            "plan_runs", spark.createDataFrame(pdf, PLAN_RUNS.spark_schema()), metadata=metadata
        )
