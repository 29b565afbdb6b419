"""Writing a run: ``plans`` and ``moves`` side by side, then the ``plan_runs`` rows that commit it, then the
removal of orphans.

Write order is the commit protocol (DESIGN.md): a crash before the marker leaves rows no reader counts (they
belong to no committed run). The marker claims its versions with Delta's optimistic concurrency: it is
appended only at the ``plan_runs`` version whose committed rows it checked, so two overlapping runs never
commit one version of a cluster twice; the loser's cluster fails cleanly ("rerun"). Once a version is
committed, rows of uncommitted attempts at that version or below can never be committed, and are removed.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from assigners import COMMITTED, FAILED
from jobs.history import History, txn_id
from jobs.outcomes import ClusterOutcome
from jobs.spark_planner import MOVED_FROM, Staging, coerce_to_spec
from jobs.stages import stage
from jobs.store import ABSENT, ConcurrentCommitError, DeltaRsStore, TableStore, new_stage
from jobs.warehouse import Warehouse, orphan_predicate
from schemas import MOVES, PLAN_RUNS, PLANS

log = logging.getLogger(__name__)


def write_plan_tables(
    store: TableStore,
    planned_df: DataFrame,
    outcomes: list[ClusterOutcome],
    run_id: str,
    metadata: dict[str, Any],
    few: bool = False,
) -> None:
    """Append plans and moves for the committed clusters, skipping commits a crashed try already made
    (``few``: a small fleet's rows, see :meth:`TableStore.append`).

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
                txns={txn_id(run_id, c): v for c, v in pending.items()},
                metadata=metadata,
                few=few,
            )

    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="write") as pool:
        for future in [pool.submit(append, *job) for job in jobs]:
            future.result()  # re-raises a failed write: plan_runs is then not written


def plan_staging(store: DeltaRsStore, versions: dict[str, int], run_id: str) -> Staging:
    """Where the workers write the rows of the clusters to plan (``versions``: cluster -> its plan version):
    a fresh stage folder per table, and the clusters whose rows the table lacks (a crashed try may have
    committed one table's)."""
    folders, stages, pending = {}, {}, {}
    for name in ("plans", "moves"):
        recorded = store.txn_versions(name, [txn_id(run_id, c) for c in versions])
        stages[name] = new_stage()
        folders[name] = posixpath.join(store.location(name), stages[name])
        pending[name] = frozenset(c for c, v in versions.items() if recorded[txn_id(run_id, c)] != v)
    return Staging(folders, stages, pending)


def commit_staged(
    store: DeltaRsStore,
    staging: Staging,
    outcomes: list[ClusterOutcome],
    staged: dict[str, dict[str, list[str]]],
    run_id: str,
    metadata: dict[str, Any],
) -> None:
    """Commit the plans and moves files the workers wrote (``staged``: cluster -> table -> files) for the
    committed clusters, one Delta commit per table carrying each cluster's transaction, as
    :func:`write_plan_tables` does with rows."""
    versions = {o.cluster_id: int(o.plan_version or 0) for o in outcomes if o.status == COMMITTED and not o.done_by}
    for name in ("plans", "moves"):
        pending = {c: v for c, v in versions.items() if c in staging.pending[name]}
        if not pending:
            continue
        with stage(store.spark, f"write_{name}", clusters=len(pending)) as info:
            files = sorted(f for c in pending for f in staged.get(c, {}).get(name, []))
            info["files"] = len(files)
            info["version"] = store.commit_staged(
                name, staging.stages[name], files, {txn_id(run_id, c): v for c, v in pending.items()}, metadata
            )


def plans_columns(planned_df: DataFrame) -> DataFrame:
    return planned_df.select(PLANS.column_names)


