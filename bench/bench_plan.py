"""make bench: end-to-end plan time vs a bare read of the inputs plus a write of as many rows.

The demo fleet scaled to ~100k partitions is written once; then, interleaved
and repeated, (a) the full plan job on fresh output tables and (b) the bare
I/O floor: read the three input tables and write the same number of plans,
moves and plan_runs rows through the same table store. Medians and their
ratio are printed beside ``--goal``, with the peak memory of the job's
processes (driver, JVM, Python workers). Machines here are noisy: compare
ratios measured in one run, not absolute seconds across runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from figures import record  # noqa: E402

from jobs.config import Config  # noqa: E402
from jobs.demo import generate_fleet, write_inputs  # noqa: E402
from jobs.pipeline import run_plan  # noqa: E402
from jobs.session import get_spark  # noqa: E402
from jobs.store import FEW_ROWS, open_store  # noqa: E402
from schemas import MOVES, PLAN_RUNS, PLANS  # noqa: E402

OUTPUTS = ("plans", "moves", "plan_runs")


def reset_outputs(warehouse: Path) -> None:
    for name in (*OUTPUTS, "floor_plans", "floor_moves", "floor_runs"):
        shutil.rmtree(warehouse / name, ignore_errors=True)


class PeakMemory:
    """The peak resident memory of this process and its descendants (the JVM, its Python workers), sampled from
    /proc every ``every`` seconds while the block runs (Linux)."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.peak, self._stop = every, 0, threading.Event()

    def __enter__(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, tree_rss(os.getpid()))


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and every descendant."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier and p not in tree]
        tree.update(frontier)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


def time_plan(spark, warehouse: Path) -> tuple[float, dict[str, int]]:
    store = open_store(spark, str(warehouse))
    start = time.perf_counter()
    report = run_plan(spark, store, Config())
    elapsed = time.perf_counter() - start
    assert all(o.status == "committed" for o in report.outcomes), [o.error for o in report.outcomes]
    counts = {name: store.read(name).count() for name in OUTPUTS}
    return elapsed, counts


def time_floor(spark, warehouse: Path, counts: dict[str, int], few: bool) -> float:
    """Read every input row, then write as many plan/move/run rows as the job does (``few``: from the driver,
    as the job writes a small fleet's)."""
    store = open_store(
        spark,
        str(warehouse),
        {
            "plans": str(warehouse / "floor_plans"),
            "moves": str(warehouse / "floor_moves"),
            "plan_runs": str(warehouse / "floor_runs"),
        },
    )
    start = time.perf_counter()
    parts = store.read("partitions")
    joined = parts.join(store.read("throughput"), on=["cluster_id", "snapshot_ts", "topic", "partition"], how="left")
    brokers = store.read("brokers").count()
    plans = joined.select(
        "cluster_id",
        F.lit(1).cast("long").alias("plan_version"),
        F.lit("floor").alias("run_id"),
        "snapshot_ts",
        F.lit("none").alias("strategy"),
        "topic",
        "partition",
        "replicas",
        F.col("replicas")[0].alias("leader"),
        F.col("bytes_in_per_sec").alias("load"),
        F.lit(1).cast("long").alias("epoch"),
        F.lit(None).cast("array<int>").alias("cores"),
    ).select(PLANS.column_names)
    store.append("plans", plans, few=few)
    moves = (
        plans.limit(counts["moves"])
        .select(
            "cluster_id",
            "plan_version",
            "run_id",
            "topic",
            "partition",
            F.lit("reassign").alias("kind"),
            F.col("replicas").alias("from_replicas"),
            F.col("replicas").alias("to_replicas"),
            F.col("leader").alias("from_leader"),
            F.col("leader").alias("to_leader"),
            F.col("replicas").alias("added_brokers"),
            F.array().cast("array<int>").alias("removed_brokers"),
            F.lit(0).cast("long").alias("bytes_to_move"),
            F.lit(1).alias("wave"),
            "epoch",
        )
        .select(MOVES.column_names)
    )
    store.append("moves", moves, few=few)
    runs = spark.createDataFrame([], PLAN_RUNS.spark_schema()).unionByName(
        plans.groupBy("cluster_id")
        .agg(F.count("*").alias("partitions"))
        .select(
            *[
                F.col(c) if c in ("cluster_id", "partitions") else F.lit(None).cast(t).alias(c)
                for c, t in ((f.name, f.dataType) for f in PLAN_RUNS.spark_schema().fields)
            ]
        )
    )
    store.append(
        "plan_runs", runs.withColumn("status", F.lit("committed")).withColumn("run_id", F.lit("floor")), few=True
    )
    elapsed = time.perf_counter() - start
    assert brokers > 0
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=100_000, help="partitions in the whole fleet")
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (JVM JIT, Python workers)")
    parser.add_argument("--goal", type=float, default=2.0, help="the ratio plan / (read+write) to meet")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = get_spark(app_name="partition-planner-bench")
    with tempfile.TemporaryDirectory(prefix="pp-bench-") as tmp:
        warehouse = Path(tmp) / "warehouse"
        per_cluster = args.partitions // args.clusters
        fleet = generate_fleet(clusters=args.clusters, topics=max(200, per_cluster // 30), partitions=per_cluster)
        write_inputs(open_store(spark, str(warehouse)), fleet, "bench")
        n_parts = len(fleet["partitions"])
        few = n_parts <= FEW_ROWS
        print(
            f"fleet: {args.clusters} clusters, {len(fleet['brokers'])} brokers, {n_parts} partitions, "
            f"{int(fleet['partitions']['replicas'].map(len).sum())} replicas"
        )
        # warm-up: JVM (its JIT keeps speeding both sides up for a few rounds), Python workers, pandas UDFs
        for _ in range(args.warmup):
            reset_outputs(warehouse)
            _, counts = time_plan(spark, warehouse)
            reset_outputs(warehouse)
            time_floor(spark, warehouse, counts, few)
        plan_times, floor_times, peaks = [], [], []
        for i in range(args.repeat):
            reset_outputs(warehouse)
            with PeakMemory() as memory:
                plan_s, counts = time_plan(spark, warehouse)
            reset_outputs(warehouse)
            floor_s = time_floor(spark, warehouse, counts, few)
            plan_times.append(plan_s)
            peaks.append(memory.peak)
            floor_times.append(floor_s)
            print(f"  run {i + 1}: plan {plan_s:.2f}s  read+write floor {floor_s:.2f}s  ratio {plan_s / floor_s:.2f}")
        plan_med, floor_med = statistics.median(plan_times), statistics.median(floor_times)
        written = " ".join(f"{name}={n}" for name, n in counts.items())
        print(f"rows written per plan run: {written}")
        print(f"median end-to-end plan: {plan_med:.2f}s")
        print(f"median bare read+write: {floor_med:.2f}s")
        ratio = plan_med / floor_med
        verdict = "ok" if ratio <= args.goal else "OVER"
        print(f"ratio plan / (read+write): {ratio:.2f}  (goal <= {args.goal:g}: {verdict})")
        peak = max(peaks) / 2**30
        print(f"peak memory of the job's processes (driver, JVM, Python workers): {peak:.2f} GiB")
        record(
            f"plan, {n_parts:,} partitions in {args.clusters} clusters, end to end against bare read + write",
            f"{plan_med:.1f} s vs {floor_med:.1f} s: {ratio:.2f}x; peak {peak:.1f} GiB",
            f"<= {args.goal:g}x",
            ratio <= args.goal,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
