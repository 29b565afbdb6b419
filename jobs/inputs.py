"""The plan job's inputs: which snapshot each cluster is planned from, and its rows stacked as ``PLAN_INPUT``.

Snapshots are chosen by SQL filters on ``cluster_id`` and ``snapshot_ts`` (no joins),
so a fleet of any size stays one scan per table; :func:`assemble_partitions` turns one
cluster's stacked rows back into the planner's partition frame.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.config import Config
from jobs.stages import NoSnapshotError, UsageError, stage
from jobs.store import DeltaRsStore, TableStore
from schemas import PLAN_INPUT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    """What a run plans from: each selected cluster's snapshot and its partition rows, the clusters refused
    before planning (with the error to fail each with) and warnings about snapshots passed over."""

    snapshots: dict[str, dt.datetime]
    counts: dict[str, int]
    refused: dict[str, str]
    warnings: list[str]


def pick_snapshots(
    store: TableStore, config: Config, started_at: dt.datetime, as_of: dt.datetime | None, clusters: list[str] | None
) -> Selection:
    """The newest snapshot of each cluster (of ``clusters``, when given) at ``as_of``, else at the run's start
    plus ``max_clock_skew``; refused where older than ``max_snapshot_age`` or larger than
    ``max_partitions_per_cluster``; warned about where a later one was passed over or the config names a
    cluster with none."""
    with stage(store.spark, "select_snapshots") as info:
        # where delta-rs keeps the log, the two columns are read once for the catalog and the counts below
        columns = _snapshot_columns(store) if isinstance(store, DeltaRsStore) else None
        catalog = snapshot_catalog(store, as_of or started_at + config.max_clock_skew, columns)
        snapshots = choose_snapshots(catalog, as_of, clusters)
        info["clusters"] = len(snapshots)
    warnings = [
        f"config [clusters.{c!r}] names a cluster with no snapshot in table partitions"
        for c in sorted(set(config.cluster_overrides) - set(catalog))
    ]
    if as_of is None:
        warnings += future_snapshots(catalog, started_at + config.max_clock_skew)
    counts = partition_counts(store, snapshots, columns)
    if counts:
        largest = max(counts, key=lambda c: (counts[c], c))
        log.info("largest cluster group: %s with %d partitions", largest, counts[largest])
    limit, max_age = config.max_partitions_per_cluster, config.max_snapshot_age
    refused = {
        **(oversized(counts, limit) if limit else {}),
        **(stale_snapshots(snapshots, as_of or started_at, max_age) if max_age else {}),
    }
    return Selection(snapshots, counts, refused, warnings)


def snapshot_catalog(
    store: TableStore, bound: dt.datetime | None, columns: pa.Table | None = None
) -> dict[str, tuple[dt.datetime, dt.datetime | None, dt.datetime | None]]:
    """Per cluster of the partitions table: (earliest snapshot, newest at or before ``bound`` or None, newest
    after it or None). ``columns``: :func:`_snapshot_columns`, where already read."""
    if isinstance(store, DeltaRsStore):
        return _catalog_from_files(_snapshot_columns(store) if columns is None else columns, bound)
    return _catalog_in_spark(store, bound)


def _catalog_in_spark(
    store: TableStore, bound: dt.datetime | None
) -> dict[str, tuple[dt.datetime, dt.datetime | None, dt.datetime | None]]:
    """:func:`snapshot_catalog` as a Spark job (Delta's JVM backend: its credentials may be Spark's alone)."""
    ts = F.col("snapshot_ts")
    chosen = ts if bound is None else F.when(ts <= F.lit(bound), ts)
    beyond = F.lit(None) if bound is None else F.when(ts > F.lit(bound), ts)
    # as microseconds: collect() would hand back naive datetimes in the machine's local zone
    rows = (
        store.read("partitions")
        .groupBy("cluster_id")
        .agg(
            F.unix_micros(F.min(ts)).alias("first"),
            F.unix_micros(F.max(chosen)).alias("chosen"),
            F.unix_micros(F.max(beyond)).alias("beyond"),
        )
        .collect()
    )
    return {
        r["cluster_id"]: (from_micros(r["first"]), from_micros(r["chosen"]), from_micros(r["beyond"])) for r in rows
    }


def _snapshot_columns(store: DeltaRsStore) -> pa.Table:
    """The partitions table's ``cluster_id`` and ``snapshot_ts`` as Arrow, read with delta-rs where it keeps the
    Delta log: two columns straight from the files, where a Spark job cost seconds (the demo's plan: 3.8 s of
    select_snapshots, 1.2 s of counting the groups)."""
    columns = store.scan("partitions", ["cluster_id", "snapshot_ts"])
    return columns.set_column(1, "snapshot_ts", columns["snapshot_ts"].cast("int64"))  # microseconds since 1970


def _catalog_from_files(
    rows: Any, bound: dt.datetime | None
) -> dict[str, tuple[dt.datetime, dt.datetime | None, dt.datetime | None]]:
    """:func:`snapshot_catalog` of the (cluster_id, snapshot_ts in microseconds) rows, in Arrow."""
    ts = rows["snapshot_ts"]
    if bound is None:
        chosen, beyond = ts, pa.nulls(len(ts), pa.int64())
    else:
        after = pc.greater(ts, epoch_micros(bound))
        chosen, beyond = pc.if_else(after, None, ts), pc.if_else(after, ts, None)
    table = rows.append_column("chosen", chosen).append_column("beyond", beyond)
    grouped = table.group_by("cluster_id").aggregate([("snapshot_ts", "min"), ("chosen", "max"), ("beyond", "max")])
    return {
        c: (from_micros(first), from_micros(pick), from_micros(after))
        for c, first, pick, after in zip(
            *(grouped[n].to_pylist() for n in ("cluster_id", "snapshot_ts_min", "chosen_max", "beyond_max"))
        )
        if c is not None and first is not None
    }


def from_micros(micros: int | None) -> Any:
    return None if micros is None else _EPOCH + dt.timedelta(microseconds=micros)


def choose_snapshots(
    catalog: dict[str, tuple[dt.datetime, dt.datetime | None, dt.datetime | None]],
    as_of: dt.datetime | None,
    clusters: list[str] | None,
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


def partition_counts(
    store: TableStore, snapshots: dict[str, dt.datetime], columns: pa.Table | None = None
) -> dict[str, int]:
    """Partition rows per cluster in its chosen snapshot: the size of its planning group. ``columns``:
    :func:`_snapshot_columns`, where already read."""
    if isinstance(store, DeltaRsStore):
        rows = (_snapshot_columns(store) if columns is None else columns).to_pandas()
        chosen = rows["cluster_id"].map({c: epoch_micros(ts) for c, ts in snapshots.items()})
        counts = rows[rows["snapshot_ts"] == chosen].groupby("cluster_id").size()
        return {str(c): int(n) for c, n in counts.items()}
    return _counts_in_spark(store, snapshots)


def _counts_in_spark(store: TableStore, snapshots: dict[str, dt.datetime]) -> dict[str, int]:
    rows = store.read("partitions").where(at_snapshots(snapshots)).groupBy("cluster_id").count().collect()
    return {r["cluster_id"]: int(r["count"]) for r in rows}


def oversized(counts: dict[str, int], limit: int) -> dict[str, str]:
    """Per cluster above ``limit`` partitions, the error to fail it with before its group reaches a worker."""
    return {
        c: f"cluster {c}: {n:,} partitions in its snapshot (table partitions), above max_partitions_per_cluster "
        f"{limit:,}; not planned (raise the limit with more executor memory, or split the cluster's snapshot)"
        for c, n in sorted(counts.items())
        if n > limit
    }


def future_snapshots(
    catalog: dict[str, tuple[dt.datetime, dt.datetime | None, dt.datetime | None]], horizon: dt.datetime
) -> list[str]:
    """Warnings for snapshots dated after ``horizon`` (now plus the allowed clock skew): ignored, so a collector
    with a wrong clock cannot shadow the real snapshots written after it (``--as-of`` still selects them)."""
    return [
        f"cluster {c}: ignored the snapshot of {beyond.isoformat()} in table partitions, dated after now plus "
        f"max_clock_skew ({horizon.isoformat()}); a collector's clock is wrong? (--as-of selects it)"
        for c, (_, _, beyond) in sorted(catalog.items())
        if beyond is not None
    ]


def stale_snapshots(snapshots: dict[str, dt.datetime], reference: dt.datetime, max_age: dt.timedelta) -> dict[str, str]:
    """Per cluster whose chosen snapshot is older than ``max_age`` at ``reference``, the error to fail it with."""
    return {
        c: f"cluster {c}: the newest snapshot in table partitions is from {ts.isoformat()}, "
        f"{_age(reference - ts)} before {reference.isoformat(timespec='seconds')}: older than max_snapshot_age "
        f"{_age(max_age)} (collectors stopped?)"
        for c, ts in sorted(snapshots.items())
        if reference - ts > max_age
    }


def _age(delta: dt.timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f}h" if hours < 48 else f"{hours / 24:.1f}d"


def at_snapshots(snapshots: dict[str, dt.datetime], op: str = "=") -> str:
    """SQL filter for the rows of each cluster's snapshot (``op`` ``<=``: at or before it).

    A filter, not a join with a frame of snapshots: no broadcast job, and the
    ``cluster_id IN`` and time bounds reach the parquet reader. One map
    lookup, so a fleet of any size stays one flat expression.
    """
    micros = {c: epoch_micros(t) for c, t in snapshots.items()}
    bounds = f"snapshot_ts <= timestamp_micros({max(micros.values())})"
    if op == "=":
        bounds += f" AND snapshot_ts >= timestamp_micros({min(micros.values())})"
    per_cluster = sql_lookup({c: f"timestamp_micros({m})" for c, m in micros.items()})
    return f"cluster_id IN ({', '.join(map(sql_string, snapshots))}) AND {bounds} AND snapshot_ts {op} {per_cluster}"


def sql_lookup(values: dict[str, str]) -> str:
    """SQL for "this row's cluster's value" out of ``values`` (cluster -> SQL literal)."""
    pairs = ", ".join(f"{sql_string(c)}, {v}" for c, v in values.items())
    return f"try_element_at(map({pairs}), cluster_id)"


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def epoch_micros(ts: dt.datetime) -> int:
    """Microseconds since the epoch; a naive time is UTC (the session's zone)."""
    aware = ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)
    return (aware - _EPOCH) // dt.timedelta(microseconds=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


