"""What earlier runs left: run ids, the committed plan versions, the plan in force, app transaction ids.

A run id names (clusters, snapshots, per-cluster strategy and effective config), so a
rerun is a no-op and reusing an id for another run is an error (DESIGN.md, run identity).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import cast

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from assigners import COMMITTED, FAILED, SKIPPED
from jobs.inputs import epoch_micros, from_micros, sql_lookup, sql_string
from jobs.stages import UsageError
from jobs.store import DeltaRsStore, TableStore

APP_ID_PREFIX = "partition-planner"


def txn_id(run_id: str, cluster_id: str) -> str:
    return f"{APP_ID_PREFIX}/{run_id}/{cluster_id}"


def derive_run_id(cluster_hashes: dict[str, str], snapshots: dict[str, dt.datetime]) -> str:
    """Same clusters, snapshots and effective config (strategy included): same run id, so a rerun is a no-op.

    Anything that can change a plan changes the id.
    """
    blob = "|".join(f"{c}={cluster_hashes[c]}@{epoch_micros(ts)}" for c, ts in sorted(snapshots.items()))
    return "run-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RecordedRun:
    """What plan_runs holds of one (run id, cluster): the identity a reused run id must match."""

    status: str
    plan_version: int | None
    strategy: str
    config_hash: str | None
    snapshot_ts: dt.datetime | None
    error: str | None


@dataclass(frozen=True)
class History:
    """What plan_runs says about the clusters of this run, and about this run id."""

    last_committed: dict[str, tuple[int, str, int]]  # cluster -> (version, run_id, partitions)
    this_run: dict[str, list[RecordedRun]]  # cluster -> rows already written under this run id

    def done(self, cluster_id: str) -> RecordedRun | None:
        """The committed or skipped row this run id already wrote for the cluster."""
        return next((r for r in self.this_run.get(cluster_id, []) if r.status in (COMMITTED, SKIPPED)), None)

    def recorded_failure(self, cluster_id: str, error: str | None) -> bool:
        return any(r.status == FAILED and r.error == error for r in self.this_run.get(cluster_id, []))


HISTORY_COLUMNS = ["run_id", "cluster_id", "plan_version", "status", "error", "partitions", "strategy", "config_hash"]


def read_history(store: TableStore, run_id: str, clusters: list[str]) -> History:
    """This run's recorded rows and each cluster's last committed version, from ``plan_runs``."""
    if isinstance(store, DeltaRsStore):
        runs = _runs_from_files(store, run_id, clusters)
    else:
        runs = _runs_in_spark(store, run_id, clusters)
    return _history_of(runs, run_id, clusters)


def _runs_from_files(store: DeltaRsStore, run_id: str, clusters: list[str]) -> pd.DataFrame:
    """The ``plan_runs`` rows :func:`read_history` reads, with delta-rs where it keeps the Delta log (a Spark job
    cost 2.7 s of the demo's plan, mostly on a table of a few rows)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if not store.exists("plan_runs"):
        return pd.DataFrame(columns=[*HISTORY_COLUMNS, "snapshot_micros"])
    where = ds.field("cluster_id").isin(clusters) | (ds.field("run_id") == run_id)
    rows = store.scan("plan_runs", [*HISTORY_COLUMNS, "snapshot_ts"], where)
    micros = pc.cast(rows["snapshot_ts"], "int64")
    return rows.drop_columns("snapshot_ts").append_column("snapshot_micros", micros).to_pandas()


def _runs_in_spark(store: TableStore, run_id: str, clusters: list[str]) -> pd.DataFrame:
    """The ``plan_runs`` rows :func:`read_history` reads, as a Spark job (Delta's JVM backend)."""
    return cast(
        pd.DataFrame,
        store.read_or_empty("plan_runs")
        .where(F.col("cluster_id").isin(clusters) | (F.col("run_id") == run_id))
        .select(
            *HISTORY_COLUMNS,
            F.unix_micros("snapshot_ts").alias("snapshot_micros"),
        )
        .toPandas(),
    )


def _history_of(runs: pd.DataFrame, run_id: str, clusters: list[str]) -> History:
    committed = runs[(runs["status"] == COMMITTED) & runs["cluster_id"].isin(clusters)].sort_values("plan_version")
    last = {
        r.cluster_id: (int(r.plan_version), r.run_id, int(r.partitions or 0)) for r in committed.itertuples(index=False)
    }
    this_run: dict[str, list[RecordedRun]] = {}
    for r in runs[runs["run_id"] == run_id].itertuples(index=False):
        version = None if pd.isna(r.plan_version) else int(r.plan_version)
        micros = None if pd.isna(r.snapshot_micros) else int(r.snapshot_micros)
        row = RecordedRun(r.status, version, r.strategy, r.config_hash, from_micros(micros), r.error)
        this_run.setdefault(r.cluster_id, []).append(row)
    return History(last, this_run)


def check_run_id_reuse(
    run_id: str, history: History, snapshots: dict[str, dt.datetime], settings: dict[str, tuple[str, str]]
) -> None:
    """A run id names one (clusters, snapshots, strategies, config): reusing it for anything else is exit 2.

    ``settings``: cluster -> (strategy, config hash) of this run.
    """
    if not history.this_run:
        return
    differences = []
    before, now = sorted(history.this_run), sorted(snapshots)
    if before != now:
        differences.append(f"clusters {before} then, {now} now")
    for c in sorted(set(before) & set(now)):
        recorded = history.this_run[c][0]
        strategy, config_hash = settings[c]
        if recorded.strategy != strategy:
            differences.append(f"cluster {c}: strategy {recorded.strategy} then, {strategy} now")
        elif recorded.config_hash != config_hash:
            differences.append(f"cluster {c}: config {recorded.config_hash} then, {config_hash} now")
        if recorded.snapshot_ts is not None and recorded.snapshot_ts != snapshots[c]:
            differences.append(
                f"cluster {c}: snapshot {recorded.snapshot_ts.isoformat()} then, {snapshots[c].isoformat()} now"
            )
    if differences:
        raise UsageError(
            f"run id {run_id!r} was used for a different run ({'; '.join(differences)}); "
            "give this run its own --run-id, or drop --run-id to derive one"
        )


def plans_in_force(history: History, clusters: list[str]) -> dict[str, tuple[int, str]]:
    """Per cluster of ``clusters`` with a committed plan: the (plan_version, run_id) of its last one."""
    return {c: (v, r) for c, (v, r, _) in sorted(history.last_committed.items()) if c in clusters}


def committed_plans(store: TableStore, history: History, clusters: list[str], name: str = "plans") -> DataFrame | None:
    """Rows of the last committed plan version (the plan in force) of each of ``clusters`` in ``plans`` (or
    ``moves``: where each changed partition started); None if none has one."""
    last = plans_in_force(history, clusters)
    if not last:
        return None
    versions = sql_lookup({c: f"{v}L" for c, (v, _) in last.items()})
    runs = sql_lookup({c: sql_string(r) for c, (_, r) in last.items()})
    return store.read(name).where(
        f"cluster_id IN ({', '.join(map(sql_string, last))}) AND plan_version = {versions} AND run_id = {runs}"
    )
