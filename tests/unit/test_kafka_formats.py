"""The import's parsers on samples of what Kafka's tools print (Kafka 2.x, 3.x and 4.x forms), and on bad files:
each bad file fails with the file, the line (or JSON path) and what was expected."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jobs.kafka_formats import ImportFileError, parse_brokers, parse_log_dirs, parse_throughput, parse_topics
from tests import kafka_samples

# kafka-topics.sh --describe, Kafka 4.1 (Elr columns), a topic with dashes and dots, an offline partition
# (Leader: none) and one in the middle of a reassignment (Adding / Removing Replicas, Replicas is the union).
DESCRIBE_KAFKA4 = (
    "Topic: orders.eu-west\tTopicId: sE05QnUPQQ-FLs5ekB8NLQ\tPartitionCount: 3\tReplicationFactor: 3\t"
    "Configs: min.insync.replicas=2,segment.bytes=1073741824\n"
    "\tTopic: orders.eu-west\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: \tLastKnownElr: \n"
    "\tTopic: orders.eu-west\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: \tElr: 2,3\tLastKnownElr: 1\n"
    "\tTopic: orders.eu-west\tPartition: 2\tLeader: 3\tReplicas: 3,1,2,4\tIsr: 3,1,2\tAdding Replicas: 4\t"
    "Removing Replicas: 2\tElr: N/A\tLastKnownElr: N/A\n"
    "Topic: __consumer_offsets\tTopicId: 2q-H2y2PRoyGktIr6q4Lrg\tPartitionCount: 1\tReplicationFactor: 3\t"
    "Configs: compression.type=producer,cleanup.policy=compact\n"
    "\tTopic: __consumer_offsets\tPartition: 0\tLeader: 2\tReplicas: 2,1,3\tIsr: 2,1,3\tElr: \tLastKnownElr: \n"
)

# Kafka 2.x / 3.0-3.6: no Elr columns; copied from a terminal, so the tabs became runs of spaces.
DESCRIBE_KAFKA3_SPACES = """\
Topic: payments-v2    TopicId: VqFKdC5sTr2UaholaO9PSg PartitionCount: 2       ReplicationFactor: 2    Configs: \
retention.ms=604800000
        Topic: payments-v2    Partition: 0    Leader: 5       Replicas: 5,6   Isr: 5,6
        Topic: payments-v2    Partition: 1    Leader: 6       Replicas: 6,5   Isr: 6