# Each source's PLAN_INPUT columns: the column of its table each is read from, and whether a null array there
# reads as empty. Both ways of stacking (Spark scans, delta-rs for a small fleet) read these.
SOURCE_COLUMNS: dict[str, dict[str, tuple[str, bool]]] = {
    "partition": {
        "replicas": ("replicas", False),
        "leader": ("leader", False),
        "size_bytes": ("size_bytes", False),
        "adding_replicas": ("adding_replicas", True),
        "removing_replicas": ("removing_replicas", True),
    },
    "throughput": {
        "measured_ts": ("snapshot_ts", False),
        "bytes_in": ("bytes_in_per_sec", False),
        "bytes_out": ("bytes_out_per_sec", False),
    },
    "previous": {"replicas": ("replicas", False), "epoch": ("epoch", False), "cores": ("cores", True)},
    "previous_move": {"replicas": ("from_replicas", False)},
}


def stacked_inputs(
    store: TableStore,
    snapshots: dict[str, dt.datetime],
    plans_df: DataFrame | None = None,
    moves_df: DataFrame | None = None,
) -> DataFrame:
    """The snapshot's partitions, the rates measured at or before it and the previous plan (its targets and the
    baselines of its moves), in one frame."""
    partitions = store.read("partitions").where(at_snapshots(snapshots))
    rates = store.read("throughput").where(at_snapshots(snapshots, "<="))
    stacked = _as_plan_input(partitions, "partition").unionByName(_as_plan_input(rates, "throughput"))
    if plans_df is not None:
        stacked = stacked.unionByName(_as_plan_input(plans_df, "previous"))
    if moves_df is not None:
        stacked = stacked.unionByName(_as_plan_input(moves_df, "previous_move"))
    return stacked


