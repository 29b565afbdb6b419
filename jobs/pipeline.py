"""The plan job's stages: pick snapshots, build inputs, plan per cluster, write.

Write order is the commit protocol (DESIGN.md): ``plans`` and ``moves``
(side by side), then the ``plan_runs`` row that makes the version visible. A crash before the
last commit leaves rows no reader counts (they belong to no committed run);
the rerun supersedes them and completes the run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from assigners import COMMITTED, FAILED, SKIPPED, Constraints, PlanRequest, plan_cluster
from jobs.config import Config
from jobs.session import describe
from jobs.store import Supersede, TableStore
from schemas import MOVES, PLAN_INPUT, PLAN_RUNS, PLANNED, PLANS, TableSpec

log = logging.getLogger(__name__)

APP_ID_PREFIX = "partition-planner"


class UsageError(ValueError):
    """Bad arguments (unknown cluster, malformed --as-of): exit code 2."""


@dataclass
class ClusterOutcome:
    cluster_id: str
    status: str
    plan_version: int | None
    snapshot_ts: dt.datetime | None
    strategy: str
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    already_done: bool = False

    def summary_line(self) -> str:
        m = self.metrics
        head = f"{self.cluster_id:<14} {self.status:<9} v{self.plan_version or '-':<3} {self.strategy:<12}"
        if self.already_done:
            return f"{head} already {self.status} by this run id: nothing written"
        if self.status == FAILED:
            return f"{head} {self.error}"
        if not m:
            return f"{head} {'; '.join(self.notes)}"
        return (
            f"{head} partitions={m['partitions']} moves={m['moves']} (min {m['min_moves']}) "
            f"leader_moves={m['leader_moves']} bytes={_gib(m['bytes_to_move'])} "
            f"max_load/bound {m['max_load_before'] / (m['load_lower_bound'] or 1):.2f}->"
            f"{m['max_load_after'] / (m['load_lower_bound'] or 1):.2f} "
            f"replica_spread {m['replica_spread_before']}->{m['replica_spread_after']} "
            f"leader_spread {m['leader_spread_before']}->{m['leader_spread_after']} "
            f"rack_violations {m['rack_violations_before']}->{m['rack_violations_after']} "
            f"balance_score {m['balance_score_before']:.0f}->{m['balance_score_after']:.0f}"
        )


@dataclass
class RunReport:
    run_id: str
    config_hash: str
    outcomes: list[ClusterOutcome]
    dry_run: bool = False

    @property
    def exit_code(self) -> int:
        return 1 if any(o.status == FAILED for o in self.outcomes) else 0


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f}GiB"


@contextmanager
def stage(spark: SparkSession, name: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """Log one ``stage=... seconds=...`` line per job stage, with counts the body adds."""
    describe(spark, name)
    start = time.perf_counter()
    info: dict[str, Any] = dict(fields)
    yield info
    info["seconds"] = f"{time.perf_counter() - start:.2f}"
    log.info("stage=%s %s", name, " ".join(f"{k}={v}" for k, v in info.items()))


# -- snapshots and run identity ------------------------------------------------


def select_snapshots(
    store: TableStore, as_of: dt.datetime | None, clusters: list[str] | None
) -> dict[str, dt.datetime]:
    """Newest snapshot at or before ``as_of`` of each cluster (from the partitions table)."""
    parts = store.read("partitions")
    if as_of is not None:
        parts = parts.where(F.col("snapshot_ts") <= F.lit(as_of))
    if clusters:
        parts = parts.where(F.col("cluster_id").isin(clusters))
    # as microseconds: collect() would hand back naive datetimes in the machine's local zone
    rows = parts.groupBy("cluster_id").agg(F.unix_micros(F.max("snapshot_ts")).alias("micros")).collect()
    found = {r["cluster_id"]: _EPOCH + dt.timedelta(microseconds=r["micros"]) for r in rows}
    missing = sorted(set(clusters or []) - set(found))
    if missing:
        bound = f" at or before {as_of.isoformat()}" if as_of else ""
        raise UsageError(f"no snapshot{bound} in table partitions for cluster(s) {', '.join(missing)}")
    return dict(sorted(found.items()))


def derive_run_id(config_hash: str, snapshots: dict[str, dt.datetime]) -> str:
    """Same snapshots and config, same run id: a plain rerun is recognised as done."""
    blob = config_hash + "|" + "|".join(f"{c}@{ts.isoformat()}" for c, ts in sorted(snapshots.items()))
    return "run-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class History:
    """What plan_runs says about the clusters of this run."""

    last_committed: dict[str, tuple[int, str, int]]  # cluster -> (version, run_id, partitions)
    done: dict[str, str]  # cluster -> status, for this run id (committed / skipped)
    failed_errors: dict[str, set[str]]  # cluster -> errors already recorded for this run id


def read_history(store: TableStore, run_id: str, clusters: list[str]) -> History:
    runs = (
        store.read_or_empty("plan_runs")
        .where(F.col("cluster_id").isin(clusters))
        .select("run_id", "cluster_id", "plan_version", "status", "error", "partitions")
        .toPandas()
    )
    committed = runs[runs["status"] == COMMITTED].sort_values("plan_version")
    last = {
        r.cluster_id: (int(r.plan_version), r.run_id, int(r.partitions or 0)) for r in committed.itertuples(index=False)
    }
    mine = runs[runs["run_id"] == run_id]
    done = {r.cluster_id: r.status for r in mine.itertuples(index=False) if r.status in (COMMITTED, SKIPPED)}
    failed: dict[str, set[str]] = {}
    for r in mine[mine["status"] == FAILED].itertuples(index=False):
        failed.setdefault(r.cluster_id, set()).add(r.error)
    return History(last, done, failed)


# -- inputs ---------------------------------------------------------------------


def build_inputs(
    spark: SparkSession, store: TableStore, snapshots: dict[str, dt.datetime], history: History
) -> tuple[DataFrame, DataFrame]:
    """(stacked partition, throughput and baseline rows as ``schemas.PLAN_INPUT``, brokers) of the snapshots."""
    brokers_df = store.read("brokers").where(at_snapshots(snapshots))
    return stacked_inputs(store, snapshots, committed_plans(store, history, list(snapshots))), brokers_df


def at_snapshots(snapshots: dict[str, dt.datetime], op: str = "=") -> str:
    """SQL filter for the rows of each cluster's snapshot (``op`` ``<=``: at or before it).

    A filter, not a join with a frame of snapshots: no broadcast job, and the
    ``cluster_id IN`` and time bounds reach the parquet reader. One map
    lookup, so a fleet of any size stays one flat expression.
    """
    micros = {c: _micros(t) for c, t in snapshots.items()}
    bounds = f"snapshot_ts <= timestamp_micros({max(micros.values())})"
    if op == "=":
        bounds += f" AND snapshot_ts >= timestamp_micros({min(micros.values())})"
    per_cluster = _sql_lookup({c: f"timestamp_micros({m})" for c, m in micros.items()})
    return f"cluster_id IN ({', '.join(map(_sql_string, snapshots))}) AND {bounds} AND snapshot_ts {op} {per_cluster}"


def _sql_lookup(values: dict[str, str]) -> str:
    """SQL for "this row's cluster's value" out of ``values`` (cluster -> SQL literal)."""
    pairs = ", ".join(f"{_sql_string(c)}, {v}" for c, v in values.items())
    return f"try_element_at(map({pairs}), cluster_id)"


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _micros(ts: dt.datetime) -> int:
    """Microseconds since the epoch; a naive time is UTC (the session's zone)."""
    aware = ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)
    return (aware - _EPOCH) // dt.timedelta(microseconds=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def stacked_inputs(
    store: TableStore, snapshots: dict[str, dt.datetime], plans_df: DataFrame | None = None
) -> DataFrame:
    """The snapshot's partitions, the rates measured at or before it and the baseline plan, in one frame."""
    partitions = store.read("partitions").where(at_snapshots(snapshots))
    rates = store.read("throughput").where(at_snapshots(snapshots, "<="))
    stacked = _as_plan_input(
        partitions, "partition", replicas="replicas", leader="leader", size_bytes="size_bytes"
    ).unionByName(
        _as_plan_input(
            rates, "throughput", measured_ts="snapshot_ts", bytes_in="bytes_in_per_sec", bytes_out="bytes_out_per_sec"
        )
    )
    if plans_df is not None:
        stacked = stacked.unionByName(
            _as_plan_input(plans_df, "baseline", replicas="replicas", epoch="epoch", cores="coalesce(cores, array())")
        )
    return stacked


