"""``partition-planner import``: one snapshot of a cluster from Kafka's own tool output.

Every file is parsed (:mod:`jobs.kafka_formats`) and joined into the three input tables before anything is
written, so a bad file exits 2 with nothing written. The tables are written with delta-rs (no JVM starts), the
snapshot as one logical step:

* each table's append records a Delta app transaction named after the cluster, the snapshot time and a digest
  of the files, so re-importing the same files at the same time writes nothing (a retried commit);
* ``partitions`` is written last: the planner finds snapshots there (``jobs.inputs.snapshot_catalog``), so it
  never plans from a snapshot whose brokers or throughput rows are missing;
* a crash before ``partitions`` leaves rows no snapshot points to; rerunning the same command completes that
  snapshot (without ``--snapshot-ts``, at the time the interrupted import chose).

Throughput comes from ``--throughput``, else it is estimated from each partition's size growth since the
cluster's previous snapshot (an estimate, and the output says so), else it is absent (the planner plans those
partitions with zero load and notes it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from jobs.kafka_formats import (
    BrokersFile,
    ImportFileError,
    LogDirsFile,
    TopicsFile,
    parse_brokers,
    parse_log_dirs,
    parse_throughput,
    parse_topics,
)
from jobs.units import human_duration
from jobs.warehouse import TableUnreadableError, Warehouse
from schemas import BROKERS, PARTITIONS, THROUGHPUT

USAGE_ERROR = 2
WRITE_ORDER = ("throughput", "brokers", "partitions")  # partitions last: it is what makes the snapshot visible
SPECS = {"brokers": BROKERS, "partitions": PARTITIONS, "throughput": THROUGHPUT}
SHOWN = 5  # ids named in a note; the rest are counted


class ImportCollisionError(Exception):
    """The warehouse already holds another snapshot of the cluster at that time."""


@dataclass(frozen=True)
class Sources:
    """One cluster's files."""

    cluster: str
    topics: str
    brokers: str
    log_dirs: str | None = None
    throughput: str | None = None

    def files(self) -> list[str]:
        return [f for f in (self.topics, self.brokers, self.log_dirs, self.throughput) if f]


@dataclass
class Snapshot:
    """One cluster's snapshot, in the input tables' columns but for ``cluster_id`` and ``snapshot_ts``."""

    cluster: str
    brokers: pd.DataFrame
    partitions: pd.DataFrame
    throughput: pd.DataFrame | None  # measured (--throughput); None: estimate it, if there is an earlier snapshot
    digest: str  # of the files and the fan-out: same digest, same rows
    lines: list[str] = field(default_factory=list)  # what the operator is told


# --- files to frames (no Spark) -----------------------------------------------------------------------------------


def read_snapshot(sources: Sources, fan_out: float) -> Snapshot:
    """Parse and join one cluster's files; :class:`ImportFileError` names the file, line and problem."""
    texts = {path: _read(path) for path in sources.files()}
    topics = parse_topics(texts[sources.topics], sources.topics)
    brokers = parse_brokers(texts[sources.brokers], sources.brokers)
    log_dirs = parse_log_dirs(texts[sources.log_dirs], sources.log_dirs) if sources.log_dirs else None
    measured = parse_throughput(texts[sources.throughput], sources.throughput) if sources.throughput else None
    partitions, partition_lines = join_partitions(topics, log_dirs)
    broker_frame, broker_lines = complete_brokers(brokers, partitions, sources.brokers)
    digest = hashlib.sha256(repr(fan_out).encode())
    for path in sources.files():
        digest.update(hashlib.sha256(texts[path].encode()).digest())
    lines = [
        f"topics: {partitions['topic'].nunique():,} topics, {len(partitions):,} partitions ({topics.form})",
        *topics.notes,
        *partition_lines,
        *_named("offline (Leader: none)", topics.offline),
        *_named(
            "in the middle of a reassignment (imported with Kafka's Adding / Removing Replicas; the planner plans "
            "them from their target, Replicas minus Removing Replicas)",
            topics.reassigning,
        ),
        *broker_lines,
    ]
    if measured is not None:
        lines.append(f"throughput: measured, {len(measured):,} partitions ({sources.throughput})")
        lines += _named(
            "in the throughput file but not in the topics file (kept; the planner ignores them)",
            _missing(measured, partitions),
        )
    return Snapshot(sources.cluster, broker_frame, partitions, measured, digest.hexdigest()[:16], lines)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFileError(path, "", f"cannot be read ({exc.__class__.__name__}: {exc})") from None