def stacked_inputs_from_files(
    store: DeltaRsStore, snapshots: dict[str, dt.datetime], plans_in_force: dict[str, tuple[int, str]]
) -> tuple[pa.Table, pa.Table]:
    """:func:`stacked_inputs` (the previous plans: ``plans_in_force``, cluster -> (plan_version, run_id)) and the
    snapshots' broker rows, read as Arrow by delta-rs: the same rows, with no Spark job (a small fleet's way)."""
    chosen = {c: epoch_micros(ts) for c, ts in snapshots.items()}
    ours = ds.field("cluster_id").isin(list(snapshots))
    partitions = _per_cluster(store.read_arrow("partitions", ours), "snapshot_ts", chosen, pc.equal)
    rates = _per_cluster(store.read_arrow("throughput", ours), "snapshot_ts", chosen, pc.less_equal)
    stacked = [_as_plan_input_arrow(partitions, "partition"), _as_plan_input_arrow(rates, "throughput")]
    if plans_in_force:
        planned = ds.field("cluster_id").isin(list(plans_in_force))
        versions, runs = ({c: last[i] for c, last in plans_in_force.items()} for i in (0, 1))
        for name, source in (("plans", "previous"), ("moves", "previous_move")):
            rows = _per_cluster(_per_cluster(store.read_arrow(name, planned), "run_id", runs), "plan_version", versions)
            stacked.append(_as_plan_input_arrow(rows, source))
    brokers = _per_cluster(store.read_arrow("brokers", ours), "snapshot_ts", chosen, pc.equal)
    return pa.concat_tables(stacked), brokers


