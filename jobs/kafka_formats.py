"""Kafka's own tool output, parsed: what ``partition-planner import`` reads.

Text in, pandas out; no Spark, no file or clock access. Every problem is an :class:`ImportFileError` naming
the file, the line (or JSON path) and what was expected, so a bad file fails before anything is written.

The formats, as Kafka's tools print them (``org.apache.kafka.tools``):

* ``kafka-topics.sh --describe`` (``TopicCommand``): per topic a header line
  ``Topic: t<TAB>TopicId: …<TAB>PartitionCount: N<TAB>ReplicationFactor: R<TAB>Configs: …``, then per
  partition ``<TAB>Topic: t<TAB>Partition: p<TAB>Leader: b|none<TAB>Replicas: b,b<TAB>Isr: b,b``, plus
  ``Adding Replicas`` / ``Removing Replicas`` during a reassignment, ``Elr`` / ``LastKnownElr`` since 3.7
  and ``MarkedForDeletion``.
* Reassignment JSON (``kafka-reassign-partitions.sh``): ``{"version":1,"partitions":[{"topic","partition",
  "replicas"[,"log_dirs"]}]}``; ``--generate`` prints the current one after "Current partition replica
  assignment".
* ``kafka-broker-api-versions.sh`` (``BrokerApiVersionsCommand``): per broker that answered
  ``host:port (id: N rack: R) -> (`` (Kafka 4: ``… rack: R isFenced: false) -> (``), API lines, ``)``;
  one that did not answer prints ``… -> ERROR: …``.
* ``kafka-log-dirs.sh --describe`` (``LogDirsCommand``): two informational lines, then
  ``{"version":1,"brokers":[{"broker":N,"logDirs":[{"logDir","error","partitions":[{"partition":"<topic>-<n>",
  "size","offsetLag","isFuture"}]}]}]}``.
* CSV with a header: brokers (``broker_id,rack[,state,cores,weight,disk_capacity_bytes,max_partitions]``) and
  throughput (``topic,partition,bytes_in_per_sec,bytes_out_per_sec[,messages_in_per_sec]``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")  # Kafka's legal topic names (Topic.validate)
STATES = ("active", "draining", "dead")
IN_FLIGHT_COLUMNS = ("adding_replicas", "removing_replicas")  # a reassignment in flight (KIP-455), else None


class ImportFileError(ValueError):
    """A file that cannot be imported: which file, where in it, and what was expected there."""

    def __init__(self, file: str, where: str, message: str) -> None:
        super().__init__(f"{file}: {where}: {message}" if where else f"{file}: {message}")


@dataclass(frozen=True)
class TopicsFile:
    """The partitions of a topics file: ``topic, partition, replicas, leader, log_dirs, adding_replicas,
    removing_replicas`` (leader None: offline; log_dirs only from a reassignment JSON that has them; the last two
    only for a partition in the middle of a reassignment, whose ``replicas`` is Kafka's union of both ends)."""

    partitions: pd.DataFrame
    form: str
    offline: list[str] = field(default_factory=list)
    reassigning: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BrokersFile:
    """The brokers a brokers file lists, in the ``brokers`` table's columns (no cluster or time)."""

    brokers: pd.DataFrame
    form: str
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LogDirsFile:
    """Current replicas on disk: ``broker_id, topic, partition, log_dir, size_bytes`` (future replicas of an
    intra-broker move are left out), and notes on log dirs that reported an error."""

    replicas: pd.DataFrame
    notes: list[str] = field(default_factory=list)


# --- kafka-topics.sh --describe, or a reassignment JSON ---------------------------------------------------------

_DESCRIBE_KEYS = (
    *("Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs", "Partition", "Leader", "Replicas"),
    *("Isr", "Adding Replicas", "Removing Replicas", "Elr", "LastKnownElr", "MarkedForDeletion", "Offline"),
)
_KEY = re.compile(r"(?:^|(?<=\s))(" + "|".join(sorted(map(re.escape, _DESCRIBE_KEYS), key=len, reverse=True)) + "):")
_GENERATE_MARK = "Current partition replica assignment"


def parse_topics(text: str, file: str) -> TopicsFile:
    """A topics file of either form, told apart by its content."""
    if not text.strip():
        raise ImportFileError(file, "", "empty file; expected kafka-topics.sh --describe output or a reassignment JSON")
    if text.lstrip().startswith("{") or _GENERATE_MARK in text:
        return _reassignment_json(text, file)
    if re.search(r"(?:^|\s)Partition:", text):
        return _describe(text, file)
    raise ImportFileError(
        file,
        "line 1",
        "unknown format: expected kafka-topics.sh --describe output (lines 'Topic: … Partition: … Leader: … "
        'Replicas: …\') or a reassignment JSON ({"version":1,"partitions":[…]})',
    )


def _fields(line: str) -> dict[str, str]:
    """``Key: value`` cells of a describe line. Kafka separates cells by tabs (keys it added later are kept
    too); text copied from a terminal may have spaces instead, then the known keys split it."""
    body = line.strip()
    if "\t" in body:
        cells = [c.strip() for c in body.split("\t") if c.strip()]
        if all(":" in c for c in cells):
            return {k.strip(): v.strip() for k, _, v in (c.partition(":") for c in cells)}
    out: dict[str, str] = {}
    matches = list(_KEY.finditer(body))
    for i, m in enumerate(matches):
        end = len(body) if m.group(1) == "Configs" or i + 1 == len(matches) else matches[i + 1].start()
        out.setdefault(m.group(1), body[m.end() : end].strip())
        if m.group(1) == "Configs":  # free text to the end of the line
            break
    return out


def _describe(text: str, file: str) -> TopicsFile:
    rows: list[tuple[str, int, list[int], int | None, list[int] | None, list[int] | None]] = []
    first_seen: dict[tuple[str, int], int] = {}
    headers: dict[str, _Header] = {}
    offline: list[str] = []
    reassigning: list[str] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        cells = _fields(line)
        if "Partition" in cells:
            _cut_short(text, number, len(lines), file)
            topic = _topic_name(cells.get("Topic"), file, where)
            partition = _whole(cells["Partition"], file, where, "Partition")
            key = (topic, partition)
            if key in first_seen:
                raise ImportFileError(
                    file, where, f"partition {topic}:{partition} listed twice (also line {first_seen[key]})"
                )
            first_seen[key] = number
            if "Replicas" not in cells:
                raise ImportFileError(file, where, "no 'Replicas:' cell in this partition line (truncated file?)")
            replicas = _broker_list(cells["Replicas"], file, where, "Replicas")
            leader = _leader(cells.get("Leader"), replicas, file, where)
            if leader is None:
                offline.append(f"{topic}:{partition}")
            adding, removing = _in_flight(cells, replicas, file, where)
            if adding or removing:
                reassigning.append(f"{topic}:{partition}")
            _check_replication_factor(headers.get(topic), topic, partition, replicas, adding, removing, file, where)
            rows.append((topic, partition, replicas, leader, adding, removing))
        elif "Topic" in cells and ("PartitionCount" in cells or "Configs" in cells):
            topic = _topic_name(cells["Topic"], file, where)
            count = cells.get("PartitionCount")
            rf = cells.get("ReplicationFactor")
            if count is not None:
                headers[topic] = _Header(
                    number,
                    _whole(count, file, where, "PartitionCount"),
                    None if rf is None else _whole(rf, file, where, "ReplicationFactor"),
                )
        else:
            raise ImportFileError(
                file,
                where,
                f"expected a topic line ('Topic: … PartitionCount: …') or a partition line "
                f"('Topic: … Partition: … Leader: … Replicas: …'), found {_shown(line)}",
            )
    _check_counts(headers, first_seen, file)
    frame = pd.DataFrame(rows, columns=["topic", "partition", "replicas", "leader", *IN_FLIGHT_COLUMNS])
    frame["leader"] = frame["leader"].astype("Int64")
    frame["log_dirs"] = None
    notes = (
        []
        if headers
        else [
            "no topic header lines: if describe ran with a filter (--under-replicated-partitions, "
            "--unavailable-partitions, ...), the snapshot holds only the partitions it printed"
        ]
    )
    return TopicsFile(frame, "kafka-topics --describe", offline, reassigning, notes)


@dataclass(frozen=True)
class _Header:
    """A topic's header line: where it is, its PartitionCount and its ReplicationFactor (None: not printed)."""

    line: int
    partitions: int
    replication_factor: int | None


def _cut_short(text: str, number: int, last: int, file: str) -> None:
    """Kafka ends every line it prints with a line break: a last partition line without one was cut (its replica
    list may have lost brokers without looking wrong)."""
    if number == last and not text.endswith(("\n", "\r")):
        raise ImportFileError(
            file,
            f"line {number}",
            "the file ends inside this partition line (no line break after it): truncated file? "
            "Kafka's output ends every line with one",
        )


def _in_flight(
    cells: dict[str, str], replicas: list[int], file: str, where: str
) -> tuple[list[int] | None, list[int] | None]:
    """``Adding Replicas`` / ``Removing Replicas`` of a partition being reassigned (None when absent): Kafka
    lists both inside ``Replicas`` (KIP-455), so each must be a subset of it."""
    out: list[list[int] | None] = []
    for name in ("Adding Replicas", "Removing Replicas"):
        value = cells.get(name, "").strip()
        brokers = _broker_list(value, file, where, name) if value else None
        stray = sorted(set(brokers or []) - set(replicas))
        if stray:
            raise ImportFileError(
                file, where, f"{name}: {_ids(stray)} not among Replicas: {_ids(replicas)} (Kafka lists both there)"
            )
        out.append(brokers)
    adding, removing = out
    if removing is not None and len(removing) >= len(replicas):
        raise ImportFileError(file, where, f"Removing Replicas: {_ids(removing)} would leave no replica")
    return adding, removing


def _check_replication_factor(
    header: _Header | None,
    topic: str,
    partition: int,
    replicas: list[int],
    adding: list[int] | None,
    removing: list[int] | None,
    file: str,
    where: str,
) -> None:
    """A partition line's replica count against its topic header's ReplicationFactor: a line cut inside its
    replica list would otherwise lower the partition's replication factor without a word. Mid-reassignment,
    Kafka's header counts the replicas before it (Replicas minus Adding); the target (minus Removing) may
    differ only where the reassignment changes the factor."""
    if header is None or header.replication_factor is None:
        return
    rf = header.replication_factor
    origin = len(replicas) - len(adding or [])
    target = len(replicas) - len(removing or [])
    moving = bool(adding or removing)
    if (rf in (origin, target)) if moving else len(replicas) == rf:
        return
    counted = f"{len(replicas)} broker{'s' if len(replicas) != 1 else ''}"
    if moving:
        counted += f" ({target} after the reassignment in flight, {origin} before it)"
    raise ImportFileError(
        file,
        where,
        f"partition {topic}:{partition}: Replicas: {_ids(replicas)} lists {counted}, but the topic's header "
        f"(line {header.line}) says ReplicationFactor: {rf}; truncated line? (a topic whose partitions really "
        "differ in replication factor imports from a reassignment JSON)",
    )


def _ids(brokers: list[int]) -> str:
    return ",".join(map(str, brokers))


def _check_counts(headers: dict[str, _Header], seen: dict[tuple[str, int], int], file: str) -> None:
    """A topic's header says how many partitions follow: fewer means the file was cut short."""
    found: dict[str, int] = {}
    for topic, _ in seen:
        found[topic] = found.get(topic, 0) + 1
    for topic, header in headers.items():
        if found.get(topic, 0) != header.partitions:
            raise ImportFileError(
                file,
                f"line {header.line}",
                f"topic {topic}: its header says PartitionCount: {header.partitions}, but {found.get(topic, 0)} "
                "partition lines are in the file (truncated, or describe run with a filter?)",
            )


def _leader(text: str | None, replicas: list[int], file: str, where: str) -> int | None:
    if text is None:
        raise ImportFileError(file, where, "no 'Leader:' cell in this partition line")
    if text in ("none", "-1"):  # offline; Kafka before 2.8 printed -1
        return None
    leader = _whole(text, file, where, "Leader")
    if leader not in replicas:
        raise ImportFileError(file, where, f"Leader: {leader} is not among Replicas: {','.join(map(str, replicas))}")
    return leader


def _reassignment_json(text: str, file: str) -> TopicsFile:
    body, offset = text, 0
    if _GENERATE_MARK in text:  # the whole output of --generate: the current assignment is the first JSON after it
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if _GENERATE_MARK in line)
        found = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("{")), None)
        if found is None:
            raise ImportFileError(file, f"line {start + 1}", f"no JSON after '{_GENERATE_MARK}' (truncated file?)")
        body, offset = lines[found], found
    data = _load_json(body, file, offset)
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise ImportFileError(file, "JSON $", 'expected {"version":1,"partitions":[{"topic","partition","replicas"}]}')
    if data.get("version", 1) != 1:
        raise ImportFileError(file, "JSON $.version", f"expected 1, found {data['version']!r}")
    rows: list[tuple[str, int, list[int], int, list[str | None] | None]] = []
    first_seen: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(data["partitions"]):
        path = f"JSON $.partitions[{i}]"
        if not isinstance(entry, dict):
            raise ImportFileError(file, path, 'expected {"topic","partition","replicas"}')
        topic = _topic_name(entry.get("topic"), file, f"{path}.topic")
        partition = _json_int(entry.get("partition"), file, f"{path}.partition", "a partition number")
        if (topic, partition) in first_seen:
            raise ImportFileError(
                file,
                path,
                f"partition {topic}:{partition} listed twice (also $.partitions[{first_seen[topic, partition]}])",
            )
        first_seen[topic, partition] = i
        replicas = _json_brokers(entry.get("replicas"), file, f"{path}.replicas")
        rows.append((topic, partition, replicas, replicas[0], _json_log_dirs(entry, len(replicas), file, path)))
    frame = pd.DataFrame(rows, columns=["topic", "partition", "replicas", "leader", "log_dirs"])
    frame["leader"] = frame["leader"].astype("Int64")
    for column in IN_FLIGHT_COLUMNS:
        frame[column] = None
    return TopicsFile(frame, "reassignment JSON")


