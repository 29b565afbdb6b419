"""The import's rules on parsed files, without Spark: sizes and log dirs per partition, brokers a replica names but
the brokers file lacks, the size-growth estimate, the manifest."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from jobs.importer import complete_brokers, estimate_throughput, join_partitions, load_manifest
from jobs.kafka_formats import ImportFileError, parse_brokers, parse_log_dirs, parse_topics

TOPICS = (
    "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 1,2,3\n"
    "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 3,1\tIsr: \n"
    "\tTopic: t\tPartition: 2\tLeader: 9\tReplicas: 9,1\tIsr: 1\n"
)


def log_dirs(*replicas: tuple[int, str, int, str, int]) -> str:
    """kafka-log-dirs JSON holding ``(broker, topic, partition, dir, size)`` replicas."""
    brokers: dict[int, dict[str, list[str]]] = {}
    for broker, topic, partition, folder, size in replicas:
        entry = f'{{"partition":"{topic}-{partition}","size":{size},"offsetLag":0,"isFuture":false}}'
        brokers.setdefault(broker, {}).setdefault(folder, []).append(entry)
    body = ",".join(
        f'{{"broker":{b},"logDirs":['
        + ",".join(f'{{"logDir":"{d}","error":null,"partitions":[{",".join(p)}]}}' for d, p in dirs.items())
        + "]}"
        for b, dirs in brokers.items()
    )
    return f'Querying brokers for log directories information\n{{"version":1,"brokers":[{body}]}}\n'


def test_size_is_the_leaders_replica_else_the_largest_and_dirs_align_with_replicas():
    topics = parse_topics(TOPICS, "topics")
    dirs = parse_log_dirs(
        log_dirs(
            (1, "t", 0, "/a", 900),
            (2, "t", 0, "/b", 1000),
            (3, "t", 0, "/a", 950),  # leader 2 holds 1000
            (3, "t", 1, "/c", 70),
            (1, "t", 1, "/a", 80),  # offline: the largest
            (1, "t", 2, "/a", 5),  # the leader 9 is gone: the largest (only) one left
            (4, "t", 0, "/d", 1),  # a stray replica on broker 4, in no replica list
        ),
        "log-dirs",
    )
    partitions, lines = join_partitions(topics, dirs)
    assert partitions["size_bytes"].tolist() == [1000, 80, 5]
    assert partitions["log_dirs"].tolist() == [["/a", "/b", "/a"], ["/c", "/a"], [None, "/a"]]
    assert "1 replicas in the log dirs belong to no replica list of the topics file (ignored)" in lines
    assert lines[0] == "sizes: 3 of 3 partitions, from 4 log dir paths (kafka-log-dirs)"
    unknown, lines = join_partitions(topics, None)
    assert unknown["size_bytes"].isna().all() and unknown["log_dirs"].isna().all()
    assert lines == ["sizes: unknown (no --log-dirs): disk goals and bytes to move are left out"]


def test_a_broker_named_by_a_replica_but_not_listed_is_dead_and_racks_must_be_all_or_none():
    partitions, _ = join_partitions(parse_topics(TOPICS, "topics"), None)
    listed = parse_brokers("broker_id,rack\n1,a\n2,b\n3,c\n", "brokers.csv")
    brokers, lines = complete_brokers(listed, partitions, "brokers.csv")
    assert brokers[["broker_id", "rack", "state"]].values.tolist() == [
        [1, "a", "active"],
        [2, "b", "active"],
        [3, "c", "active"],
        [9, None, "dead"],
    ]
    assert "1 broker named in replica lists but not in brokers.csv: imported as dead: 9" in lines
    half = parse_brokers("broker_id,rack\n1,a\n2,\n3,c\n9,c\n", "brokers.csv")
    with pytest.raises(ImportFileError, match=r"brokers\.csv: brokers 2 have no rack while the other live brokers"):
        complete_brokers(half, partitions, "brokers.csv")


def test_estimate_is_size_growth_over_the_interval_never_negative_and_only_where_both_sizes_are_known():
    now = pd.DataFrame(
        {"topic": ["t"] * 4, "partition": [0, 1, 2, 3], "size_bytes": pd.array([6_000, 100, None, 50], dtype="Int64")}
    )
    before = pd.DataFrame({"topic": ["t"] * 3, "partition": [0, 1, 2], "size_bytes": [0, 700, 10]})
    rates = estimate_throughput(now, before, 600.0, 3.0)
    assert rates[["partition", "bytes_in_per_sec", "bytes_out_per_sec"]].values.tolist() == [
        [0, 10.0, 30.0],
        [1, 0.0, 0.0],
    ]


def test_describe_without_headers_warns_that_a_filter_may_have_left_partitions_out():
    assert "no topic header lines" in parse_topics(TOPICS, "topics").notes[0]


def test_manifest(tmp_path):
    good = tmp_path / "fleet.toml"
    good.write_text(
        'snapshot_ts = 2026-11-24T06:00:00Z\n[[cluster]]\nid = "a"\ntopics = "a/t.txt"\nbrokers = "a/b.txt"\n'
        '[[cluster]]\nid = "b"\ntopics = "t.json"\nbrokers = "b.csv"\nlog_dirs = "l.txt"\n'
    )
    sources, ts = load_manifest(str(good))
    assert ts == "2026-11-24T06:00:00+00:00"
    assert [(s.cluster, s.topics, s.log_dirs) for s in sources] == [
        ("a", f"{tmp_path}/a/t.txt", None),
        ("b", f"{tmp_path}/t.json", f"{tmp_path}/l.txt"),
    ]
    bad = {
        '[[cluster]]\nid = "a"\ntopics = "t"\n': "[[cluster]] #1: expected keys id, topics, brokers",
        '[[cluster]]\nid = "a"\ntopics = "t"\nbrokers = "b"\nrack = "x"\n': "[[cluster]] #1: expected keys",
        "clusters = []\n": "unknown keys ['clusters']",
        '[[cluster]]\nid = "a"\ntopics = "t"\nbrokers = "b"\n' * 2: "a cluster id appears twice",
        "[[cluster]\n": "not valid TOML",
    }
    for text, message in bad.items():
        good.write_text(text)
        with pytest.raises(ImportFileError, match=re.escape(message)):
            load_manifest(str(good))