def join_partitions(topics: TopicsFile, log_dirs: LogDirsFile | None) -> tuple[pd.DataFrame, list[str]]:
    """The partitions table's rows: sizes and log dirs from the log dirs file when there is one.

    A partition's ``size_bytes`` is its leader's replica (the one followers copy), else its largest replica:
    a follower that lags holds less. ``log_dirs`` is aligned with ``replicas``, None where a replica is not in
    the file (a dead broker's)."""
    partitions = topics.partitions.copy()
    partitions["size_bytes"] = pd.array([None] * len(partitions), dtype="Int64")
    if log_dirs is None:
        return partitions, ["sizes: unknown (no --log-dirs): disk goals and bytes to move are left out"]
    on_disk = {
        (t, p, b): (d, s)
        for t, p, b, d, s in zip(
            log_dirs.replicas["topic"],
            log_dirs.replicas["partition"],
            log_dirs.replicas["broker_id"],
            log_dirs.replicas["log_dir"],
            log_dirs.replicas["size_bytes"],
        )
    }
    used: set[tuple[str, int, int]] = set()
    sizes: list[int | None] = []
    dirs: list[list[str | None] | None] = []
    for topic, partition, replicas, leader in zip(
        partitions["topic"], partitions["partition"], partitions["replicas"], partitions["leader"]
    ):
        found = {b: on_disk[topic, partition, b] for b in replicas if (topic, partition, b) in on_disk}
        used.update((topic, partition, b) for b in found)
        if pd.notna(leader) and int(leader) in found:
            sizes.append(int(found[int(leader)][1]))
        else:
            sizes.append(max((int(s) for _, s in found.values()), default=None))
        dirs.append([found[b][0] if b in found else None for b in replicas] if found else None)
    partitions["size_bytes"] = pd.array(sizes, dtype="Int64")
    partitions["log_dirs"] = dirs
    sized = int(partitions["size_bytes"].notna().sum())
    lines = [
        f"sizes: {sized:,} of {len(partitions):,} partitions, from {log_dirs.replicas['log_dir'].nunique():,} "
        "log dir paths (kafka-log-dirs)",
        *log_dirs.notes,
    ]
    stray = len(on_disk) - len(used)
    if stray:
        lines.append(f"{stray:,} replicas in the log dirs belong to no replica list of the topics file (ignored)")
    return partitions, lines


def complete_brokers(parsed: BrokersFile, partitions: pd.DataFrame, file: str) -> tuple[pd.DataFrame, list[str]]:
    """The brokers table's rows: those the file lists, plus every broker a replica names that it does not, as
    ``dead`` (Kafka lists only brokers that are up; their replicas are the ones to move first)."""
    brokers = parsed.brokers
    listed = set(brokers["broker_id"])
    referenced = {int(b) for replicas in partitions["replicas"] for b in replicas}
    absent = sorted(referenced - listed)
    dead = pd.DataFrame({"broker_id": absent, "rack": None, "state": "dead"})
    if absent:
        brokers = pd.concat([brokers, dead.reindex(columns=brokers.columns)], ignore_index=True)
    brokers = brokers.astype({"broker_id": "int64"}).sort_values("broker_id", kind="stable").reset_index(drop=True)
    live = brokers[brokers["state"] != "dead"]
    lines = [f"brokers: {len(live):,} live of {len(brokers):,} ({parsed.form})", *parsed.notes]
    lines += _named(f"named in replica lists but not in {file}: imported as dead", [str(b) for b in absent])
    racked = live["rack"].notna()
    if racked.any() and not racked.all():
        missing = ", ".join(str(b) for b in live.loc[~racked, "broker_id"])
        raise ImportFileError(
            file,
            "",
            f"brokers {missing} have no rack while the other live brokers have one; the planner needs a "
            "rack on every live broker or on none",
        )
    return brokers, lines


