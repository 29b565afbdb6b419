"""``partition-planner demo``: write a seeded synthetic fleet, then plan it.

The fleet is meant to look like a real one that needs planning: Zipf-skewed
topic sizes and throughput, a drifted current layout that ignores racks and
favours some brokers, one cluster with a freshly added empty broker and one
with a dead broker still listed in replica sets and its replacement, in the
same rack, holding nothing yet (how a failed broker is replaced; ``--brokers``
counts the live brokers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import logging
import sys

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from jobs.store import FEW_ROWS, TableStore
from schemas import BROKERS, PARTITIONS, THROUGHPUT

log = logging.getLogger("partition_planner.demo")

DEMO_SNAPSHOT = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
DEFAULT_BROKERS = (6, 12, 24)
DEFAULT_TOPICS = 200
DEFAULT_PARTITIONS = 3000
RF2_SHARE = 0.15
RETENTION_SECONDS = 6 * 3600


def generate_fleet(
    clusters: int = 3,
    brokers: int | None = None,
    racks: int = 3,
    topics: int | None = None,
    partitions: int | None = None,
    seed: int = 0,
    snapshot_ts: dt.datetime = DEMO_SNAPSHOT,
) -> dict[str, pd.DataFrame]:
    """The three input tables of a synthetic fleet, as pandas frames (deterministic in ``seed``)."""
    frames: dict[str, list[pd.DataFrame]] = {"brokers": [], "partitions": [], "throughput": []}
    for k in range(clusters):
        rng = np.random.default_rng([seed, k])
        n_brokers = brokers or DEFAULT_BROKERS[k % len(DEFAULT_BROKERS)]
        cluster = _cluster(
            f"cluster-{k + 1}",
            k,
            rng,
            n_brokers,
            racks,
            topics or DEFAULT_TOPICS,
            partitions or DEFAULT_PARTITIONS,
            snapshot_ts,
        )
        for name, frame in cluster.items():
            frames[name].append(frame)
    return {name: pd.concat(parts, ignore_index=True) for name, parts in frames.items()}


def _cluster(
    cluster_id: str,
    k: int,
    rng: np.random.Generator,
    n_brokers: int,
    racks: int,
    n_topics: int,
    n_partitions: int,
    ts: dt.datetime,
) -> dict[str, pd.DataFrame]:
    ids = np.arange(1, n_brokers + 1 + (k % 3 == 1))
    state = np.array(["active"] * len(ids), dtype=object)
    holding = ids.copy()
    if k % 3 == 0:  # a freshly added broker: active, holding nothing yet
        holding = ids[:-1]
    elif k % 3 == 1:  # a dead broker still named in replica lists, its replacement (same rack) holding nothing yet
        holding = ids[:-1]
        state[max(0, len(ids) - 1 - racks)] = "dead"
    brokers = pd.DataFrame(
        {
            "cluster_id": cluster_id,
            "snapshot_ts": ts,
            "broker_id": ids.astype("int32"),
            "rack": [f"az{(b - 1) % racks + 1}" for b in ids],
            "state": state,
            "cores": np.int32(8),
            "weight": None,
            "disk_capacity_bytes": None,
            "max_partitions": None,
            "tags": None,
            "taints": None,
        }
    )
    counts = _topic_partition_counts(rng, n_topics, n_partitions)
    topic_names = np.repeat([f"topic-{t:04d}" for t in range(len(counts))], counts)
    part_nums = np.concatenate([np.arange(c) for c in counts])
    topic_rf = np.where(rng.random(len(counts)) < RF2_SHARE, 2, 3)
    rf = np.repeat(topic_rf, counts)
    replicas = _drifted_replicas(rng, holding, rf)
    # Zipf(1.1)-skewed produce rate per topic, split unevenly over its partitions.
    topic_rate = rng.zipf(1.1, len(counts)).clip(max=10_000).astype(float) * 200.0
    bytes_in = np.repeat(topic_rate / counts, counts) * rng.lognormal(0.0, 0.5, len(rf))
    fanout = np.repeat(rng.integers(1, 4, len(counts)), counts)
    partitions = pd.DataFrame(
        {
            "cluster_id": cluster_id,
            "snapshot_ts": ts,
            "topic": topic_names,
            "partition": part_nums.astype("int32"),
            "replicas": replicas,
            "leader": [r[0] for r in replicas],
            "size_bytes": (bytes_in * RETENTION_SECONDS * rng.uniform(0.2, 1.0, len(rf))).astype("int64"),
            "log_dirs": None,
            "adding_replicas": None,
            "removing_replicas": None,
        }
    )
    throughput = pd.DataFrame(
        {
            "cluster_id": cluster_id,
            "snapshot_ts": ts,
            "topic": topic_names,
            "partition": part_nums.astype("int32"),
            "bytes_in_per_sec": bytes_in,
            "bytes_out_per_sec": bytes_in * fanout,
            "messages_in_per_sec": bytes_in / 1_000,
        }
    )
    return {"brokers": brokers, "partitions": partitions, "throughput": throughput}


def _topic_partition_counts(rng: np.random.Generator, n_topics: int, total: int) -> np.ndarray:
    weights = rng.pareto(1.2, n_topics) + 1.0
    counts: np.ndarray = np.maximum(1, np.round(weights / weights.sum() * total)).astype(int)
    return counts


def _drifted_replicas(rng: np.random.Generator, holding: np.ndarray, rf: np.ndarray) -> list[list[int]]:
    """Replica sets drawn with skewed broker popularity and no rack awareness (Gumbel top-k)."""
    popularity = np.log(rng.dirichlet(np.full(len(holding), 0.7)) + 1e-9)
    out: list[list[int]] = []
    for start in range(0, len(rf), 20_000):
        chunk = rf[start : start + 20_000]
        keys = popularity + rng.gumbel(size=(len(chunk), len(holding)))
        top = np.argsort(-keys, axis=1)[:, : int(rf.max())]
        out.extend(holding[row[:r]].tolist() for row, r in zip(top, chunk))
    return out


class SnapshotCollisionError(ValueError):
    """The warehouse already holds another snapshot of a demo cluster at the demo's time."""