def _json_brokers(value: Any, file: str, path: str) -> list[int]:
    if not isinstance(value, list) or not value:
        raise ImportFileError(file, path, f"expected a non-empty list of broker ids, found {_shown(value)}")
    brokers = [_json_int(b, file, f"{path}[{k}]", "a broker id") for k, b in enumerate(value)]
    if len(set(brokers)) != len(brokers):
        raise ImportFileError(file, path, f"a broker appears twice in {brokers}")
    return brokers


def _json_log_dirs(entry: dict[str, Any], n: int, file: str, path: str) -> list[str | None] | None:
    dirs = entry.get("log_dirs")
    if dirs is None:
        return None
    if not isinstance(dirs, list) or len(dirs) != n or not all(isinstance(d, str) for d in dirs):
        raise ImportFileError(file, f"{path}.log_dirs", f'expected {n} strings, one per replica (or "any")')
    return [None if d == "any" else d for d in dirs]


# --- brokers: kafka-broker-api-versions.sh, or CSV --------------------------------------------------------------

_NODE = re.compile(
    r"^(?P<node>\S+) \(id: (?P<id>\S+) rack: (?P<rack>.*?)(?: isFenced: (?P<fenced>\S+))?\) -> (?P<rest>.*)$"
)
_BROKER_COLUMNS = {
    "broker_id": int,
    "rack": str,
    "state": str,
    "cores": int,
    "weight": float,
    "disk_capacity_bytes": int,
    "max_partitions": int,
    "tags": str,  # placement tags "key=value;key=value" (optional columns of the CSV)
    "taints": str,
}