def _as_plan_input(df: DataFrame, source: str, **columns: str) -> DataFrame:
    """``df``'s rows as PLAN_INPUT rows of one source: the keys, ``columns`` (SQL), null elsewhere.

    Arrays a source lacks are empty, not null: Spark's Arrow writer spends
    ~7 us on each null array (0.7 s per 100k rows, more than the scan).
    """
    picked = {"cluster_id": "cluster_id", "source": _sql_string(source), "topic": "topic", "partition": "`partition`"}
    picked.update(columns)
    absent = {"array<int>": "array()"}
    return df.selectExpr(
        *[
            f"CAST({picked.get(c.name, absent.get(c.type, 'NULL'))} AS {c.type}) AS `{c.name}`"
            for c in PLAN_INPUT.columns
        ]
    )


def committed_plans(store: TableStore, history: History, clusters: list[str]) -> DataFrame | None:
    """Rows of the last committed plan version (the baseline) of each of ``clusters``; None if none has one."""
    last = {c: (v, r) for c, (v, r, _) in sorted(history.last_committed.items()) if c in clusters}
    if not last:
        return None
    versions = _sql_lookup({c: f"{v}L" for c, (v, _) in last.items()})
    runs = _sql_lookup({c: _sql_string(r) for c, (_, r) in last.items()})
    return store.read("plans").where(
        f"cluster_id IN ({', '.join(map(_sql_string, last))}) AND plan_version = {versions} AND run_id = {runs}"
    )