def estimate_throughput(current: pd.DataFrame, previous: pd.DataFrame, seconds: float, fan_out: float) -> pd.DataFrame:
    """Rates from size growth: ``bytes_in = max(0, size now - size before) / seconds``, ``bytes_out = bytes_in x
    fan_out``; partitions without both sizes get no row. Net growth: segments retention deleted in between
    make it a lower bound."""
    keys = ["topic", "partition"]
    both = current[[*keys, "size_bytes"]].merge(previous[[*keys, "size_bytes"]], on=keys, suffixes=("", "_before"))
    both = both[both["size_bytes"].notna() & both["size_bytes_before"].notna()]
    growth = (both["size_bytes"].astype("float64") - both["size_bytes_before"].astype("float64")).clip(lower=0)
    rate = growth / seconds
    return pd.DataFrame(
        {
            "topic": both["topic"].to_numpy(),
            "partition": both["partition"].to_numpy(),
            "bytes_in_per_sec": rate.to_numpy(),
            "bytes_out_per_sec": (rate * fan_out).to_numpy(),
            "messages_in_per_sec": None,
        }
    )


def _missing(rows: pd.DataFrame, partitions: pd.DataFrame) -> list[str]:
    known = set(zip(partitions["topic"], partitions["partition"]))
    return [f"{t}:{p}" for t, p in zip(rows["topic"], rows["partition"]) if (t, p) not in known]


def _named(what: str, ids: list[str]) -> list[str]:
    if not ids:
        return []
    shown = ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN:,} more" if len(ids) > SHOWN else "")
    noun = "partition" if ":" in ids[0] else "broker"
    return [f"{len(ids):,} {noun}{'s' if len(ids) > 1 else ''} {what}: {shown}"]


# --- manifest -----------------------------------------------------------------------------------------------------


