"""The plan job's flow: pick snapshots, read inputs, plan per cluster, commit, report.

Each step lives in a room of its own (``inputs``, ``history``, ``spark_planner``,
``commit``, ``outcomes``); this module only orders them. Write order is the commit
protocol (DESIGN.md): ``plans`` and ``moves`` side by side, then the ``plan_runs`` rows
that make the versions visible; a crash before the last commit leaves rows no reader
counts, and the rerun supersedes them and completes the run.
"""

from __future__ import annotations

import datetime as dt
import json
import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from assigners import COMMITTED, FAILED
from jobs.commit import commit_staged, plan_staging, remove_orphans, write_plan_runs, write_plan_tables
from jobs.config import Config
from jobs.history import (
    APP_ID_PREFIX,
    History,
    check_run_id_reuse,
    committed_plans,
    derive_run_id,
    plans_in_force,
    read_history,
)
from jobs.inputs import at_snapshots, pick_snapshots, stacked_inputs, stacked_inputs_from_files
from jobs.outcomes import ClusterOutcome, RunReport, already_done, planned_outcome
from jobs.spark_planner import plan_requests, run_planner
from jobs.stages import UsageError, stage
from jobs.store import FEW_ROWS, DeltaRsStore, TableStore
from schemas import BROKERS, PLAN_INPUT

log = logging.getLogger(__name__)


def build_inputs(
    spark: SparkSession, store: TableStore, snapshots: dict[str, dt.datetime], history: History, few: bool
) -> tuple[DataFrame, DataFrame]:
    """(stacked partition, throughput and previous-plan rows as ``schemas.PLAN_INPUT``, brokers) of the snapshots
    (``few``: they have at most ``FEW_ROWS`` partition rows).

    Where delta-rs keeps the log and the fleet is small, its rows are read as Arrow in the driver and handed
    to Spark whole: the Spark scans cost more than the planning there (20 partitions: 11.0 -> 9.2 s end to
    end). The group a worker gets is the same either way."""
    clusters = list(snapshots)
    if isinstance(store, DeltaRsStore) and few:
        stacked, brokers = stacked_inputs_from_files(store, snapshots, plans_in_force(history, clusters))
        return spark.createDataFrame(stacked, PLAN_INPUT.spark_schema()), spark.createDataFrame(
            brokers, BROKERS.spark_schema()
        )
    brokers_df = store.read("brokers").where(at_snapshots(snapshots))
    plans_df = committed_plans(store, history, clusters)
    moves_df = committed_plans(store, history, clusters, "moves") if plans_df is not None else None
    return stacked_inputs(store, snapshots, plans_df, moves_df), brokers_df


def run_plan(
    spark: SparkSession,
    store: TableStore,
    config: Config,
    *,
    clusters: list[str] | None = None,
    as_of: dt.datetime | None = None,
    run_id: str | None = None,
    strategy: str | None = None,
    dry_run: bool = False,
) -> RunReport:
    """Plan every selected cluster and commit the results (unless ``dry_run``)."""
    started_at = dt.datetime.now(dt.UTC)
    if run_id is not None and not run_id.strip():
        raise UsageError("--run-id is empty: give a non-empty id, or drop the flag to derive one")
    selection = pick_snapshots(store, config, started_at, as_of, clusters)
    snapshots, warnings = selection.snapshots, selection.warnings
    config_hash = config.config_hash(list(snapshots), strategy)
    run_id = run_id or derive_run_id({c: config.cluster_hash(c, strategy) for c in snapshots}, snapshots)
    history = read_history(store, run_id, list(snapshots))
    requests = plan_requests(config, snapshots, history, strategy, refused=selection.refused)
    check_run_id_reuse(run_id, history, snapshots, {c: (r.strategy, r.config_hash) for c, r in requests.items()})
    log.info("run run_id=%s config_hash=%s clusters=%s dry_run=%s", run_id, config_hash, ",".join(snapshots), dry_run)

    done = [already_done(c, run_id, row) for c in snapshots if (row := history.done(c)) is not None]
    todo = {c: ts for c, ts in snapshots.items() if history.done(c) is None}
    if not todo:
        return RunReport(run_id, config_hash, sorted(done, key=lambda o: o.cluster_id), dry_run, warnings)

    few = sum(selection.counts.get(c, 0) for c in todo) <= FEW_ROWS  # inputs read through the driver
    inputs_df, brokers_df = build_inputs(spark, store, todo, history, few)
    # Where delta-rs keeps the log, the workers write the plan rows themselves and the driver commits their
    # files: no second pass over a million rows (cache, two Spark writes); elsewhere Spark writes them.
    staging = None
    if isinstance(store, DeltaRsStore) and not dry_run:
        staging = plan_staging(store, {c: requests[c].plan_version for c in todo}, run_id)
    rows_back = not dry_run and staging is None
    planned_df = run_planner(inputs_df, brokers_df, {c: requests[c] for c in todo}, run_id, staging, rows_back)
    if rows_back:
        planned_df = planned_df.persist()
    with stage(spark, "plan", clusters=len(todo)) as info:
        rows = (
            planned_df.where(F.col("topic").isNull())
            .select("cluster_id", "plan_version", "strategy", "summary_json")
            .collect()
        )
        outcomes = [planned_outcome(row, snapshots, requests) for row in rows]
        staged = {row["cluster_id"]: json.loads(row["summary_json"]).get("staged", {}) for row in rows}
        outcomes += [
            ClusterOutcome(
                c,
                FAILED,
                requests[c].plan_version,
                ts,
                requests[c].strategy,
                error=f"cluster {c}: no rows in table partitions for snapshot {ts.isoformat()}",
                config_hash=requests[c].config_hash,
                config_json=requests[c].config_json,
            )
            for c, ts in todo.items()
            if c not in {o.cluster_id for o in outcomes}
        ]
        outcomes.sort(key=lambda o: o.cluster_id)
        info["committed"] = sum(o.status == COMMITTED for o in outcomes)
        info["failed"] = sum(o.status == FAILED for o in outcomes)
    if not dry_run:
        metadata = {"run_id": run_id, "config_hash": config_hash, "tool": APP_ID_PREFIX}
        if staging is not None and isinstance(store, DeltaRsStore):  # (the one kind of store that stages)
            commit_staged(store, staging, outcomes, staged, run_id, metadata)
        else:
            write_plan_tables(store, planned_df, outcomes, run_id, metadata, few=few)
        outcomes = write_plan_runs(spark, store, outcomes, history, run_id, started_at, metadata)
        remove_orphans(store, outcomes)
    if rows_back:
        planned_df.unpersist()
    return RunReport(run_id, config_hash, sorted(done + outcomes, key=lambda o: o.cluster_id), dry_run, warnings)
