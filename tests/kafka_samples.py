"""What Kafka's tools would print for a cluster of the demo fleet: the files the import end-to-end tests feed in.

Each renderer follows the tool's printing code (see :mod:`jobs.kafka_formats`) and is pinned against a
hand-written sample in ``tests/unit/test_kafka_formats.py`` style by ``test_renderers_print_what_kafka_prints``.
Like the tools, they list only brokers that are up, print JSON maps in no particular order, and give
followers a little less data than their leader (replication lag).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

FOLLOWER_LAG_BYTES = 4096


def describe(partitions: pd.DataFrame, brokers: pd.DataFrame) -> str:
    """``kafka-topics.sh --describe``, Kafka 3.7+ (Elr columns); the ISR holds the replicas on live brokers."""
    live = set(brokers.loc[brokers["state"] != "dead", "broker_id"].astype(int))
    lines = []
    for topic, rows in partitions.sort_values(["topic", "partition"]).groupby("topic", sort=True):
        rf = len(rows["replicas"].iloc[0])
        lines.append(
            f"Topic: {topic}\tTopicId: {_topic_id(topic)}\tPartitionCount: {len(rows)}\tReplicationFactor: {rf}\t"
            "Configs: min.insync.replicas=2,segment.bytes=1073741824"
        )
        for partition, replicas, leader in zip(rows["partition"], rows["replicas"], rows["leader"]):
            isr = [b for b in replicas if b in live]
            lines.append(
                f"\tTopic: {topic}\tPartition: {partition}\tLeader: {_leader(leader)}\tReplicas: {_ids(replicas)}\t"
                f"Isr: {_ids(isr)}\tElr: \tLastKnownElr: "
            )
    return "\n".join(lines) + "\n"


def api_versions(brokers: pd.DataFrame, kafka4: bool = True) -> str:
    """``kafka-broker-api-versions.sh``: one block per broker that is up."""
    out = []
    for broker, rack, state in zip(brokers["broker_id"], brokers["rack"], brokers["state"]):
        if state == "dead":
            continue
        fenced = " isFenced: false" if kafka4 else ""
        out.append(f"kafka-{broker}.internal:9092 (id: {broker} rack: {rack or 'null'}{fenced}) -> (")
        out.append("\tProduce(0): 0 to 11 [usable: 11],\n\tFetch(1): 4 to 17 [usable: 17],")
        out.append("\tDescribeTopicPartitions(75): 0 [usable: 0]\n)")
    return "\n".join(out) + "\n"


def log_dirs(partitions: pd.DataFrame, brokers: pd.DataFrame, seed: int = 0) -> str:
    """``kafka-log-dirs.sh --describe``: two log dirs per live broker, the leader's replica at ``size_bytes``,
    followers ``FOLLOWER_LAG_BYTES`` behind; maps shuffled, as Java's HashMap prints them in no set order."""
    rng = np.random.default_rng(seed)
    live = [int(b) for b, s in zip(brokers["broker_id"], brokers["state"]) if s != "dead"]
    held: dict[int, list[list[dict[str, object]]]] = {b: [[], []] for b in live}
    for topic, partition, replicas, leader, size in zip(
        partitions["topic"],
        partitions["partition"],
        partitions["replicas"],
        partitions["leader"],
        partitions["size_bytes"],
    ):
        for broker in replicas:
            if broker not in held:
                continue
            lag = 0 if broker == leader else FOLLOWER_LAG_BYTES
            replica = {
                "partition": f"{topic}-{partition}",
                "size": max(0, int(size) - lag),
                "offsetLag": 0,
                "isFuture": False,
            }
            held[broker][dir_index(topic, partition)].append(replica)
    report = []
    for broker in rng.permutation(live).tolist():
        dirs = [
            {"logDir": f"/var/lib/kafka/data-{k}", "error": None, "partitions": _shuffled(rng, held[broker][k])}
            for k in (0, 1)
        ]
        report.append({"broker": broker, "logDirs": dirs})
    body = json.dumps({"version": 1, "brokers": report}, separators=(",", ":"))
    return (
        "Querying brokers for log directories information\n"
        f"Received log directory information from brokers {','.join(map(str, live))}\n{body}\n"
    )


def dir_index(topic: str, partition: int) -> int:
    """Which of a broker's two log dirs holds a partition (all its replicas alike)."""
    return (sum(map(ord, topic)) + int(partition)) % 2


def throughput_csv(rates: pd.DataFrame) -> str:
    lines = ["topic,partition,bytes_in_per_sec,bytes_out_per_sec,messages_in_per_sec"]
    lines += [
        f"{t},{p},{i!r},{o!r},{m!r}"
        for t, p, i, o, m in zip(
            rates["topic"],
            rates["partition"],
            rates["bytes_in_per_sec"],
            rates["bytes_out_per_sec"],
            rates["messages_in_per_sec"],
        )
    ]
    return "\n".join(lines) + "\n"


def _shuffled(rng: np.random.Generator, items: list[dict[str, object]]) -> list[dict[str, object]]:
    return [items[i] for i in rng.permutation(len(items))]


def _leader(leader: object) -> str:
    return "none" if pd.isna(leader) else str(int(leader))  # type: ignore[call-overload]


def _ids(brokers: list[int]) -> str:
    return ",".join(str(int(b)) for b in brokers)


def _topic_id(topic: str) -> str:
    return (topic.encode().hex() + "A" * 22)[:22]