_KEYS = ["topic", "partition"]


def assemble_partitions(inputs: pd.DataFrame) -> pd.DataFrame:
    """One cluster's partition frame for the planner from its stacked PLAN_INPUT rows.

    The snapshot's partition rows (duplicates kept, for validation to name),
    each with its newest rates measured at or before the snapshot
    (``has_throughput`` False and null rates when there are none) and the
    baseline plan's ``baseline_replicas`` / ``baseline_epoch`` / ``baseline_cores`` (null when the
    plan lacks it).
    """
    source = inputs["source"]
    partitions = inputs.loc[source == "partition", [*_KEYS, "replicas", "leader", "size_bytes"]]
    # ties on the timestamp are broken by value, so the pick never depends on row order
    rates = (
        inputs.loc[source == "throughput", [*_KEYS, "measured_ts", "bytes_in", "bytes_out"]]
        .sort_values([*_KEYS, "measured_ts", "bytes_in", "bytes_out"], kind="stable")
        .drop_duplicates(_KEYS, keep="last")
        .drop(columns="measured_ts")
    )
    baseline = inputs.loc[source == "baseline", [*_KEYS, "replicas", "epoch", "cores"]].rename(
        columns={"replicas": "baseline_replicas", "epoch": "baseline_epoch", "cores": "baseline_cores"}
    )
    out = partitions.merge(rates, on=_KEYS, how="left").merge(baseline, on=_KEYS, how="left")
    out["has_throughput"] = out["bytes_in"].notna()
    planned = out["baseline_replicas"].astype(object)
    out["baseline_replicas"] = planned.where(planned.notna(), None)  # merge fills NaN; the planner wants None
    return out.reset_index(drop=True)


# -- planning in Spark ------------------------------------------------------------


def make_cluster_planner(requests: dict[str, dict[str, Any]], run_id: str) -> Callable[..., pd.DataFrame]:
    """The cogrouped applyInPandas function; closes over plain values only (STYLE rule 3)."""
    columns = PLANNED.column_names

    def plan_group(key: tuple[Any, ...], inputs_pdf: pd.DataFrame, brokers_pdf: pd.DataFrame) -> pd.DataFrame:
        cluster_id = str(key[0])
        if cluster_id not in requests:  # only rows of a cluster this run does not plan: nothing to say
            return coerce_to_spec(pd.DataFrame(columns=columns), PLANNED)
        spec = requests[cluster_id]
        request = PlanRequest(
            cluster_id=cluster_id,
            strategy=spec["strategy"],
            constraints=Constraints.from_dict(spec["constraints"]),
            seed=spec["seed"],
            has_previous_plan=spec["has_previous_plan"],
            previous_partitions=spec["previous_partitions"],
            wave_broker_limit=spec["wave_broker_limit"],
        )
        try:
            result = plan_cluster(brokers_pdf, assemble_partitions(inputs_pdf), request)
            summary = {
                "status": result.status,
                "error": result.error,
                "notes": result.notes,
                "metrics": result.metrics.to_dict() if result.metrics else {},
            }
            planned = result.planned if result.status == COMMITTED else result.planned.iloc[0:0]
        except Exception as exc:  # noqa: BLE001 - one cluster's bug must not sink the fleet
            summary = {
                "status": FAILED,
                "error": f"cluster {cluster_id}: internal error: {exc!r}",
                "notes": [],
                "metrics": {},
            }
            planned = pd.DataFrame(columns=columns)
        planned = planned.assign(
            cluster_id=cluster_id,
            plan_version=spec["plan_version"],
            run_id=run_id,
            snapshot_ts=pd.Timestamp(spec["snapshot_ts"]),
            strategy=request.strategy,
            summary_json=None,
        )
        outcome = pd.DataFrame(
            [
                {
                    "cluster_id": cluster_id,
                    "plan_version": spec["plan_version"],
                    "run_id": run_id,
                    "strategy": request.strategy,
                    "snapshot_ts": pd.Timestamp(spec["snapshot_ts"]),
                    "summary_json": json.dumps(summary, sort_keys=True),
                }
            ]
        )
        return coerce_to_spec(pd.concat([planned, outcome], ignore_index=True), PLANNED)

    return plan_group