def write_inputs(store: TableStore, fleet: dict[str, pd.DataFrame], fleet_key: str) -> bool:
    """Append the fleet to the input tables once per ``fleet_key`` (a rerun writes nothing).

    Raises :class:`SnapshotCollisionError`, writing nothing, when another fleet
    (other sizes or seed) already wrote a snapshot of the same cluster at the
    same time: two snapshots under one key would fail every later plan.
    """
    from jobs.history import APP_ID_PREFIX

    app_id = f"{APP_ID_PREFIX}-demo/{fleet_key}"
    specs = {"brokers": BROKERS, "partitions": PARTITIONS, "throughput": THROUGHPUT}
    if store.txn_version("partitions", app_id) != 1:
        _refuse_collisions(store, fleet["partitions"])
    wrote = False
    for name, frame in fleet.items():
        if store.txn_version(name, app_id) == 1:
            continue
        df = store.spark.createDataFrame(frame[specs[name].column_names], specs[name].spark_schema())
        store.append(
            name, df, txns={app_id: 1}, metadata={"writer": "partition-planner demo"}, few=len(frame) <= FEW_ROWS
        )
        log.info("demo wrote table=%s rows=%d", name, len(frame))
        wrote = True
    return wrote


def _refuse_collisions(store: TableStore, partitions: pd.DataFrame) -> None:
    if not store.exists("partitions"):
        return
    keys = partitions[["cluster_id", "snapshot_ts"]].drop_duplicates()
    clusters, times = sorted(keys["cluster_id"]), sorted(keys["snapshot_ts"])
    taken = (
        store.read("partitions")
        .where(F.col("cluster_id").isin(clusters) & F.col("snapshot_ts").isin([t.to_pydatetime() for t in times]))
        .select("cluster_id")
        .distinct()
        .collect()
    )
    if taken:
        names = ", ".join(sorted(r["cluster_id"] for r in taken))
        raise SnapshotCollisionError(
            f"warehouse {store.warehouse} already holds a snapshot of {names} at {times[0].isoformat()} from a demo "
            "with other sizes or seed; nothing written. Use a fresh --warehouse, or the same demo options as before"
        )


def fleet_key(args: argparse.Namespace) -> str:
    blob = f"{args.clusters}|{args.brokers}|{args.racks}|{args.topics}|{args.partitions}|{args.seed}"
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--warehouse", required=True, help="folder for the Delta tables (created if missing)")
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--brokers", type=int, help="brokers per cluster (default: 6, 12, 24 in turn)")
    parser.add_argument("--racks", type=int, default=3)
    parser.add_argument("--topics", type=int, default=DEFAULT_TOPICS, help="topics per cluster")
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS, help="partitions per cluster (about)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", help="TOML config for the plan step (default: conf/local.toml)")
    parser.add_argument("--strategy", help="assigner for the plan step")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def main(argv: list[str] | None = None) -> int:
    from jobs import plan
    from jobs.session import get_spark
    from jobs.store import open_store

    parser = add_arguments(
        argparse.ArgumentParser(
            prog="partition-planner demo", allow_abbrev=False, description="Write a synthetic fleet, then plan it."
        )
    )
    args = parser.parse_args(argv)
    for name in ("clusters", "racks", "topics", "partitions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.brokers is not None and args.brokers < 3:
        parser.error("--brokers must be >= 3 (the demo uses replication factor 3)")
    plan.setup_logging(args.log_level)
    spark = get_spark()
    store = open_store(spark, args.warehouse)
    fleet = generate_fleet(args.clusters, args.brokers, args.racks, args.topics, args.partitions, args.seed)
    try:
        wrote = write_inputs(store, fleet, fleet_key(args))
    except SnapshotCollisionError as exc:
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return 2
    if not wrote:
        print("demo inputs already in the warehouse: planning them again", file=sys.stderr)
    plan_argv = ["--warehouse", args.warehouse, "--log-level", args.log_level]
    plan_argv += ["--config", args.config] if args.config else []
    plan_argv += ["--strategy", args.strategy] if args.strategy else []
    return plan.run(plan.add_arguments(argparse.ArgumentParser()).parse_args(plan_argv))


if __name__ == "__main__":
    sys.exit(main())