def parse_brokers(text: str, file: str) -> BrokersFile:
    """A brokers file of either form, told apart by its first line."""
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    if _NODE.match(first.strip()):
        return _api_versions(lines, file)
    if "broker_id" in first:
        return _brokers_csv(text, file)
    raise ImportFileError(
        file,
        "line 1",
        "unknown format: expected kafka-broker-api-versions.sh output ('host:port (id: N rack: R) -> (') or a CSV "
        "with a header starting broker_id,rack" + ("" if first.strip() else " (the file is empty)"),
    )


def _api_versions(lines: list[str], file: str) -> BrokersFile:
    rows: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    notes: list[str] = []
    open_block: int | None = None
    for number, line in enumerate(lines, start=1):
        where = f"line {number}"
        node = _NODE.match(line.strip())
        if node and open_block is None:
            broker = _whole(node["id"], file, where, "id")
            if broker in seen:
                raise ImportFileError(file, where, f"broker {broker} listed twice (also line {seen[broker]})")
            seen[broker] = number
            state = "active"
            if node["fenced"] not in (None, "true", "false"):
                raise ImportFileError(file, where, f"isFenced: expected true or false, found {node['fenced']!r}")
            if node["fenced"] == "true":
                state = "dead"
                notes.append(f"broker {broker} is fenced (isFenced: true): imported as dead")
            if node["rest"].startswith("ERROR"):
                state = "dead"
                notes.append(f"broker {broker} did not answer ({node['rest'][:80]}): imported as dead")
            elif node["rest"] == "(":
                open_block = number
            else:
                raise ImportFileError(
                    file, where, f"expected '-> (' or '-> ERROR: …' after the broker, found {_shown(line)}"
                )
            rack = node["rack"]
            rows.append({"broker_id": broker, "rack": None if rack == "null" else rack, "state": state})
        elif open_block is not None and line.strip() == ")":
            open_block = None
        elif open_block is not None and line[:1].isspace() and not node:
            continue  # an API version line
        elif line.strip():
            expected = "an API line or ')'" if open_block else "'host:port (id: N rack: R) -> ('"
            raise ImportFileError(file, where, f"expected {expected}, found {_shown(line)}")
    if open_block is not None:
        raise ImportFileError(
            file, f"line {open_block}", "this broker's API list never closes with ')' (truncated file?)"
        )
    return BrokersFile(_broker_frame(rows), "kafka-broker-api-versions", notes)


