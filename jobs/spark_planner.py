"""The planner in Spark: one cogrouped group per cluster calls :func:`assigners.plan_cluster`.

The pattern of Spark's ``applyInPandas`` examples: the function takes one group's frames and
returns a frame of a declared schema; a cluster's result travels back as rows of
``schemas.PLANNED``. The groups travel as Arrow (``applyInArrow``) and the worker makes the
pandas frames itself, as ``applyInPandas`` would: Spark's own conversions go value by value
through Python for array columns, pyarrow's in C++ (a third of the worker's time that was not
planning on the 1M-partition fleet).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from assigners import COMMITTED, FAILED, Constraints, PlanRequest, PlanResult, plan_cluster
from assigners.waves import WaveCaps
from jobs.config import Config
from jobs.history import History
from jobs.inputs import as_pandas, assemble_partitions, by_source_from_arrow, unmatched_throughput
from jobs.store import write_parquet
from schemas import MOVES, PLANNED, PLANS, TableSpec


@dataclass(frozen=True)
class ClusterRequest:
    """What one cluster's planner worker needs: plain values only, as it travels pickled in the
    ``applyInPandas`` closure (STYLE rule 3). ``refused``: fail the cluster with this error instead of planning."""

    strategy: str
    constraints: dict[str, Any]  # Constraints.to_dict()
    config_hash: str
    config_json: str
    seed: int
    wave_caps: dict[str, Any]  # WaveCaps as a dict
    allow_worse: bool
    has_previous_plan: bool
    previous_partitions: int
    plan_version: int
    snapshot_ts: str  # ISO 8601
    refused: str | None = None

    def plan_request(self, cluster_id: str) -> PlanRequest:
        return PlanRequest(
            cluster_id=cluster_id,
            strategy=self.strategy,
            constraints=Constraints.from_dict(self.constraints),
            seed=self.seed,
            has_previous_plan=self.has_previous_plan,
            previous_partitions=self.previous_partitions,
            previous_version=self.plan_version - 1,
            wave_caps=WaveCaps(**self.wave_caps),
            allow_worse=self.allow_worse,
        )


@dataclass(frozen=True)
class Staging:
    """Where the workers write a committed cluster's ``plans`` and ``moves`` rows themselves: per table, a
    stage folder under its location (``folders``) and the clusters whose rows it still lacks (``pending``: a
    rerun after a crash between the two commits writes only the table that lacks them). The driver commits
    the files the outcome rows name (:func:`jobs.commit.commit_staged`); until then no reader sees them."""

    folders: dict[str, str]  # table -> stage folder URI
    stages: dict[str, str]  # table -> stage folder name, relative to the table's location
    pending: dict[str, frozenset[str]]  # table -> clusters

    def write(self, cluster_id: str, planned: pa.Table) -> dict[str, list[str]]:
        """The cluster's rows written as parquet under each table's stage folder; returns the files per table."""
        written = {}
        for name, spec, rows in (("plans", PLANS, plan_rows), ("moves", MOVES, move_rows)):
            if cluster_id in self.pending[name]:
                written[name] = write_parquet(rows(planned), self.folders[name], spec)
        return written


MOVED_FROM = {"to_replicas": "replicas", "to_leader": "leader"}  # moves columns PLANNED names otherwise


def plan_rows(planned: pa.Table) -> pa.Table:
    """``plans`` rows of PLANNED rows, as :func:`jobs.commit.plans_columns` selects them in Spark."""
    return planned.select(PLANS.column_names)


def move_rows(planned: pa.Table) -> pa.Table:
    """``moves`` rows of PLANNED rows (the partitions that change), as :func:`jobs.commit.moves_columns`."""
    moved = planned.filter(pc.is_valid(planned["kind"]))
    return pa.table([moved[MOVED_FROM.get(c, c)] for c in MOVES.column_names], schema=MOVES.arrow_schema())


def make_cluster_planner(
    requests: dict[str, ClusterRequest], run_id: str, staging: Staging | None = None, rows_back: bool = True
) -> Callable[..., pa.Table]:
    """The cogrouped applyInArrow function; closes over plain values only (STYLE rule 3).

    Each group gives back its outcome row, and its plan rows too where ``rows_back`` (Spark writes them);
    ``staging``: the worker writes the rows itself and names the files in the outcome's ``staged``."""
    schema = PLANNED.arrow_schema()

    def plan_arrow_group(key: tuple[pa.Scalar, ...], inputs: pa.Table, brokers: pa.Table) -> pa.Table:
        cluster_id = str(key[0].as_py())
        if cluster_id not in requests:  # only rows of a cluster this run does not plan: nothing to say
            return schema.empty_table()
        spec = requests[cluster_id]
        planned, summary = plan_one_cluster(cluster_id, spec, by_source_from_arrow(inputs), as_pandas(brokers))
        rows = schema.empty_table()
        if rows_back or staging is not None:  # (a dry run needs the outcome alone)
            rows = as_arrow(
                planned.assign(
                    cluster_id=cluster_id,
                    plan_version=spec.plan_version,
                    run_id=run_id,
                    snapshot_ts=pd.Timestamp(spec.snapshot_ts),
                    strategy=spec.strategy,
                ),
                schema,
            )
        if staging is not None and rows.num_rows:
            summary["staged"] = staging.write(cluster_id, rows)
        outcome = {
            "cluster_id": cluster_id,
            "plan_version": spec.plan_version,
            "run_id": run_id,
            "strategy": spec.strategy,
            "snapshot_ts": pd.Timestamp(spec.snapshot_ts),
            "summary_json": json.dumps(summary, sort_keys=True),
        }
        return pa.concat_tables([rows if rows_back else rows.slice(0, 0), pa.Table.from_pylist([outcome], schema)])

    return plan_arrow_group


