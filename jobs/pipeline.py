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
    """Bad arguments (unknown cluster, malformed --as-of, a reused run id): exit code 2."""


class NoSnapshotError(LookupError):
    """Nothing to plan: no snapshot at or before ``--as-of`` (exit code 1, the input is not there yet)."""


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
    warnings: list[str] = field(default_factory=list)
    config_hash: str | None = None
    done_by: str | None = None  # the run id that already wrote this outcome: nothing new is written

    def summary_line(self, dry_run: bool = False) -> str:
        """One line per cluster: what happened, from which snapshot, what it costs, before -> after."""
        status = "dry-run" if dry_run and self.status == COMMITTED and not self.done_by else self.status
        version = "v-" if self.plan_version is None else f"v{self.plan_version}"
        when = _utc(self.snapshot_ts) if self.snapshot_ts else "-"
        head = f"{self.cluster_id:<14} {status:<9} {version:<4} {when}  {self.strategy:<15}"
        if self.done_by:
            return f"{head} already {self.status} by run {self.done_by}: nothing written"
        if self.status == FAILED:
            return f"{head} {self.error}"
        if self.status == SKIPPED or not self.metrics:
            return f"{head} {'; '.join(self.notes)}"
        return f"{head} {_costs(self.metrics)} | {_figures(self.metrics)}"


def _costs(m: dict[str, Any]) -> str:
    """Replica moves, partitions changed, data, waves; the move lower bound where it applies; the budget."""
    text = (
        f"moves {m['moves']:,} replicas in {m['partitions_moved']:,} partitions "
        f"({m['leader_moves']:,} leader changes), {_gib(m['bytes_to_move'])}, {m['waves']} waves"
    )
    if m.get("counts_balanced_after"):  # min_moves bounds count-balanced plans only
        text += f", min {m['min_moves']:,} for a count-balanced plan"
    if m.get("moves_deferred"):
        text += f", {m['moves_deferred']:,} moves deferred by the budget"
    return text


def _figures(m: dict[str, Any]) -> str:
    bound = m["load_lower_bound"] or 1
    pairs = [
        ("max_load/bound", f"{m['max_load_before'] / bound:.2f}", f"{m['max_load_after'] / bound:.2f}"),
        ("replica_spread", m["replica_spread_before"], m["replica_spread_after"]),
        ("leader_spread", m["leader_spread_before"], m["leader_spread_after"]),
        ("rack_violations", m["rack_violations_before"], m["rack_violations_after"]),
        ("balance_score", f"{m['balance_score_before']:.0f}", f"{m['balance_score_after']:.0f}"),
    ]
    return " ".join(f"{name} {before}->{after}" for name, before, after in pairs)


