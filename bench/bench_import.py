"""make bench: ``import`` on the tool output of a 100,000-partition cluster and of a 20-partition one, and
the wall time of a usage error.

The files are what Kafka's tools print for a seeded demo-style cluster (``tests/kafka_samples``): describe,
api-versions, log dirs, and a throughput CSV. Printed: the median of the parse-and-join step (in this process),
then the whole command as an operator runs it (own process; no JVM starts, delta-rs writes the tables), first
into an empty warehouse and then again with the same files (which writes nothing); then, medians of a few runs
each, the import of a 20-partition cluster and three usage errors (``plan`` with an empty ``--run-id`` or an
unknown ``--cluster``, ``sql`` on tables plan has not written), each its own process: what an operator waits for
a small cluster or a typo. No goal is set; the figures say where the time goes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from figures import record  # noqa: E402

from jobs.demo import generate_fleet  # noqa: E402
from jobs.importer import Sources, read_snapshot  # noqa: E402
from tests import kafka_samples  # noqa: E402


def write_files(folder: Path, partitions: int) -> Sources:
    fleet = generate_fleet(clusters=1, brokers=60, topics=500, partitions=partitions, seed=1)
    parts, brokers = fleet["partitions"], fleet["brokers"]
    texts = {
        "topics.txt": kafka_samples.describe(parts, brokers),
        "brokers.txt": kafka_samples.api_versions(brokers),
        "log-dirs.txt": kafka_samples.log_dirs(parts, brokers),
        "rates.csv": kafka_samples.throughput_csv(fleet["throughput"]),
    }
    for name, text in texts.items():
        (folder / name).write_text(text)
    return Sources(*(["big"] + [str(folder / n) for n in texts]))


def timed(argv: list[str], expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True)
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}, not {expect}: {done.stderr.decode()[-400:]}")
    return time.perf_counter() - start


def small_and_wrong(folder: Path, repeat: int) -> None:
    """The import of a 20-partition cluster and three usage errors, each a process of its own (medians)."""
    fleet = generate_fleet(clusters=1, brokers=6, topics=4, partitions=20, seed=2)
    parts, brokers = fleet["partitions"], fleet["brokers"]
    (folder / "t.txt").write_text(kafka_samples.describe(parts, brokers))
    (folder / "b.txt").write_text(kafka_samples.api_versions(brokers))
    cli = [sys.executable, "-m", "jobs.cli"]
    wh = str(folder / "small-wh")
    runs: dict[str, list[float]] = {"import, 20 partitions": [], "plan --run-id ''": [], "plan --cluster nope": []}
    runs["sql on tables not written"] = []
    for k in range(repeat):
        argv = [*cli, "import", "--warehouse", wh, "--cluster", "small", "--topics", str(folder / "t.txt")]
        argv += ["--brokers", str(folder / "b.txt"), "--snapshot-ts", f"2026-11-24T00:0{k}:00Z"]
        runs["import, 20 partitions"].append(timed(argv, 0))
        runs["plan --run-id ''"].append(timed([*cli, "plan", "--warehouse", wh, "--run-id", ""], 2))
        runs["plan --cluster nope"].append(timed([*cli, "plan", "--warehouse", wh, "--cluster", "nope"], 2))
        runs["sql on tables not written"].append(timed([*cli, "sql", "--warehouse", wh, "SELECT * FROM plans"], 2))
    print(f"\nsmall cluster and usage errors, whole commands (own process, no JVM), median of {repeat}")
    for name, seconds in runs.items():
        print(f"  {name:<28} {statistics.median(seconds):6.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sources = write_files(folder, args.partitions)
        size = sum(Path(f).stat().st_size for f in sources.files()) / 1e6
        parse = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            snapshot = read_snapshot(sources, 1.0)
            parse.append(time.perf_counter() - start)
        argv = [sys.executable, "-m", "jobs.cli", "import", "--warehouse", str(folder / "wh"), "--cluster", "big"]
        argv += ["--topics", sources.topics, "--brokers", sources.brokers, "--log-dirs", str(sources.log_dirs)]
        argv += ["--throughput", str(sources.throughput), "--snapshot-ts", "2026-11-24T00:00:00Z"]
        whole = []
        for _ in range(2):  # the second run finds the snapshot written: nothing to write
            start = time.perf_counter()
            subprocess.run(argv, check=True, cwd=ROOT, capture_output=True)
            whole.append(time.perf_counter() - start)
    print(f"\nimport of {len(snapshot.partitions):,} partitions ({size:.0f} MB of Kafka tool output)")
    print(f"  parse and join (no Spark)      median {statistics.median(parse):6.2f} s of {args.repeat}")
    print(f"  import command, empty warehouse       {whole[0]:6.2f} s (delta-rs, no JVM)")
    print(f"  import command, same files again      {whole[1]:6.2f} s (writes nothing)")
    record(f"import of {len(snapshot.partitions):,} partitions (whole command, no JVM)", f"{whole[0]:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        small_and_wrong(Path(tmp), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