"""

GENERATE_OUTPUT = """\
Current partition replica assignment
{"version":1,"partitions":[{"topic":"clicks","partition":0,"replicas":[1,2],"log_dirs":["/data/a","any"]},\
{"topic":"clicks","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}

Proposed partition reassignment configuration
{"version":1,"partitions":[{"topic":"clicks","partition":0,"replicas":[3,1],"log_dirs":["any","any"]}]}
"""

API_VERSIONS_KAFKA3 = """\
kafka-1.internal:9092 (id: 1 rack: eu-west-1a) -> (
\tProduce(0): 0 to 9 [usable: 9],
\tFetch(1): 0 to 13 [usable: 13],
\tDescribeTopicPartitions(75): UNSUPPORTED
)
kafka-2.internal:9092 (id: 2 rack: eu-west-1b) -> (
\tProduce(0): 0 to 9 [usable: 9]
)
kafka-4.internal:9092 (id: 4 rack: eu-west-1c) -> ERROR: org.apache.kafka.common.errors.DisconnectException
"""

API_VERSIONS_KAFKA4 = """\
localhost:9092 (id: 1 rack: null isFenced: false) -> (
\tProduce(0): 0 to 13 [usable: 13],
\tStreamsGroupHeartbeat(88): UNSUPPORTED
)
localhost:19092 (id: 2 rack: null isFenced: true) -> (
\tProduce(0): 0 to 13 [usable: 13]
)
"""

LOG_DIRS = (
    "Querying brokers for log directories information\n"
    "Received log directory information from brokers 1,2,3\n"
    + json.dumps(
        {
            "brokers": [
                {
                    "broker": 1,
                    "logDirs": [
                        {
                            "partitions": [
                                {"partition": "orders.eu-west-0", "size": 1000, "offsetLag": 0, "isFuture": False},
                                {"partition": "orders.eu-west-2", "size": 300, "offsetLag": 0, "isFuture": True},
                            ],
                            "error": None,
                            "logDir": "/var/lib/kafka/data-1",
                        },
                        {
                            "partitions": [],
                            "error": "org.apache.kafka.common.errors.KafkaStorageException",
                            "logDir": "/var/lib/kafka/data-2",
                        },
                    ],
                },
                {
                    "broker": 2,
                    "logDirs": [
                        {
                            "logDir": "/data",
                            "error": None,
                            "partitions": [
                                {"partition": "orders.eu-west-0", "size": 990, "offsetLag": 10, "isFuture": False}
                            ],
                        }
                    ],
                },
            ],
            "version": 1,
        },
        separators=(",", ":"),
    )
    + "\n"
)


def error_of(parse, text: str) -> str:
    with pytest.raises(ImportFileError) as raised:
        parse(text, "in.txt")
    return str(raised.value)


def test_describe_kafka4_with_elr_offline_and_reassigning_partitions():
    parsed = parse_topics(DESCRIBE_KAFKA4, "topics.txt")
    columns = ["topic", "partition", "replicas", "leader", "log_dirs", "adding_replicas", "removing_replicas"]
    frame = parsed.partitions[columns]
    rows = frame.astype(object).where(frame.notna(), None).values.tolist()
    assert rows == [
        ["orders.eu-west", 0, [1, 2, 3], 1, None, None, None],
        ["orders.eu-west", 1, [2, 3, 1], None, None, None, None],
        ["orders.eu-west", 2, [3, 1, 2, 4], 3, None, [4], [2]],
        ["__consumer_offsets", 0, [2, 1, 3], 2, None, None, None],
    ]
    assert parsed.form == "kafka-topics --describe"
    assert parsed.offline == ["orders.eu-west:1"] and parsed.reassigning == ["orders.eu-west:2"]


def _partition_rows(parsed) -> dict[tuple[str, int], tuple]:
    frame = parsed.partitions
    return {
        (t, int(p)): (list(r), a, m)
        for t, p, r, a, m in zip(
            frame["topic"], frame["partition"], frame["replicas"], frame["adding_replicas"], frame["removing_replicas"]
        )
    }


@pytest.mark.parametrize("sample", [DESCRIBE_KAFKA4, DESCRIBE_KAFKA3_SPACES], ids=["kafka4", "kafka3-spaces"])
def test_a_describe_file_cut_anywhere_is_refused_or_keeps_whole_topics(sample):
    """Issue 37 (finding 1, acceptance 3): at every cut, mid-line or mid-topic, the import either refuses the
    file or what it reads is whole topics with every replica list as Kafka printed it; never a partition that
    lost brokers."""
    whole = _partition_rows(parse_topics(sample, "topics.txt"))
    accepted = 0
    for cut in range(1, len(sample)):
        try:
            parsed = parse_topics(sample[:cut], "topics.txt")
        except ImportFileError as exc:
            assert str(exc).startswith("topics.txt: ")
            continue
        accepted += 1
        rows = _partition_rows(parsed)
        assert all(rows[key] == whole[key] for key in rows), cut
        topics = {t for t, _ in rows}
        assert {k for k in whole if k[0] in topics} == set(rows), cut  # whole topics only
    assert accepted <= sample.count("\n")  # at most the cuts right after a line that ends a topic


def test_a_partition_in_flight_keeps_both_ends_and_the_header_counts_the_replicas_before_it():
    """Issue 37 (finding 2): ReplicationFactor 3, Replicas 1,2,3,4 mid-reassignment (adding 4, removing 3)."""
    text = (
        "Topic: t\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: \n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,4,3\tIsr: 1,2,3\tAdding Replicas: 4\t"
        "Removing Replicas: 3\n"
    )
    parsed = parse_topics(text, "topics.txt")
    assert _partition_rows(parsed) == {("t", 0): ([1, 2, 4, 3], [4], [3])}
    assert parsed.reassigning == ["t:0"]


def test_describe_copied_with_spaces_instead_of_tabs():
    parsed = parse_topics(DESCRIBE_KAFKA3_SPACES, "topics.txt")
    assert parsed.partitions[["topic", "partition", "replicas"]].values.tolist() == [
        ["payments-v2", 0, [5, 6]],
        ["payments-v2", 1, [6, 5]],
    ]
    assert parsed.partitions["leader"].tolist() == [5, 6]


def test_describe_kafka2_without_topic_ids_and_with_windows_line_ends():
    text = (
        "Topic:clicks\tPartitionCount:2\tReplicationFactor:2\tConfigs:\r\n"
        "\tTopic: clicks\tPartition: 0\tLeader: -1\tReplicas: 1,2\tIsr: \r\n"
        "\tTopic: clicks\tPartition: 1\tLeader: 2\tReplicas: 2,1\tIsr: 2,1\r\n"
    )
    parsed = parse_topics(text, "topics.txt")
    assert parsed.partitions["replicas"].tolist() == [[1, 2], [2, 1]]
    assert parsed.offline == ["clicks:0"] and parsed.notes == []  # the header was read: no filter warning


def test_describe_keeps_working_when_kafka_adds_a_column():
    line = "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tSomethingNew: x,y\n"
    assert parse_topics(line, "f").partitions["replicas"].tolist() == [[1, 2]]


def test_reassignment_json_and_the_whole_generate_output():
    plain = '{"version":1,"partitions":[{"topic":"a.b-c","partition":3,"replicas":[4,1,2]}]}'
    parsed = parse_topics(plain, "f")
    assert parsed.partitions[["topic", "partition", "replicas", "leader"]].values.tolist() == [
        ["a.b-c", 3, [4, 1, 2], 4]
    ]
    generated = parse_topics(GENERATE_OUTPUT, "f")  # the current assignment, not the proposal
    assert generated.partitions["replicas"].tolist() == [[1, 2], [2, 3]]
    assert generated.partitions["log_dirs"].tolist() == [["/data/a", None], [None, None]]
    assert generated.form == "reassignment JSON"


def test_api_versions_kafka3_racks_and_a_broker_that_did_not_answer():
    parsed = parse_brokers(API_VERSIONS_KAFKA3, "brokers.txt")
    assert parsed.brokers[["broker_id", "rack", "state"]].values.tolist() == [
        [1, "eu-west-1a", "active"],
        [2, "eu-west-1b", "active"],
        [4, "eu-west-1c", "dead"],
    ]
    assert parsed.notes == [
        "broker 4 did not answer (ERROR: org.apache.kafka.common.errors.DisconnectException): imported as dead"
    ]
    assert parsed.brokers[["cores", "weight", "disk_capacity_bytes", "max_partitions"]].isna().all().all()


def test_api_versions_kafka4_rack_null_and_fenced():
    parsed = parse_brokers(API_VERSIONS_KAFKA4, "brokers.txt")
    assert parsed.brokers["rack"].tolist() == [None, None]
    assert parsed.brokers["state"].tolist() == ["active", "dead"]
    assert parsed.form == "kafka-broker-api-versions"


def test_brokers_csv_with_optional_columns():
    text = "broker_id,rack,state,cores,disk_capacity_bytes\n1,az1,,8,\n2,null,draining,,5000000000\n"
    parsed = parse_brokers(text, "brokers.csv")
    frame = parsed.brokers
    assert frame["broker_id"].tolist() == [1, 2] and frame["rack"].tolist() == ["az1", None]
    assert frame["state"].tolist() == ["active", "draining"]
    assert frame["cores"].tolist()[0] == 8 and frame["cores"].isna().tolist() == [False, True]
    assert frame["disk_capacity_bytes"].isna().tolist() == [True, False]
    assert int(frame["disk_capacity_bytes"].iloc[1]) == 5_000_000_000


def test_brokers_csv_with_placement_tags_and_taints():
    text = "broker_id,rack,tags,taints\n1,az1,tier=ssd;cell=a,\n2,az2,,dedicated=payments;maintenance\n"
    frame = parse_brokers(text, "brokers.csv").brokers
    assert frame["tags"].tolist() == ["tier=ssd;cell=a", None]
    assert frame["taints"].tolist() == [None, "dedicated=payments;maintenance"]
    assert parse_brokers(API_VERSIONS_KAFKA4, "brokers.txt").brokers["tags"].tolist() == [None, None]


def test_log_dirs_sizes_dirs_future_copies_and_failed_dirs():
    parsed = parse_log_dirs(LOG_DIRS, "log-dirs.json")
    assert parsed.replicas.values.tolist() == [
        [1, "orders.eu-west", 0, "/var/lib/kafka/data-1", 1000],
        [2, "orders.eu-west", 0, "/data", 990],
    ]
    assert parsed.notes == [
        "broker 1 log dir /var/lib/kafka/data-2 reported org.apache.kafka.common.errors.KafkaStorageException"
    ]


def test_log_dirs_pretty_printed_json():
    pretty = "Querying brokers for log directories information\n" + json.dumps(
        {
            "version": 1,
            "brokers": [
                {
                    "broker": 7,
                    "logDirs": [
                        {
                            "logDir": "/d",
                            "error": None,
                            "partitions": [{"partition": "a-b-c-12", "size": 5, "offsetLag": 0, "isFuture": False}],
                        }
                    ],
                }
            ],
        },
        indent=4,
    )
    assert parse_log_dirs(pretty, "f").replicas.values.tolist() == [[7, "a-b-c", 12, "/d", 5]]


def test_throughput_csv():
    text = "topic,partition,bytes_in_per_sec,bytes_out_per_sec\nclicks.v1,0,1024.5,2049\nclicks.v1,1,0,0\n"
    frame = parse_throughput(text, "rates.csv")
    assert frame.values.tolist()[0][:4] == ["clicks.v1", 0, 1024.5, 2049.0]
    assert frame["messages_in_per_sec"].isna().all()


BAD_TOPICS = {
    "truncated describe (header count)": (
        DESCRIBE_KAFKA4.rsplit("\tTopic: orders.eu-west\tPartition: 2", 1)[0],
        "in.txt: line 1: topic orders.eu-west: its header says PartitionCount: 3, but 2 partition lines",
    ),
    "truncated describe (cut mid-line)": (
        "\tTopic: t\tPartition: 0\tLeader: 1\tRepl",
        "in.txt: line 1: the file ends inside this partition line",
    ),
    "cut inside the last replica list (issue 37, finding 1)": (
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2",
        "in.txt: line 3: the file ends inside this partition line (no line break after it): truncated file?",
    ),
    "fewer replicas than the header's ReplicationFactor (issue 37, finding 1)": (
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2\tIsr: 2\n",
        "in.txt: line 3: partition t:1: Replicas: 2 lists 1 broker, but the topic's header (line 1) says "
        "ReplicationFactor: 2; truncated line?",
    ),
    "a reassignment whose ends both differ from the header": (
        "Topic: t\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: \n"
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3,4\tIsr: 1,2\tAdding Replicas: 4\n",
        "in.txt: line 2: partition t:0: Replicas: 1,2,3,4 lists 4 brokers (4 after the reassignment in flight, "
        "3 before it), but the topic's header (line 1) says ReplicationFactor: 2",
    ),
    "removing a broker the replicas lack": (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tRemoving Replicas: 3\n",
        "in.txt: line 1: Removing Replicas: 3 not among Replicas: 1,2",
    ),
    "unknown format": ("hello world\n", "in.txt: line 1: unknown format: expected kafka-topics.sh --describe"),
    "empty": ("\n", "in.txt: empty file"),
    "partition twice": (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n" * 2,
        "in.txt: line 2: partition t:0 listed twice (also line 1)",
    ),
    "replicas do not parse": (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,,2\tIsr: 1\n",
        "in.txt: line 1: Replicas: expected broker ids like 1,2,3, found '1,,2'",
    ),
    "non-integer broker id": (
        "\tTopic: t\tPartition: 0\tLeader: one\tReplicas: 1,2\tIsr: 1\n",
        "in.txt: line 1: Leader: expected a whole number, found 'one'",
    ),
    "leader outside replicas": (
        "\tTopic: t\tPartition: 0\tLeader: 9\tReplicas: 1,2\tIsr: 1\n",
        "in.txt: line 1: Leader: 9 is not among Replicas: 1,2",
    ),
    "stray line": (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\nWARNING: something\n",
        "in.txt: line 2: expected a topic line",
    ),
    "truncated JSON": (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,',
        "in.txt: line 1 column 69: JSON does not parse",
    ),
    "JSON broker id not an integer": (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,"2"]}]}',
        "in.txt: JSON $.partitions[0].replicas[1]: expected a broker id (a whole number >= 0), found '2'",
    ),
    "JSON partition twice": (
        '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
        "in.txt: JSON $.partitions[1]: partition t:0 listed twice (also $.partitions[0])",
    ),
    "JSON without partitions": ('{"version":1}', "in.txt: JSON $: expected"),
    "generate output cut before the JSON": ("Current partition replica assignment\n", "in.txt: line 1: no JSON after"),
}


BAD_BROKERS = {
    "truncated api-versions": (
        API_VERSIONS_KAFKA3.split("\tFetch(1)", maxsplit=1)[0],
        "in.txt: line 1: this broker's API list never closes with ')' (truncated file?)",
    ),
    "non-integer id": (
        "host:9092 (id: b1 rack: null) -> (\n)\n",
        "in.txt: line 1: id: expected a whole number, found 'b1'",
    ),
    "broker twice": (
        "h:1 (id: 1 rack: null) -> (\n)\nh:2 (id: 1 rack: null) -> (\n)\n",
        "in.txt: line 3: broker 1 listed twice (also line 1)",
    ),
    "unknown format": ("id,rack\n1,a\n", "in.txt: line 1: unknown format"),
    "csv bad state": ("broker_id,rack,state\n1,a,gone\n", "in.txt: line 2: state: expected one of active"),
    "csv unknown column": ("broker_id,rack,rackk\n1,a,b\n", "in.txt: line 1: the header has unknown columns rackk"),
    "csv short row": ("broker_id,rack\n1,a\n2\n", "in.txt: line 3: expected 2 cells"),
    "csv non-integer id": ("broker_id,rack\nx,a\n", "in.txt: line 2: broker_id: expected a whole number, found 'x'"),
    "csv negative cores": ("broker_id,rack,cores\n1,a,-8\n", "in.txt: line 2: cores: expected a finite number >= 0"),
    "csv bad tags": (
        "broker_id,rack,tags\n1,a,tier\n",
        "in.txt: line 2: tags: expected key=value;key=value, found 'tier'",
    ),
}


BAD_LOG_DIRS = {
    "no JSON": ("Querying brokers for log directories information\n", "in.txt: no JSON found"),
    "truncated": (LOG_DIRS[:200], "in.txt: line 3 column"),
    "bad partition name": (
        '{"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","partitions":[{"partition":"nodash","size":1}]}]}]}',
        "in.txt: JSON $.brokers[0].logDirs[0].partitions[0].partition: expected '<topic>-<partition>', found 'nodash'",
    ),
    "size not a number": (
        '{"brokers":[{"broker":1,"logDirs":[{"logDir":"/d","partitions":[{"partition":"t-0","size":"1"}]}]}]}',
        "in.txt: JSON $.brokers[0].logDirs[0].partitions[0].size: expected a size in bytes",
    ),
    "broker id not an integer": (
        '{"brokers":[{"broker":"1","logDirs":[]}]}',
        "in.txt: JSON $.brokers[0].broker: expected a broker id",
    ),
}


BAD_THROUGHPUT = {
    "missing column": ("topic,partition,bytes_in_per_sec\n", "in.txt: line 1: the header lacks bytes_out_per_sec"),
    "negative": ("topic,partition,bytes_in_per_sec,bytes_out_per_sec\nt,0,-1,0\n", "in.txt: line 2: bytes_in_per_sec"),
    "nan": ("topic,partition,bytes_in_per_sec,bytes_out_per_sec\nt,0,nan,0\n", "in.txt: line 2: bytes_in_per_sec"),
    "twice": (
        "topic,partition,bytes_in_per_sec,bytes_out_per_sec\nt,0,1,1\nt,0,2,2\n",
        "in.txt: line 3: partition t:0 listed twice (also line 2)",
    ),
}


BAD_FILES = [
    (parse, name, text, expected)
    for parse, cases in (
        (parse_topics, BAD_TOPICS),
        (parse_brokers, BAD_BROKERS),
        (parse_log_dirs, BAD_LOG_DIRS),
        (parse_throughput, BAD_THROUGHPUT),
    )
    for name, (text, expected) in cases.items()
]


@pytest.mark.parametrize(
    "parse, text, expected",
    [(p, t, e) for p, _, t, e in BAD_FILES],
    ids=[f"{p.__name__}: {n}" for p, n, _, _ in BAD_FILES],
)
def test_a_bad_file_fails_naming_the_file_the_place_and_what_was_expected(parse, text, expected):
    assert error_of(parse, text).startswith(expected)


TOPIC_NAMES = st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True)


@st.composite
def clusters(draw):
    """A cluster's partitions (topic names with dots, dashes and trailing digits; some offline) and brokers."""
    brokers = draw(st.lists(st.integers(0, 2_000), min_size=1, max_size=8, unique=True))
    rows = []
    for topic in draw(st.lists(TOPIC_NAMES, min_size=1, max_size=5, unique=True)):
        rf = draw(st.integers(1, len(brokers)))  # one replication factor per topic, as Kafka creates them
        for partition in range(draw(st.integers(1, 4))):
            replicas = draw(st.permutations(brokers))[:rf]
            leader = draw(st.one_of(st.none(), st.sampled_from(replicas)))
            rows.append((topic, partition, replicas, leader, draw(st.integers(0, 2**50))))
    partitions = pd.DataFrame(rows, columns=["topic", "partition", "replicas", "leader", "size_bytes"])
    frame = pd.DataFrame({"broker_id": brokers, "rack": None, "state": "active"})
    return partitions, frame


@given(clusters())
@example(
    (
        pd.DataFrame(
            {
                "topic": ["a-1", "a"],
                "partition": [2, 12],
                "replicas": [[1, 2], [2, 1]],
                "leader": [None, 2],
                "size_bytes": [7, 9],
            }
        ),
        pd.DataFrame({"broker_id": [1, 2], "rack": None, "state": "active"}),
    )
).via("a-1-2 and a-12: the partition number is what follows the last dash")
def test_what_kafka_prints_parses_back_to_the_cluster(cluster):
    partitions, brokers = cluster
    parsed = parse_topics(kafka_samples.describe(partitions, brokers), "topics").partitions
    want = partitions.sort_values(["topic", "partition"], ignore_index=True)
    assert parsed[["topic", "partition"]].values.tolist() == want[["topic", "partition"]].values.tolist()
    assert parsed["replicas"].tolist() == want["replicas"].tolist()
    assert [None if pd.isna(x) else int(x) for x in parsed["leader"]] == [
        None if pd.isna(x) else int(x) for x in want["leader"]
    ]
    on_disk = parse_log_dirs(kafka_samples.log_dirs(partitions, brokers), "log-dirs").replicas
    assert len(on_disk) == sum(map(len, partitions["replicas"]))
    sizes = on_disk.groupby(["topic", "partition"])["size_bytes"].max()
    lag = kafka_samples.FOLLOWER_LAG_BYTES  # every replica lags when there is no leader to be level with
    assert sizes.to_dict() == {
        (t, p): s if pd.notna(leader) else max(0, s - lag)
        for t, p, s, leader in zip(*(partitions[c] for c in ("topic", "partition", "size_bytes", "leader")))
    }