def _per_cluster(rows: pa.Table, column: str, values: dict[str, Any], compare: Any = pc.equal) -> pa.Table:
    """The ``rows`` whose ``column`` compares (``compare``) to their cluster's entry in ``values`` (timestamps as
    microseconds). Compared after the scan: delta-rs's file pruning on a timestamp of Spark's files found no rows."""
    at = pc.index_in(rows["cluster_id"], value_set=pa.array(list(values), pa.string()))
    wanted = pc.take(pa.array(list(values.values())), at)
    have = rows[column]
    if pa.types.is_timestamp(have.type):
        have = have.cast(pa.int64())
    return rows.filter(pc.fill_null(compare(have, wanted), False))


def _as_plan_input_arrow(rows: pa.Table, source: str) -> pa.Table:
    """:func:`_as_plan_input` in Arrow."""
    n, schema = len(rows), PLAN_INPUT.arrow_schema()
    picked = {"cluster_id": rows["cluster_id"], "source": pa.array([source] * n, pa.string()), "topic": rows["topic"]}
    picked["partition"] = rows["partition"]
    for column, (read, empty_if_null) in SOURCE_COLUMNS[source].items():
        picked[column] = pc.coalesce(rows[read], pa.scalar([], rows[read].type)) if empty_if_null else rows[read]
    empty = pa.array([[]] * n, pa.list_(pa.int32()))
    return pa.table(
        {
            f.name: picked[f.name] if f.name in picked else (empty if pa.types.is_list(f.type) else pa.nulls(n, f.type))
            for f in schema
        }
    ).cast(schema)


def _as_plan_input(df: DataFrame, source: str) -> DataFrame:
    """``df``'s rows as PLAN_INPUT rows of one source: the keys, its :data:`SOURCE_COLUMNS`, null elsewhere.

    Arrays a source lacks are empty, not null: Spark's Arrow writer spends
    ~7 us on each null array (0.7 s per 100k rows, more than the scan).
    """
    picked = {"cluster_id": "cluster_id", "source": sql_string(source), "topic": "topic", "partition": "`partition`"}
    for column, (read, empty_if_null) in SOURCE_COLUMNS[source].items():
        picked[column] = f"coalesce(`{read}`, array())" if empty_if_null else f"`{read}`"
    absent = {"array<int>": "array()"}
    return df.selectExpr(
        *[
            f"CAST({picked.get(c.name, absent.get(c.type, 'NULL'))} AS {c.type}) AS `{c.name}`"
            for c in PLAN_INPUT.columns
        ]
    )


_KEYS = ["topic", "partition"]


# the names the planner's frame gives some sources' columns (SOURCE_COLUMNS: the columns each source carries)
_PLANNER_NAMES = {
    "previous": {"replicas": "previous_replicas", "epoch": "previous_epoch", "cores": "previous_cores"},
    "previous_move": {"replicas": "previous_baseline"},
}


