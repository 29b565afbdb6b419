"""The read side: committed views, ``export``, ``report`` and ``sql``.

Readers only ever see committed plan versions: a ``plans`` / ``moves`` row
counts when a ``plan_runs`` row with ``status = 'committed'`` names its run,
cluster and version (DESIGN.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from assigners.metrics import broker_table
from assigners.model import Constraints, prepare_brokers
from jobs.config import Config
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


def latest_version(store: TableStore, cluster_id: str) -> int | None:
    row = committed_runs(store).where(F.col("cluster_id") == cluster_id).agg(F.max("plan_version").alias("v")).first()
    return None if row is None or row["v"] is None else int(row["v"])


def resolve_version(store: TableStore, cluster_id: str, plan_version: int | None) -> int:
    latest = latest_version(store, cluster_id)
    if latest is None:
        raise LookupError(f"cluster {cluster_id} has no committed plan")
    if plan_version is None:
        return latest
    exists = (
        committed_runs(store)
        .where((F.col("cluster_id") == cluster_id) & (F.col("plan_version") == plan_version))
        .count()
    )
    if not exists:
        raise LookupError(f"cluster {cluster_id} has no committed plan version {plan_version} (latest: {latest})")
    return plan_version


def reassignment_json(
    store: TableStore, cluster_id: str, plan_version: int | None = None, wave: int | None = None
) -> dict[str, Any]:
    """Kafka's ``kafka-reassign-partitions --execute`` input for the moves of one plan version."""
    version = resolve_version(store, cluster_id, plan_version)
    moves = committed(store, "moves").where((F.col("cluster_id") == cluster_id) & (F.col("plan_version") == version))
    rows = moves.select("topic", "partition", "to_replicas", "wave").orderBy("topic", "partition").collect()
    if wave is not None:
        waves = max((r["wave"] for r in rows), default=0)
        if not 1 <= wave <= waves:
            raise LookupError(
                f"plan v{version} of cluster {cluster_id} has {waves} waves (1-{waves}); --wave {wave} is not one"
                if waves
                else f"plan v{version} of cluster {cluster_id} has no moves, so no waves; --wave {wave} is not one"
            )
        rows = [r for r in rows if r["wave"] == wave]
    return {
        "version": 1,
        "partitions": [
            {"topic": r["topic"], "partition": int(r["partition"]), "replicas": [int(b) for b in r["to_replicas"]]}
            for r in rows
        ],
    }


def write_report(
    store: TableStore,
    out_dir: str,
    cluster_id: str | None = None,
    plan_version: int | None = None,
    config: Config | None = None,
) -> list[str]:
    """Per cluster: summary.md (the plan_runs row), brokers.csv (before/after), moves.csv.

    Broker loads use the config's load weights (the defaults without one).
    """
    config = config or Config()
    runs = store.read_or_empty("plan_runs").where(F.col("status") == "committed")
    clusters = (
        [cluster_id] if cluster_id else sorted(r["cluster_id"] for r in runs.select("cluster_id").distinct().collect())
    )
    written = []
    for cid in clusters:
        version = resolve_version(store, cid, plan_version)
        folder = Path(out_dir) / cid / f"v{version}"
        folder.mkdir(parents=True, exist_ok=True)
        rows = cast(
            pd.DataFrame, runs.where((F.col("cluster_id") == cid) & (F.col("plan_version") == version)).toPandas()
        )
        run = rows.iloc[0]
        brokers = _broker_report(store, cid, version, run, run_constraints(run, config, cid))
        brokers.to_csv(folder / "brokers.csv", index=False)
        moves = cast(
            pd.DataFrame,
            committed(store, "moves")
            .where((F.col("cluster_id") == cid) & (F.col("plan_version") == version))
            .orderBy("wave", "topic", "partition")
            .toPandas(),
        )
        moves.to_csv(folder / "moves.csv", index=False)
        (folder / "summary.md").write_text(_summary_md(cid, version, run, brokers, moves))
        written.append(str(folder))
    return written


def run_constraints(run: pd.Series, config: Config, cluster_id: str) -> Constraints:
    """The constraints a committed plan was made with (``plan_runs.config_json``); runs written before that
    column existed fall back to the config given to the command."""
    recorded = run.get("config_json")
    if isinstance(recorded, str) and recorded:
        return Constraints.from_dict(json.loads(recorded)["constraints"])
    return config.for_cluster(cluster_id).constraints


def _broker_report(
    store: TableStore, cluster_id: str, version: int, run: pd.Series, constraints: Constraints
) -> pd.DataFrame:
    """Per broker, before (the live layout of the plan's snapshot) and after (the plan)."""
    from jobs.inputs import assemble_partitions, at_snapshots, stacked_inputs

    weights = constraints.load_weights
    snapshot = {cluster_id: run["snapshot_ts"].to_pydatetime()}
    parts = assemble_partitions(stacked_inputs(store, snapshot).toPandas())
    brokers = prepare_brokers(store.read("brokers").where(at_snapshots(snapshot)).toPandas(), constraints)
    plans = committed(store, "plans").where(F.col("cluster_id") == cluster_id)
    after = plans.where(F.col("plan_version") == version).select("topic", "partition", "replicas").toPandas()
    before = parts[["topic", "partition", "replicas"]]
    loads = parts[["topic", "partition", "bytes_in", "bytes_out"]].fillna(0.0)

    def table(assignment: pd.DataFrame) -> pd.DataFrame:
        joined = assignment.merge(loads, on=["topic", "partition"], how="left").fillna(
            {"bytes_in": 0.0, "bytes_out": 0.0}
        )
        return broker_table(
            [list(map(int, r)) for r in joined["replicas"]],
            *weights.replica_loads(joined["bytes_in"].to_numpy(), joined["bytes_out"].to_numpy()),
            brokers,
        )

    b, a = table(before), table(after)
    out = b[["broker_id", "eligible", "weight"]].copy()
    for column in ("replicas", "leaders", "load"):
        out[f"{column}_before"] = b[column].to_numpy()
        out[f"{column}_after"] = a.set_index("broker_id")[column].reindex(b["broker_id"]).fillna(0).to_numpy()
    return out.merge(brokers[["broker_id", "rack", "state"]], on="broker_id", how="left")


def _summary_md(cluster_id: str, version: int, run: pd.Series, brokers: pd.DataFrame, moves: pd.DataFrame) -> str:
    def fmt(value: Any) -> str:
        if isinstance(value, (float, np.floating)):
            return f"{value:,.2f}"
        return str(value)

    lines = [f"# Plan {cluster_id} v{version}", "", "| measure | value |", "|---|---|"]
    lines += [f"| {k} | {fmt(run[k])} |" for k in run.index if k not in ("cluster_id",)]
    lines += [
        "",
        f"Moves by wave: {moves.groupby('wave').size().to_dict() if len(moves) else {}}",
        "",
        "## Brokers",
        "",
        brokers.to_markdown(index=False) if _has_tabulate() else brokers.to_string(index=False),
    ]
    return "\n".join(lines) + "\n"


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def write_json(payload: dict[str, Any], out: str | None) -> None:
    text = json.dumps(payload, indent=None, separators=(",", ":"))
    if out:
        tmp = f"{out}.tmp"
        Path(tmp).write_text(text + "\n")
        os.replace(tmp, out)  # never a half-written file for the reassignment tool
    else:
        print(text)