def _brokers_csv(text: str, file: str) -> BrokersFile:
    def row(cells: dict[str, str], where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, kind in _BROKER_COLUMNS.items():
            raw = cells.get(name, "").strip()
            if name == "broker_id":
                out[name] = _whole(raw, file, where, name)
            elif name in ("rack", "state"):
                out[name] = None if raw in ("", "null") else raw
            elif name in ("tags", "taints"):
                out[name] = _pairs(raw, file, where, name)
            else:
                out[name] = None if raw == "" else _csv_number(raw, kind, file, where, name)
        out["state"] = out["state"] or "active"
        if out["state"] not in STATES:
            raise ImportFileError(file, where, f"state: expected one of {', '.join(STATES)}, found {out['state']!r}")
        return out

    rows = _csv_rows(text, file, required=("broker_id", "rack"), known=tuple(_BROKER_COLUMNS), parse=row)
    seen: dict[int, str] = {}
    for where, r in rows:
        if r["broker_id"] in seen:
            raise ImportFileError(file, where, f"broker {r['broker_id']} listed twice (also {seen[r['broker_id']]})")
        seen[r["broker_id"]] = where
    return BrokersFile(_broker_frame([r for _, r in rows]), "CSV")


def _pairs(raw: str, file: str, where: str, name: str) -> str | None:
    """A ``tags`` / ``taints`` cell, ``key=value;key=value`` (a taint may be a bare ``key``), as written to the
    table (None where empty)."""
    if raw in ("", "null"):
        return None
    for item in raw.split(";"):
        key, _, value = item.partition("=")
        if not key.strip() or (name == "tags" and not value.strip()):
            form = "key=value;key=value" if name == "tags" else "key=value;key"
            raise ImportFileError(file, where, f"{name}: expected {form}, found {raw!r}")
    return raw


def _broker_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(_BROKER_COLUMNS))
    for name in ("cores", "disk_capacity_bytes", "max_partitions"):
        frame[name] = frame[name].astype("Int64")
    frame["weight"] = frame["weight"].astype("float64")
    for name in ("tags", "taints"):  # text or null, never NaN (a string column)
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    return frame.astype({"broker_id": "int64"})


