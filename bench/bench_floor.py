"""make bench: small fleets against the Spark floor (issue 40, acceptance 1).

The floor: a local SparkSession (the job's own settings, jobs.session) that runs one ``applyInPandas`` over 20
rows and stops, as its own process; a session that only starts and stops splits it into start-up and first
job. Beside it, each as an operator runs it, in the same minutes, interleaved: ``plan --dry-run`` of one
20-partition cluster and of the demo fleet, ``plan`` of the demo fleet writing its first versions, ``sql`` of
a small query and ``report`` of the demo fleet. Each median is printed with its ratio to the floor and its
target.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from figures import record

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "jobs.cli"]
FLOOR = """
import pandas as pd
from jobs.session import get_spark
spark = get_spark("floor")
df = spark.createDataFrame(pd.DataFrame({"k": [i % 2 for i in range(20)], "v": range(20)}))
df.groupBy("k").applyInPandas(lambda pdf: pdf, schema="k long, v long").collect()
spark.stop()
"""
SESSION_ONLY = """
from jobs.session import get_spark
get_spark("floor").stop()
"""
SMALL_QUERY = "SELECT status, count(*) AS n FROM plan_runs GROUP BY status"
# name -> (target ratio to the floor or None, target seconds or None)
TARGETS = {
    "plan --dry-run, one 20-partition cluster": (1.25, None),
    "plan --dry-run, demo fleet (3 clusters)": (1.6, None),
    "plan, demo fleet into fresh outputs (writes)": (1.6, None),
    "sql, a small query": (0.3, 3.0),
    "report, demo fleet": (None, 3.0),
}


def inputs_only(warehouse: str, to: str) -> None:
    """A copy of the warehouse's snapshots without any plan: a run there plans (and writes) its first versions."""
    shutil.rmtree(to, ignore_errors=True)
    for name in ("brokers", "partitions", "throughput"):
        shutil.copytree(f"{warehouse}/{name}", f"{to}/{name}")


def timed(argv: list[str], before: Callable[[], None] | None = None) -> float:
    if before is not None:
        before()
    start = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tiny, demo, out = f"{tmp}/tiny", f"{tmp}/demo", f"{tmp}/report"
        quiet = ["--log-level", "WARNING"]
        demo_args = {tiny: ["--clusters", "1", "--topics", "2", "--partitions", "20"], demo: []}
        for warehouse, extra in demo_args.items():
            subprocess.run(
                [*CLI, "demo", "--warehouse", warehouse, *extra, *quiet], check=True, cwd=ROOT, capture_output=True
            )
        fresh = {name: f"{tmp}/{name}-inputs" for name in ("tiny", "demo")}
        for name, source in (("tiny", tiny), ("demo", demo)):
            inputs_only(source, fresh[name])  # planned, the dry runs would find their work done and plan nothing

        dry = [*quiet, "--dry-run"]
        runs = {
            "floor: SparkSession + applyInPandas of 20 rows": [sys.executable, "-c", FLOOR],
            "session only": [sys.executable, "-c", SESSION_ONLY],
            "plan --dry-run, one 20-partition cluster": [*CLI, "plan", "--warehouse", fresh["tiny"], *dry],
            "plan --dry-run, demo fleet (3 clusters)": [*CLI, "plan", "--warehouse", fresh["demo"], *dry],
            "plan, demo fleet into fresh outputs (writes)": [*CLI, "plan", "--warehouse", f"{tmp}/writes", *quiet],
            "sql, a small query": [*CLI, "sql", "--warehouse", demo, SMALL_QUERY],
            "report, demo fleet": [*CLI, "report", "--warehouse", demo, "--out", out],
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, argv in runs.items():
                writes = "writes" in name
                times[name].append(timed(argv, (lambda: inputs_only(demo, f"{tmp}/writes")) if writes else None))
    medians = {name: statistics.median(values) for name, values in times.items()}
    floor = medians.pop("floor: SparkSession + applyInPandas of 20 rows")
    session = medians.pop("session only")
    print(f"\nsmall fleets against the Spark floor (median of {args.repeat}, interleaved): floor {floor:.1f} s")
    record("the Spark floor: a session and one applyInPandas of 20 rows", f"{floor:.1f} s (start-up {session:.1f} s)")
    tiny = medians["plan --dry-run, one 20-partition cluster"]
    print(
        f"  where the 20-partition plan's {tiny:.1f} s go: Python, the JVM and a SparkSession {session:.1f} s; "
        f"the first applyInPandas job (Python workers) {floor - session:.1f} s; the plan job's own work "
        f"(snapshots, inputs, planning, its output) {tiny - floor:.1f} s"
    )
    for name, seconds in medians.items():
        ratio_target, seconds_target = TARGETS[name]
        ok = (ratio_target is None or seconds / floor <= ratio_target) and (
            seconds_target is None or seconds <= seconds_target
        )
        goal = " and ".join(
            g
            for g in (
                f"<= {ratio_target:g}x the floor" if ratio_target else "",
                f"<= {seconds_target:g} s" if seconds_target else "",
            )
            if g
        )
        verdict = "ok" if ok else "OVER"
        print(f"  {name:<46} {seconds:6.1f} s  {seconds / floor:5.2f}x the floor  (goal {goal}: {verdict})")
        record(name, f"{seconds:.1f} s, {seconds / floor:.2f}x the floor", goal, ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