def load_manifest(path: str) -> tuple[list[Sources], str | None]:
    """A TOML manifest: optional ``snapshot_ts``, then one ``[[cluster]]`` table per cluster with ``id``,
    ``topics``, ``brokers`` and optional ``log_dirs``, ``throughput`` (paths relative to the manifest)."""
    text = _read(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ImportFileError(path, "", f"not valid TOML ({exc})") from None
    unknown = sorted(set(raw) - {"snapshot_ts", "cluster"})
    clusters = raw.get("cluster")
    if unknown or not isinstance(clusters, list) or not clusters:
        raise ImportFileError(
            path,
            "",
            "expected an optional snapshot_ts and [[cluster]] tables with id, topics, "
            "brokers and optional log_dirs, throughput" + (f"; unknown keys {unknown}" if unknown else ""),
        )
    base = Path(path).parent
    out = []
    for i, entry in enumerate(clusters):
        where = f"[[cluster]] #{i + 1}"
        keys = {"id", "topics", "brokers", "log_dirs", "throughput"}
        if not isinstance(entry, dict) or set(entry) - keys or not {"id", "topics", "brokers"} <= set(entry):
            raise ImportFileError(
                path,
                where,
                f"expected keys id, topics, brokers (optional log_dirs, throughput); "
                f"found {sorted(entry) if isinstance(entry, dict) else entry!r}",
            )
        files = {k: str(base / entry[k]) for k in ("topics", "brokers", "log_dirs", "throughput") if entry.get(k)}
        out.append(Sources(str(entry["id"]), **files))
    ids = [s.cluster for s in out]
    if len(set(ids)) != len(ids):
        raise ImportFileError(path, "", f"a cluster id appears twice in {ids}")
    ts = raw.get("snapshot_ts")
    return out, (ts.isoformat() if isinstance(ts, dt.datetime) else ts)


# --- writing (delta-rs, no Spark) ----------------------------------------------------------------------------------


def app_id(cluster: str, ts: dt.datetime, digest: str) -> str:
    from jobs.history import APP_ID_PREFIX

    return f"{APP_ID_PREFIX}-import/{cluster}/{ts.isoformat()}/{digest}"


def write_snapshot(warehouse: Warehouse, snapshot: Snapshot, ts: dt.datetime | None, fan_out: float) -> list[str]:
    """Write one snapshot (``ts`` None: now, or the time of this import's interrupted earlier run); the lines
    say what was written. Raises :class:`ImportCollisionError`, writing nothing, when other files already
    made a snapshot of the cluster at that time."""
    times = {name: _times(warehouse, name, snapshot.cluster) for name in WRITE_ORDER}  # each table read once
    planned_times = times["partitions"]  # the snapshots the planner sees
    ts = ts or _interrupted(warehouse, snapshot, times) or dt.datetime.now(dt.UTC).replace(microsecond=0)
    txn = app_id(snapshot.cluster, ts, snapshot.digest)
    done = {name: (warehouse.txn_version(name, txn) or 0) >= 1 for name in WRITE_ORDER}
    if all(done.values()):
        return [already_line(snapshot, ts)]
    taken = [n for n in WRITE_ORDER if not done[n] and ts in times[n]]
    if taken:
        tables = f"table {taken[0]} already holds" if len(taken) == 1 else f"tables {', '.join(taken)} already hold"
        raise ImportCollisionError(
            f"{tables} a snapshot of cluster {snapshot.cluster} at {ts.isoformat()} "
            "from other files (or another fan_out); nothing written. Use another --snapshot-ts"
        )
    lines = []
    throughput = snapshot.throughput
    if throughput is None:
        throughput, line = _estimate(warehouse, snapshot, ts, fan_out, planned_times)
        lines.append(line)
    frames = {"throughput": throughput, "brokers": snapshot.brokers, "partitions": snapshot.partitions}
    metadata = {"writer": "partition-planner import", "digest": snapshot.digest}
    for name in WRITE_ORDER:
        if done[name]:
            continue
        frame = frames[name].assign(cluster_id=snapshot.cluster, snapshot_ts=pd.Timestamp(ts))
        spec = SPECS[name]
        # also when empty: the commit records the import
        warehouse.append(spec, frame.astype(object).where(frame.notna(), None), txn, metadata)
        if len(frame):
            lines.append(f"wrote {len(frame):,} rows to table {name}")
    return [f"snapshot {ts.isoformat()} of cluster {snapshot.cluster}", *lines]


def _interrupted(warehouse: Warehouse, snapshot: Snapshot, times: dict[str, set[dt.datetime]]) -> dt.datetime | None:
    """The time of an import of these same files that wrote brokers or throughput but not partitions
    (``times``: each input table's snapshot times of the cluster)."""
    candidates = times["throughput"] | times["brokers"]
    for ts in sorted(candidates - times["partitions"], reverse=True):
        txn = app_id(snapshot.cluster, ts, snapshot.digest)
        if any(warehouse.txn_version(n, txn) for n in ("throughput", "brokers")):
            return ts
    return None


def _times(warehouse: Warehouse, name: str, cluster: str) -> set[dt.datetime]:
    """The snapshot times of a cluster in one input table (none when there is no table)."""
    if not warehouse.exists(name):
        return set()
    stamps = warehouse.frame(name, cluster, columns=["snapshot_ts"])["snapshot_ts"]
    return {pd.Timestamp(t).to_pydatetime() for t in stamps.drop_duplicates()}


def _estimate(
    warehouse: Warehouse, snapshot: Snapshot, ts: dt.datetime, fan_out: float, planned_times: set[dt.datetime]
) -> tuple[pd.DataFrame, str]:
    """Throughput from size growth since the cluster's newest earlier snapshot, and the line that says so."""
    empty = pd.DataFrame(columns=THROUGHPUT.column_names[2:])
    earlier = sorted(t for t in planned_times if t < ts)
    if not earlier:
        return empty, (
            f"throughput: none (no --throughput, and no earlier snapshot of cluster {snapshot.cluster} "
            "to estimate from): the planner gives these partitions zero load"
        )
    before = earlier[-1]
    previous = warehouse.snapshot("partitions", snapshot.cluster, pd.Timestamp(before))
    seconds = (ts - before).total_seconds()
    rates = estimate_throughput(snapshot.partitions, previous[["topic", "partition", "size_bytes"]], seconds, fan_out)
    return rates, (
        f"throughput: ESTIMATED from size growth over {human_duration(seconds)} (since the snapshot of "
        f"{before.isoformat()}) for {len(rates):,} of {len(snapshot.partitions):,} partitions; bytes_out = "
        f"bytes_in x {fan_out:g} ([import] fan_out). Net growth: retention deletes make it a lower bound; "
        "pass --throughput with measured rates when you have them"
    )


# --- command line -------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--warehouse", required=True, help="folder (or URI) of the Delta tables; created if missing")
    parser.add_argument("--cluster", help="cluster id of the snapshot")
    parser.add_argument("--topics", help="kafka-topics.sh --describe output, or a reassignment JSON")
    parser.add_argument("--brokers", help="kafka-broker-api-versions.sh output, or a CSV broker_id,rack[,…]")
    parser.add_argument("--log-dirs", help="kafka-log-dirs.sh --describe output: sizes and log dirs")
    parser.add_argument("--throughput", help="CSV topic,partition,bytes_in_per_sec,bytes_out_per_sec[,…]")
    parser.add_argument("--manifest", help="TOML listing several clusters' files (instead of --cluster …)")
    parser.add_argument("--snapshot-ts", help="snapshot time, ISO 8601 (default: now, UTC)")
    parser.add_argument("--fan-out", type=float, help="bytes_out / bytes_in for estimated rates (default: config)")
    parser.add_argument("--config", help="TOML config (default: conf/local.toml)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="partition-planner import",
            allow_abbrev=False,
            description="Write one snapshot per cluster into the input tables from Kafka's own tool output.",
        )
    )
    args = parser.parse_args(argv)
    single = [args.cluster, args.topics, args.brokers]
    if args.manifest and any(single + [args.log_dirs, args.throughput]):
        parser.error("--manifest lists the files; not with --cluster, --topics, --brokers, --log-dirs, --throughput")
    if not args.manifest and not all(single):
        parser.error("give --cluster, --topics and --brokers (or --manifest)")
    from jobs.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        fan_out = config.import_fan_out if args.fan_out is None else args.fan_out
        if fan_out < 0:
            raise ConfigError("--fan-out must be >= 0")
        if args.manifest:
            sources, manifest_ts = load_manifest(args.manifest)
        else:
            sources = [Sources(args.cluster, args.topics, args.brokers, args.log_dirs, args.throughput)]
            manifest_ts = None
        ts = _parse_ts(args.snapshot_ts or manifest_ts)
        if ts is not None and ts > dt.datetime.now(dt.UTC) + config.max_clock_skew:
            print(
                f"partition-planner: warning: --snapshot-ts {ts.isoformat()} is in the future: plan ignores a "
                "snapshot dated after now plus max_clock_skew until then (--as-of selects it)",
                file=sys.stderr,
            )
        snapshots = [read_snapshot(s, fan_out) for s in sources]  # every file parsed before anything is written
    except (ImportFileError, ConfigError) as exc:
        return _error(exc)
    return _write_all(args.warehouse, config, snapshots, ts, fan_out)