_PANDAS_DTYPES = {"int": "Int32", "long": "Int64", "double": "float64"}


def coerce_to_spec(pdf: pd.DataFrame, spec: TableSpec) -> pd.DataFrame:
    """Spec column order, and nullable integer dtypes so missing values reach Arrow as nulls, not NaN."""
    out = pdf.reindex(columns=spec.column_names)
    for column in spec.columns:
        if column.type in _PANDAS_DTYPES:
            out[column.name] = out[column.name].astype(_PANDAS_DTYPES[column.type])
        elif column.type in ("array<int>", "string"):  # concat leaves NaN where a value is missing
            values = out[column.name].astype(object)
            out[column.name] = values.where(values.notna(), None)
    return out


def plan_requests(
    config: Config, snapshots: dict[str, dt.datetime], history: History, strategy: str | None
) -> dict[str, dict[str, Any]]:
    out = {}
    for cluster_id, snapshot_ts in snapshots.items():
        settings = config.for_cluster(cluster_id, strategy)
        last_version, _, last_partitions = history.last_committed.get(cluster_id, (0, "", 0))
        out[cluster_id] = {
            "strategy": settings.strategy,
            "constraints": settings.constraints.to_dict(),
            "seed": config.seed,
            "wave_broker_limit": config.wave_broker_limit,
            "has_previous_plan": last_version > 0,
            "previous_partitions": last_partitions,
            "plan_version": last_version + 1,
            "snapshot_ts": snapshot_ts.isoformat(),
        }
    return out


def run_planner(
    inputs_df: DataFrame, brokers_df: DataFrame, requests: dict[str, dict[str, Any]], run_id: str
) -> DataFrame:
    return (
        inputs_df.groupBy("cluster_id")
        .cogroup(brokers_df.groupBy("cluster_id"))
        .applyInPandas(make_cluster_planner(requests, run_id), schema=PLANNED.spark_schema())
    )


# -- writing ----------------------------------------------------------------------


def txn_id(run_id: str, cluster_id: str) -> str:
    return f"{APP_ID_PREFIX}/{run_id}/{cluster_id}"


def write_plan_tables(
    store: TableStore, planned_df: DataFrame, outcomes: list[ClusterOutcome], run_id: str, metadata: dict[str, Any]
) -> None:
    """Append plans and moves for the committed clusters, skipping commits a crashed try already made.

    The two tables are written at the same time (two Spark jobs from two
    threads): no reader counts either before the plan_runs row exists, so
    their mutual order does not matter, and the wall time is one write, not two.
    """
    versions = {
        o.cluster_id: int(o.plan_version or 0) for o in outcomes if o.status == COMMITTED and not o.already_done
    }
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
    outcomes: list[ClusterOutcome], run_id: str, config_hash: str, started_at: dt.datetime, finished_at: dt.datetime
) -> pd.DataFrame:
    rows = []
    for o in outcomes:
        m = o.metrics
        rows.append(
            {
                "run_id": run_id,
                "cluster_id": o.cluster_id,
                "plan_version": o.plan_version,
                "snapshot_ts": o.snapshot_ts,
                "strategy": o.strategy,
                "status": o.status,
                "error": o.error if o.status == FAILED else ("; ".join(o.notes) or None),
                "config_hash": config_hash,
                "started_at": started_at,
                "finished_at": finished_at,
                "notes": "; ".join(o.notes) or None,
                **{
                    k: m.get(k)
                    for k in (
                        "partitions",
                        "replicas",
                        "moves",
                        "leader_moves",
                        "bytes_to_move",
                        "max_load_before",
                        "max_load_after",
                        "load_lower_bound",
                        "replica_spread_before",
                        "replica_spread_after",
                        "rack_violations_before",
                        "rack_violations_after",
                        "min_moves",
                        "leader_spread_before",
                        "leader_spread_after",
                        "balance_score_before",
                        "balance_score_after",
                        "affinity_hints_unmet",
                        "moves_deferred",
                    )
                },
            }
        )
    return pd.DataFrame(rows, columns=PLAN_RUNS.column_names)