def by_source(inputs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """One cluster's stacked PLAN_INPUT rows split by source: the keys and the columns each source carries."""
    source = inputs["source"]
    return {name: inputs.loc[source == name, [*_KEYS, *fields]] for name, fields in SOURCE_COLUMNS.items()}


def by_source_from_arrow(inputs: pa.Table) -> dict[str, pd.DataFrame]:
    """:func:`by_source` of the rows as Arrow, each source's columns alone converted: the frames (dtypes
    included) of converting the whole table first, as ``applyInPandas`` did (an integer column null anywhere
    is float), for a third of the time (the array columns of the other sources are never converted)."""
    floats = {f.name: pa.float64() for f in inputs.schema if pa.types.is_integer(f.type) and inputs[f.name].null_count}
    return {
        name: as_pandas(inputs.filter(pc.equal(inputs["source"], name)).select([*_KEYS, *fields]), floats)
        for name, fields in SOURCE_COLUMNS.items()
    }


def as_pandas(table: pa.Table, types: dict[str, pa.DataType] | None = None) -> pd.DataFrame:
    """``table`` as ``applyInPandas`` hands it over: timestamps tz-naive in UTC (the session's time zone, which
    ``jobs.session`` enforces), in nanoseconds; the rest as pyarrow converts it (arrays as numpy arrays, null
    integers as NaN floats), ``types`` (column -> type) cast first."""
    naive = pa.schema(
        [
            pa.field(f.name, pa.timestamp("ns") if pa.types.is_timestamp(f.type) else (types or {}).get(f.name, f.type))
            for f in table.schema
        ]
    )
    return table.cast(naive).to_pandas()


def assemble_partitions(inputs: pd.DataFrame | dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One cluster's partition frame for the planner from its stacked PLAN_INPUT rows (or those
    rows :func:`by_source`).

    The snapshot's partition rows (duplicates kept, for validation to name),
    each with its newest rates measured at or before the snapshot
    (``has_throughput`` False and null rates when there are none) and the
    previous plan's ``previous_replicas`` / ``previous_epoch`` / ``previous_cores`` (null when the
    plan lacks it) and ``previous_baseline``, where that plan started: its move's ``from_replicas``, else
    (a partition it left alone) its target. Reassignments in flight keep ``adding_replicas`` /
    ``removing_replicas`` (None when none).
    """
    sources = by_source(inputs) if isinstance(inputs, pd.DataFrame) else inputs
    partitions = sources["partition"]
    # ties on the timestamp are broken by value, so the pick never depends on row order
    rates = (
        sources["throughput"]
        .sort_values([*_KEYS, "measured_ts", "bytes_in", "bytes_out"], kind="stable")
        .drop_duplicates(_KEYS, keep="last")
        .drop(columns="measured_ts")
        .assign(has_throughput=True)  # a row was measured, whatever its value (validation judges NaN)
    )
    previous = sources["previous"].rename(columns=_PLANNER_NAMES["previous"])
    baselines = sources["previous_move"].rename(columns=_PLANNER_NAMES["previous_move"])
    out = partitions.merge(rates, on=_KEYS, how="left").merge(previous, on=_KEYS, how="left")
    out["has_throughput"] = out["has_throughput"].astype("boolean").fillna(False).astype(bool)
    planned = out["previous_replicas"].astype(object)
    out["previous_replicas"] = planned.where(planned.notna(), None)  # merge fills NaN; the planner wants None
    if len(baselines):
        out = out.merge(baselines, on=_KEYS, how="left")
        started = out["previous_baseline"].astype(object)
        out["previous_baseline"] = started.where(started.notna(), out["previous_replicas"])
    elif len(previous):
        out["previous_baseline"] = out["previous_replicas"]
    return out.reset_index(drop=True)


def unmatched_throughput(inputs: pd.DataFrame | dict[str, pd.DataFrame]) -> list[str]:
    """Notes on throughput rows of partitions the snapshot does not have (a stale collector, a deleted topic)."""
    sources = by_source(inputs) if isinstance(inputs, pd.DataFrame) else inputs
    have = pd.MultiIndex.from_frame(sources["partition"][_KEYS])  # one pass, not a set of tuples
    rates = sources["throughput"]
    measured = rates.loc[~pd.MultiIndex.from_frame(rates[_KEYS]).isin(have), _KEYS]
    unknown = sorted(f"{t}:{p}" for t, p in measured.drop_duplicates().itertuples(index=False))
    if not unknown:
        return []
    shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    return [f"{len(unknown)} partitions in table throughput are not in the snapshot (ignored): {shown}"]