# --- kafka-log-dirs.sh --describe ---------------------------------------------------------------------------------


def parse_log_dirs(text: str, file: str) -> LogDirsFile:
    """Each current replica's broker, log dir and size. The informational lines before the JSON are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("{")), None)
    if start is None:
        raise ImportFileError(
            file, "", 'no JSON found: expected the output of kafka-log-dirs.sh --describe ({"version":1,"brokers":[…]})'
        )
    data = _load_json("\n".join(lines[start:]), file, start)
    if not isinstance(data, dict) or not isinstance(data.get("brokers"), list):
        raise ImportFileError(file, "JSON $", 'expected {"version":1,"brokers":[{"broker","logDirs"}]}')
    rows: list[tuple[int, str, int, str, int]] = []
    notes: list[str] = []
    seen: dict[tuple[int, str, int], str] = {}
    for b, broker_entry in enumerate(data["brokers"]):
        path = f"JSON $.brokers[{b}]"
        if not isinstance(broker_entry, dict) or not isinstance(broker_entry.get("logDirs"), list):
            raise ImportFileError(file, path, 'expected {"broker":N,"logDirs":[…]}')
        broker = _json_int(broker_entry.get("broker"), file, f"{path}.broker", "a broker id")
        for d, log_dir in enumerate(broker_entry["logDirs"]):
            dir_path = f"{path}.logDirs[{d}]"
            if not isinstance(log_dir, dict) or not isinstance(log_dir.get("logDir"), str):
                raise ImportFileError(file, dir_path, 'expected {"logDir","error","partitions":[…]}')
            if log_dir.get("error"):
                notes.append(f"broker {broker} log dir {log_dir['logDir']} reported {log_dir['error']}")
            for p, replica in enumerate(log_dir.get("partitions") or []):
                where = f"{dir_path}.partitions[{p}]"
                topic, partition = _replica_name(replica, file, where)
                size = _json_int(replica.get("size"), file, f"{where}.size", "a size in bytes")
                if replica.get("isFuture") is True:
                    continue  # the copy of an intra-broker move in progress, not the replica in use
                key = (broker, topic, partition)
                if key in seen:
                    raise ImportFileError(
                        file, where, f"broker {broker} holds {topic}:{partition} twice (also {seen[key]})"
                    )
                seen[key] = where
                rows.append((broker, topic, partition, log_dir["logDir"], size))
    frame = pd.DataFrame(rows, columns=["broker_id", "topic", "partition", "log_dir", "size_bytes"])
    return LogDirsFile(frame.astype({"broker_id": "int64", "partition": "int64", "size_bytes": "int64"}), notes)


def _replica_name(replica: Any, file: str, where: str) -> tuple[str, int]:
    """``<topic>-<n>``: the partition number follows the last dash (topics may contain dashes)."""
    name = replica.get("partition") if isinstance(replica, dict) else None
    topic, dash, number = name.rpartition("-") if isinstance(name, str) else ("", "", "")
    if not dash or not number.isdigit() or not TOPIC_NAME.fullmatch(topic):
        raise ImportFileError(file, f"{where}.partition", f"expected '<topic>-<partition>', found {_shown(name)}")
    return topic, int(number)


# --- throughput CSV -----------------------------------------------------------------------------------------------

_RATE_COLUMNS = ("bytes_in_per_sec", "bytes_out_per_sec", "messages_in_per_sec")


def parse_throughput(text: str, file: str) -> pd.DataFrame:
    """Measured rates per partition: ``topic, partition, bytes_in_per_sec, bytes_out_per_sec, messages_in_per_sec``."""

    def row(cells: dict[str, str], where: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "topic": _topic_name(cells["topic"].strip(), file, where),
            "partition": _whole(cells["partition"].strip(), file, where, "partition"),
        }
        for name in _RATE_COLUMNS:
            raw = cells.get(name, "").strip()
            optional = name == "messages_in_per_sec"
            out[name] = None if optional and raw == "" else _csv_number(raw, float, file, where, name)
        return out

    required = ("topic", "partition", "bytes_in_per_sec", "bytes_out_per_sec")
    rows = _csv_rows(text, file, required=required, known=(*required, "messages_in_per_sec"), parse=row)
    seen: dict[tuple[str, int], str] = {}
    for where, r in rows:
        key = (r["topic"], r["partition"])
        if key in seen:
            raise ImportFileError(file, where, f"partition {key[0]}:{key[1]} listed twice (also {seen[key]})")
        seen[key] = where
    frame = pd.DataFrame([r for _, r in rows], columns=["topic", "partition", *_RATE_COLUMNS])
    return frame.astype({"partition": "int64", **{c: "float64" for c in _RATE_COLUMNS}})


# --- shared checks ------------------------------------------------------------------------------------------------


def _csv_rows(
    text: str,
    file: str,
    required: tuple[str, ...],
    known: tuple[str, ...],
    parse: Callable[[dict[str, str], str], dict[str, Any]],
) -> list[tuple[str, dict[str, Any]]]:
    """``(line N, parsed row)`` per data row of a CSV with a header naming ``required`` columns (others ``known``)."""
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader, [])]
    missing = [c for c in required if c not in header]
    unknown = [c for c in header if c not in known]
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown columns {', '.join(unknown)}"
        raise ImportFileError(
            file,
            "line 1",
            f"the header {problem}; expected {','.join(required)} (optional: "
            f"{','.join(c for c in known if c not in required) or 'none'})",
        )
    rows = []
    for cells in reader:
        where = f"line {reader.line_num}"
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise ImportFileError(
                file, where, f"expected {len(header)} cells as in the header, found {len(cells)} (truncated file?)"
            )
        rows.append((where, parse(dict(zip(header, cells)), where)))
    return rows


def _csv_number(raw: str, kind: type, file: str, where: str, name: str) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        raise ImportFileError(
            file, where, f"{name}: expected {'an integer' if kind is int else 'a number'}, found {raw!r}"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise ImportFileError(file, where, f"{name}: expected a finite number >= 0, found {raw!r}")
    return value


def _digits(text: str) -> bool:
    """Only ASCII digits (str.isdigit alone takes '²' and other Unicode digits)."""
    return text.isdigit() and text.isascii()


def _whole(text: str, file: str, where: str, name: str) -> int:
    if not _digits(text.strip()):
        raise ImportFileError(file, where, f"{name}: expected a whole number, found {text.strip()!r}")
    return int(text)


def _broker_list(text: str, file: str, where: str, name: str) -> list[int]:
    parts = text.split(",")
    if not text.strip() or not all(_digits(p.strip()) for p in parts):
        raise ImportFileError(file, where, f"{name}: expected broker ids like 1,2,3, found {text.strip()!r}")
    brokers = [int(p) for p in parts]
    if len(set(brokers)) != len(brokers):
        raise ImportFileError(file, where, f"{name}: a broker appears twice in {text.strip()}")
    return brokers


def _topic_name(value: Any, file: str, where: str) -> str:
    if not isinstance(value, str) or not TOPIC_NAME.fullmatch(value):
        raise ImportFileError(
            file, where, f"expected a Kafka topic name ([A-Za-z0-9._-], 1-249), found {_shown(value)}"
        )
    return value


def _json_int(value: Any, file: str, path: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImportFileError(file, path, f"expected {what} (a whole number >= 0), found {_shown(value)}")
    return value


def _load_json(body: str, file: str, line_offset: int) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno + line_offset} column {exc.colno}"
        raise ImportFileError(file, where, f"JSON does not parse ({exc.msg}); truncated file?") from None


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = text.strip()
    return repr(text[:60] + ("…" if len(text) > 60 else ""))