def write_plan_runs(
    spark: SparkSession,
    store: TableStore,
    outcomes: list[ClusterOutcome],
    history: History,
    run_id: str,
    config_hash: str,
    started_at: dt.datetime,
    metadata: dict[str, Any],
) -> None:
    """The commit marker: one row per cluster, except repeats of an already recorded failure."""
    fresh = [
        o
        for o in outcomes
        if not o.already_done and not (o.status == FAILED and o.error in history.failed_errors.get(o.cluster_id, set()))
    ]
    if not fresh:
        return
    pdf = coerce_to_spec(plan_runs_rows(fresh, run_id, config_hash, started_at, dt.datetime.now(dt.UTC)), PLAN_RUNS)
    with stage(spark, "write_plan_runs", rows=len(pdf)) as info:
        info["version"] = store.append(
            "plan_runs", spark.createDataFrame(pdf, PLAN_RUNS.spark_schema()), metadata=metadata
        )


# -- the job ------------------------------------------------------------------------


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
    with stage(spark, "select_snapshots") as info:
        snapshots = select_snapshots(store, as_of, clusters)
        info["clusters"] = len(snapshots)
    config_hash = config.config_hash(list(snapshots), strategy)
    run_id = run_id or derive_run_id(config_hash, snapshots)
    history = read_history(store, run_id, list(snapshots))
    log.info("run run_id=%s config_hash=%s clusters=%s dry_run=%s", run_id, config_hash, ",".join(snapshots), dry_run)

    requests = plan_requests(config, snapshots, history, strategy)
    done = [
        ClusterOutcome(
            c, s, history.last_committed.get(c, (None,))[0], snapshots[c], requests[c]["strategy"], already_done=True
        )
        for c, s in history.done.items()
    ]
    todo = {c: ts for c, ts in snapshots.items() if c not in history.done}
    if not todo:
        return RunReport(run_id, config_hash, sorted(done, key=lambda o: o.cluster_id), dry_run)

    inputs_df, brokers_df = build_inputs(spark, store, todo, history)
    planned_df = run_planner(inputs_df, brokers_df, {c: requests[c] for c in todo}, run_id).persist()
    with stage(spark, "plan", clusters=len(todo)) as info:
        outcomes = [
            _outcome(row, snapshots)
            for row in planned_df.where(F.col("topic").isNull())
            .select("cluster_id", "plan_version", "strategy", "summary_json")
            .collect()
        ]
        outcomes += [
            ClusterOutcome(
                c,
                FAILED,
                requests[c]["plan_version"],
                ts,
                requests[c]["strategy"],
                error=f"cluster {c}: no rows in table partitions for snapshot {ts.isoformat()}",
            )
            for c, ts in todo.items()
            if c not in {o.cluster_id for o in outcomes}
        ]
        outcomes.sort(key=lambda o: o.cluster_id)
        info["committed"] = sum(o.status == COMMITTED for o in outcomes)
        info["failed"] = sum(o.status == FAILED for o in outcomes)
    if not dry_run:
        metadata = {"run_id": run_id, "config_hash": config_hash, "tool": APP_ID_PREFIX}
        write_plan_tables(store, planned_df, outcomes, run_id, metadata)
        write_plan_runs(spark, store, outcomes, history, run_id, config_hash, started_at, metadata)
    planned_df.unpersist()
    return RunReport(run_id, config_hash, sorted(done + outcomes, key=lambda o: o.cluster_id), dry_run)


def _outcome(row: Any, snapshots: dict[str, dt.datetime]) -> ClusterOutcome:
    summary = json.loads(row["summary_json"])
    status = summary["status"]
    version = int(row["plan_version"])
    return ClusterOutcome(
        cluster_id=row["cluster_id"],
        status=status,
        plan_version=version if status != SKIPPED else (version - 1 or None),
        snapshot_ts=snapshots[row["cluster_id"]],
        strategy=row["strategy"],
        error=summary["error"],
        metrics=summary["metrics"],
        notes=summary["notes"],
    )
