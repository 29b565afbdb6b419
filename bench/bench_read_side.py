"""make bench: the read side as an operator runs it, on the demo warehouse (no Spark start).

Each command runs as its own process (imports included, as a user waits for it), interleaved and repeated;
the medians are printed beside the 3 s goal. The demo warehouse is made first when ``--warehouse`` has none.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import record

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "jobs.cli"]
GOAL_SECONDS = 3.0


def commands(warehouse: str, out: str) -> dict[str, list[str]]:
    base = ["--warehouse", warehouse]
    return {
        "export --out-dir (1 cluster)": ["export", *base, "--cluster", "cluster-1", "--out-dir", f"{out}/exec"],
        "export --wave 1 (1 cluster)": [
            "export",
            *base,
            "--cluster",
            "cluster-1",
            "--wave",
            "1",
            "--out",
            f"{out}/w1.json",
        ],
        "status (1 cluster)": ["status", *base, "--cluster", "cluster-1"],
        "report (1 cluster)": ["report", *base, "--cluster", "cluster-1", "--out", f"{out}/report"],
        "report (all 3 clusters)": ["report", *base, "--out", f"{out}/report"],
        "sql (committed plans per cluster)": [
            "sql",
            *base,
            "SELECT cluster_id, count(*) AS n FROM plans_latest GROUP BY cluster_id ORDER BY cluster_id",
        ],
        "sql --as-of-version plans=0": ["sql", *base, "--as-of-version", "plans=0", "SELECT count(*) FROM plans_raw"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", default=str(ROOT / "warehouse"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not (Path(args.warehouse) / "plan_runs").exists():
        print(f"making the demo warehouse at {args.warehouse} ...", flush=True)
        subprocess.run([*CLI, "demo", "--warehouse", args.warehouse, "--log-level", "WARNING"], check=True, cwd=ROOT)
    with tempfile.TemporaryDirectory() as out:
        runs = commands(args.warehouse, out)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, argv in runs.items():
                start = time.perf_counter()
                subprocess.run([*CLI, *argv], check=True, cwd=ROOT, capture_output=True)
                times[name].append(time.perf_counter() - start)
    print(f"read side on {args.warehouse}: median of {args.repeat} runs per command (goal <= {GOAL_SECONDS:g} s)")
    for name, values in times.items():
        median = statistics.median(values)
        verdict = "ok" if median <= GOAL_SECONDS else "over"
        print(f"  {name:<34} {median:6.2f} s  ({median / GOAL_SECONDS:.2f} of the goal, {verdict})")
        record(name, f"{median:.2f} s", f"<= {GOAL_SECONDS:g} s", median <= GOAL_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