def _utc(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")


@dataclass
class RunReport:
    run_id: str
    config_hash: str
    outcomes: list[ClusterOutcome]
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # run-wide (config sections naming unknown clusters)

    @property
    def exit_code(self) -> int:
        return 1 if any(o.status == FAILED for o in self.outcomes) else 0


def _gib(n: int) -> str:
    return f"{n / 2**30:,.2f} GiB"


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


def snapshot_catalog(store: TableStore, as_of: dt.datetime | None) -> dict[str, tuple[dt.datetime, dt.datetime | None]]:
    """Per cluster of the partitions table: (earliest snapshot, newest at or before ``as_of`` or None)."""
    ts = F.col("snapshot_ts")
    chosen = ts if as_of is None else F.when(ts <= F.lit(as_of), ts)
    # as microseconds: collect() would hand back naive datetimes in the machine's local zone
    rows = (
        store.read("partitions")
        .groupBy("cluster_id")
        .agg(F.unix_micros(F.min(ts)).alias("first"), F.unix_micros(F.max(chosen)).alias("chosen"))
        .collect()
    )
    return {r["cluster_id"]: (_from_micros(r["first"]), _from_micros(r["chosen"])) for r in rows}


def _from_micros(micros: int | None) -> Any:
    return None if micros is None else _EPOCH + dt.timedelta(microseconds=micros)


def choose_snapshots(
    catalog: dict[str, tuple[dt.datetime, dt.datetime | None]], as_of: dt.datetime | None, clusters: list[str] | None
) -> dict[str, dt.datetime]:
    """The snapshot each selected cluster is planned from; a named cluster without one is an error.

    Unknown clusters are a usage error (exit 2); a run that finds no snapshot
    at or before ``as_of`` names the earliest there is (exit 1). Without
    ``--cluster``, clusters whose first snapshot came after ``as_of`` did not
    exist yet and are left out.
    """
    unknown = sorted(set(clusters or []) - set(catalog))
    if unknown:
        known = ", ".join(sorted(catalog)) or "none"
        raise UsageError(f"no snapshot in table partitions for cluster(s) {', '.join(unknown)} (known: {known})")
    selected = sorted(clusters or catalog)
    late = [c for c in selected if catalog[c][1] is None]
    found = {c: catalog[c][1] for c in selected if catalog[c][1] is not None}
    if not found or (clusters and late):
        if not catalog:
            raise NoSnapshotError("table partitions holds no snapshot: nothing to plan")
        first = min((catalog[c][0], c) for c in (late or selected))
        bound = f"at or before {as_of.isoformat()} " if as_of else ""
        raise NoSnapshotError(
            f"no snapshot {bound}in table partitions for cluster(s) {', '.join(late or selected)}: "
            f"the earliest is {first[0].isoformat()} (cluster {first[1]})"
        )
    return found  # type: ignore[return-value]


def select_snapshots(
    store: TableStore, as_of: dt.datetime | None, clusters: list[str] | None
) -> dict[str, dt.datetime]:
    """Newest snapshot at or before ``as_of`` of each selected cluster (from the partitions table)."""
    return choose_snapshots(snapshot_catalog(store, as_of), as_of, clusters)


def derive_run_id(cluster_hashes: dict[str, str], snapshots: dict[str, dt.datetime]) -> str:
    """Same clusters, snapshots and effective config (strategy included): same run id, so a rerun is a no-op.

    Anything that can change a plan changes the id.
    """
    blob = "|".join(f"{c}={cluster_hashes[c]}@{_micros(ts)}" for c, ts in sorted(snapshots.items()))
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


def read_history(store: TableStore, run_id: str, clusters: list[str]) -> History:
    runs = (
        store.read_or_empty("plan_runs")
        .where(F.col("cluster_id").isin(clusters) | (F.col("run_id") == run_id))
        .select(
            "run_id",
            "cluster_id",
            "plan_version",
            "status",
            "error",
            "partitions",
            "strategy",
            "config_hash",
            F.unix_micros("snapshot_ts").alias("snapshot_micros"),
        )
        .toPandas()
    )
    committed = runs[(runs["status"] == COMMITTED) & runs["cluster_id"].isin(clusters)].sort_values("plan_version")
    last = {
        r.cluster_id: (int(r.plan_version), r.run_id, int(r.partitions or 0)) for r in committed.itertuples(index=False)
    }
    this_run: dict[str, list[RecordedRun]] = {}
    for r in runs[runs["run_id"] == run_id].itertuples(index=False):
        version = None if pd.isna(r.plan_version) else int(r.plan_version)
        micros = None if pd.isna(r.snapshot_micros) else int(r.snapshot_micros)
        row = RecordedRun(r.status, version, r.strategy, r.config_hash, _from_micros(micros), r.error)
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


# -- inputs ---------------------------------------------------------------------


def build_inputs(
    spark: SparkSession, store: TableStore, snapshots: dict[str, dt.datetime], history: History
) -> tuple[DataFrame, DataFrame]:
    """(stacked partition, throughput and previous-plan rows as ``schemas.PLAN_INPUT``, brokers) of the snapshots."""
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
    """The snapshot's partitions, the rates measured at or before it and the previous plan, in one frame."""
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
            _as_plan_input(plans_df, "previous", replicas="replicas", epoch="epoch", cores="coalesce(cores, array())")
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
    """Rows of the last committed plan version (the plan in force) of each of ``clusters``; None if none has one."""
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
    previous plan's ``previous_replicas`` / ``previous_epoch`` / ``previous_cores`` (null when the
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
    previous = inputs.loc[source == "previous", [*_KEYS, "replicas", "epoch", "cores"]].rename(
        columns={"replicas": "previous_replicas", "epoch": "previous_epoch", "cores": "previous_cores"}
    )
    out = partitions.merge(rates, on=_KEYS, how="left").merge(previous, on=_KEYS, how="left")
    out["has_throughput"] = out["bytes_in"].notna()
    planned = out["previous_replicas"].astype(object)
    out["previous_replicas"] = planned.where(planned.notna(), None)  # merge fills NaN; the planner wants None
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
            previous_version=spec["plan_version"] - 1,
            wave_broker_limit=spec["wave_broker_limit"],
            allow_worse=spec["allow_worse"],
        )
        try:
            result = plan_cluster(brokers_pdf, assemble_partitions(inputs_pdf), request)
            summary = {
                "status": result.status,
                "error": result.error,
                "notes": result.notes,
                "warnings": result.warnings,
                "metrics": result.metrics.to_dict() if result.metrics else {},
            }
            planned = result.planned if result.status == COMMITTED else result.planned.iloc[0:0]
        except Exception as exc:  # noqa: BLE001 - one cluster's bug must not sink the fleet
            summary = {
                "status": FAILED,
                "error": f"cluster {cluster_id}: internal error: {exc!r}",
                "notes": [],
                "warnings": [],
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
            "config_hash": config.cluster_hash(cluster_id, strategy),
            "seed": config.seed,
            "wave_broker_limit": config.wave_broker_limit,
            "allow_worse": config.allow_worse,
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
                "notes": "; ".join(o.notes) or None,
                **{k: o.metrics.get(k) for k in PLAN_RUNS.metric_columns},
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
    if run_id is not None and not run_id.strip():
        raise UsageError("--run-id is empty: give a non-empty id, or drop the flag to derive one")
    with stage(spark, "select_snapshots") as info:
        catalog = snapshot_catalog(store, as_of)
        snapshots = choose_snapshots(catalog, as_of, clusters)
        info["clusters"] = len(snapshots)
    warnings = [
        f"config [clusters.{c!r}] names a cluster with no snapshot in table partitions"
        for c in sorted(set(config.cluster_overrides) - set(catalog))
    ]
    config_hash = config.config_hash(list(snapshots), strategy)
    run_id = run_id or derive_run_id({c: config.cluster_hash(c, strategy) for c in snapshots}, snapshots)
    history = read_history(store, run_id, list(snapshots))
    requests = plan_requests(config, snapshots, history, strategy)
    check_run_id_reuse(run_id, history, snapshots, {c: (r["strategy"], r["config_hash"]) for c, r in requests.items()})
    log.info("run run_id=%s config_hash=%s clusters=%s dry_run=%s", run_id, config_hash, ",".join(snapshots), dry_run)

    done = [_already_done(c, run_id, row) for c in snapshots if (row := history.done(c)) is not None]
    todo = {c: ts for c, ts in snapshots.items() if history.done(c) is None}
    if not todo:
        return RunReport(run_id, config_hash, sorted(done, key=lambda o: o.cluster_id), dry_run, warnings)

    inputs_df, brokers_df = build_inputs(spark, store, todo, history)
    planned_df = run_planner(inputs_df, brokers_df, {c: requests[c] for c in todo}, run_id).persist()
    with stage(spark, "plan", clusters=len(todo)) as info:
        outcomes = [
            _outcome(row, snapshots, requests)
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
                config_hash=requests[c]["config_hash"],
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
        write_plan_runs(spark, store, outcomes, history, run_id, started_at, metadata)
    planned_df.unpersist()
    return RunReport(run_id, config_hash, sorted(done + outcomes, key=lambda o: o.cluster_id), dry_run, warnings)


def _already_done(cluster_id: str, run_id: str, row: RecordedRun) -> ClusterOutcome:
    """The outcome this run id already recorded, as it was recorded (version, strategy, snapshot)."""
    return ClusterOutcome(
        cluster_id,
        row.status,
        row.plan_version,
        row.snapshot_ts,
        row.strategy,
        config_hash=row.config_hash,
        done_by=run_id,
    )


def _outcome(row: Any, snapshots: dict[str, dt.datetime], requests: dict[str, dict[str, Any]]) -> ClusterOutcome:
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
        warnings=summary["warnings"],
        config_hash=requests[row["cluster_id"]]["config_hash"],
    )