def _write_all(warehouse: str, config: Any, snapshots: list[Snapshot], ts: dt.datetime | None, fan_out: float) -> int:
    """Write each snapshot with delta-rs (no JVM: a rerun or a small cluster takes a second)."""
    code = 0
    tables = Warehouse(warehouse, config.tables)
    for snapshot in snapshots:
        try:
            written = write_snapshot(tables, snapshot, ts, fan_out)
        except ImportCollisionError as exc:
            code = _error(exc)
            continue
        except TableUnreadableError as exc:
            print(f"partition-planner: error: {exc}", file=sys.stderr)
            return 1
        print("\n".join([written[0], *(f"  {line}" for line in snapshot.lines + written[1:])]))
    return code


def already_line(snapshot: Snapshot, ts: dt.datetime) -> str:
    return f"snapshot {ts.isoformat()} of cluster {snapshot.cluster} is already in the warehouse: nothing written"


def _parse_ts(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    try:
        ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ImportFileError(
            "--snapshot-ts", "", f"expected an ISO 8601 time like 2026-11-24T10:00:00Z, found {text!r}"
        ) from None
    return ts.replace(tzinfo=dt.UTC) if ts.tzinfo is None else ts.astimezone(dt.UTC)


def _error(exc: Exception) -> int:
    print(f"partition-planner: error: {exc}", file=sys.stderr)
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