def moves_columns(planned_df: DataFrame) -> DataFrame:
    return planned_df.where(F.col("kind").isNotNull()).select(
        [F.col(MOVED_FROM.get(c, c)).alias(c) for c in MOVES.column_names]
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


MARKER_ATTEMPTS = 20  # optimistic retries of the marker when other runs commit meanwhile


def write_plan_runs(
    spark: SparkSession,
    store: TableStore,
    outcomes: list[ClusterOutcome],
    history: History,
    run_id: str,
    started_at: dt.datetime,
    metadata: dict[str, Any],
) -> list[ClusterOutcome]:
    """The commit marker: one row per cluster, except repeats of an already recorded failure.

    Returns the outcomes as committed: a cluster whose version another run committed since this run read
    the history is failed instead (its rows are left to the orphan removal).
    """
    for _ in range(MARKER_ATTEMPTS):
        expected = store.version("plan_runs")
        outcomes = [_unless_claimed(o, _committed_markers(store, expected), run_id) for o in outcomes]
        fresh = [
            o
            for o in outcomes
            if not o.done_by and not (o.status == FAILED and history.recorded_failure(o.cluster_id, o.error))
        ]
        if not fresh:
            return outcomes
        pdf = coerce_to_spec(plan_runs_rows(fresh, run_id, started_at, dt.datetime.now(dt.UTC)), PLAN_RUNS)
        try:
            with stage(spark, "write_plan_runs", rows=len(pdf)) as info:
                info["version"] = store.append(
                    "plan_runs",
                    spark.createDataFrame(pdf, PLAN_RUNS.spark_schema()),
                    metadata=metadata,
                    expect_version=ABSENT if expected is None else expected,
                    few=True,  # a row per cluster
                )
            return outcomes
        except ConcurrentCommitError as exc:
            log.info("plan_runs moved on while committing (%s); checking the versions again", exc)
    raise ConcurrentCommitError(f"plan_runs kept moving for {MARKER_ATTEMPTS} attempts; rerun")


def _committed_markers(store: TableStore, version: int | None) -> dict[str, list[tuple[int, str]]]:
    """Per cluster, the (plan_version, run_id) of its committed runs at that plan_runs version."""
    if version is None:
        return {}
    rows = (
        store.read("plan_runs", version)
        .where(F.col("status") == COMMITTED)
        .select("cluster_id", "plan_version", "run_id")
        .collect()
    )
    out: dict[str, list[tuple[int, str]]] = {}
    for r in rows:
        out.setdefault(r["cluster_id"], []).append((int(r["plan_version"]), r["run_id"]))
    return out


def _unless_claimed(outcome: ClusterOutcome, markers: dict[str, list[tuple[int, str]]], run_id: str) -> ClusterOutcome:
    """The outcome, or its clean failure when another run committed this version (or a later one) meanwhile."""
    if outcome.status != COMMITTED or outcome.done_by or outcome.plan_version is None:
        return outcome
    if (outcome.plan_version, run_id) in markers.get(outcome.cluster_id, []):
        return replace(outcome, done_by=run_id)  # the same run id, started twice, got there first
    taken = sorted((v, r) for v, r in markers.get(outcome.cluster_id, []) if v >= outcome.plan_version and r != run_id)
    if not taken:
        return outcome
    version, other = taken[0]
    return replace(
        outcome,
        status=FAILED,
        error=f"cluster {outcome.cluster_id}: version {version} of cluster {outcome.cluster_id} was committed by "
        f"run {other} meanwhile; rerun",
        metrics={},
    )


def remove_orphans(store: TableStore, outcomes: list[ClusterOutcome]) -> None:
    """Delete rows of plans / moves that belong to no committed run, at or below each cluster's latest
    committed version (:meth:`Warehouse.orphans`), for the clusters of this run, so a plain reader that does
    not join plan_runs stops seeing them. A failure is only logged: ``maintain`` or the next run removes them."""
    warehouse = Warehouse(store.warehouse, store.locations)
    clusters = sorted({o.cluster_id for o in outcomes})
    for name in ("plans", "moves"):
        try:
            orphans = warehouse.orphans(name, clusters)
            if orphans:
                store.delete_rows(name, orphan_predicate(orphans))
        except Exception as exc:  # noqa: BLE001 - a concurrent writer may win; readers joining plan_runs never see them
            log.warning("orphan rows of table %s left for the next run: %s", name, exc)