def as_arrow(pdf: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """``pdf``'s columns of ``schema`` as Arrow of its types; a column ``pdf`` lacks is null."""
    if pdf.empty:  # (a failed cluster's empty frame may hold any dtypes)
        return schema.empty_table()
    present = pa.schema([f for f in schema if f.name in pdf.columns])
    converted = pa.Table.from_pandas(pdf[present.names], schema=present, preserve_index=False)
    return pa.table(
        [converted[f.name] if f.name in present.names else pa.nulls(len(pdf), f.type) for f in schema], schema=schema
    )


def plan_one_cluster(
    cluster_id: str, spec: ClusterRequest, inputs: dict[str, pd.DataFrame], brokers_pdf: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One cluster planned from its stacked ``PLAN_INPUT`` rows (split by source: :func:`jobs.inputs.by_source`)
    and broker rows: its plan rows (none unless committed) and the summary its outcome row carries (status,
    error, notes, warnings, metrics)."""
    columns = PLANNED.column_names
    try:
        result = (
            PlanResult(FAILED, pd.DataFrame(columns=columns), error=spec.refused)
            if spec.refused
            else plan_cluster(brokers_pdf, assemble_partitions(inputs), spec.plan_request(cluster_id))
        )
        summary = {
            "status": result.status,
            "error": result.error,
            "notes": [*result.notes, *unmatched_throughput(inputs)],
            "warnings": result.warnings,
            "metrics": result.metrics.to_dict() if result.metrics else {},
        }
    except Exception as exc:  # noqa: BLE001 - one cluster's bug must not sink the fleet
        error = f"cluster {cluster_id}: internal error: {exc!r}"
        return pd.DataFrame(columns=columns), {
            "status": FAILED,
            "error": error,
            "notes": [],
            "warnings": [],
            "metrics": {},
        }
    return (result.planned if result.status == COMMITTED else result.planned.iloc[0:0]), summary


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
    config: Config,
    snapshots: dict[str, dt.datetime],
    history: History,
    strategy: str | None,
    refused: dict[str, str] | None = None,
) -> dict[str, ClusterRequest]:
    """Per cluster, what its worker needs; ``refused``: clusters to fail with that error instead of planning."""
    out = {}
    for cluster_id, snapshot_ts in snapshots.items():
        settings = config.for_cluster(cluster_id, strategy)
        last_version, _, last_partitions = history.last_committed.get(cluster_id, (0, "", 0))
        out[cluster_id] = ClusterRequest(
            strategy=settings.strategy,
            constraints=settings.constraints.to_dict(),
            config_hash=config.cluster_hash(cluster_id, strategy),
            config_json=config.cluster_json(cluster_id, strategy),
            seed=config.seed,
            wave_caps=asdict(config.execution.waves),
            allow_worse=config.allow_worse,
            has_previous_plan=last_version > 0,
            previous_partitions=last_partitions,
            plan_version=last_version + 1,
            snapshot_ts=snapshot_ts.isoformat(),
            refused=(refused or {}).get(cluster_id),
        )
    return out


def run_planner(
    inputs_df: DataFrame,
    brokers_df: DataFrame,
    requests: dict[str, ClusterRequest],
    run_id: str,
    staging: Staging | None = None,
    rows_back: bool = True,
) -> DataFrame:
    """PLANNED rows per cluster: its outcome row, and its plan rows where ``rows_back``; ``staging``: see
    :func:`make_cluster_planner`."""
    return (
        inputs_df.groupBy("cluster_id")
        .cogroup(brokers_df.groupBy("cluster_id"))
        .applyInArrow(make_cluster_planner(requests, run_id, staging, rows_back), schema=PLANNED.spark_schema())
    )
