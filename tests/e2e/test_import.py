"""``partition-planner import`` end to end (issue 16): Kafka tool output of demo clusters -> snapshot -> plan ->
export; the estimate from size growth; bad files; an interrupted import; two imports at one time."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from jobs import cli
from jobs.demo import DEMO_SNAPSHOT
from tests import kafka_samples
from tests.conftest import write_with_delta_rs
from tests.e2e.test_execution import check_kafka_format
from tests.e2e.test_plan_cli import plan, small_fleet, table, versions

pytestmark = pytest.mark.integration
RENAMED = {"topic-0001": "orders.eu-west-1", "topic-0002": "payments.v2"}  # dots, and dashes before the number


def demo_fleet(ts: dt.datetime = DEMO_SNAPSHOT) -> dict[str, pd.DataFrame]:
    fleet = small_fleet(ts)
    for name in ("partitions", "throughput"):
        fleet[name]["topic"] = fleet[name]["topic"].replace(RENAMED)
    return fleet


def of(frame: pd.DataFrame, cluster: str) -> pd.DataFrame:
    return frame[frame["cluster_id"] == cluster].reset_index(drop=True)


def write_files(folder: Path, fleet: dict[str, pd.DataFrame], cluster: str, rates: bool = True) -> dict[str, str]:
    """The files an operator would collect from the cluster with Kafka's tools (and a rates CSV)."""
    folder.mkdir(parents=True, exist_ok=True)
    partitions, brokers = of(fleet["partitions"], cluster), of(fleet["brokers"], cluster)
    files = {
        "topics": kafka_samples.describe(partitions, brokers),
        "brokers": kafka_samples.api_versions(brokers),
        "log_dirs": kafka_samples.log_dirs(partitions, brokers),
    }
    if rates:
        files["throughput"] = kafka_samples.throughput_csv(of(fleet["throughput"], cluster))
    paths = {}
    for kind, text in files.items():
        paths[kind] = str(folder / f"{cluster}-{kind}.txt")
        Path(paths[kind]).write_text(text)
    return paths


def import_files(warehouse: str, cluster: str, paths: dict[str, str], *extra: str) -> int:
    args = ["import", "--warehouse", warehouse, "--cluster", cluster]
    for kind, path in paths.items():
        args += [f"--{kind.replace('_', '-')}", path]
    return cli.main([*args, *extra])


def expected_size(partitions: pd.DataFrame, brokers: pd.DataFrame) -> list[int]:
    """The import's rule: the leader's replica, else the largest (followers lag behind the leader)."""
    dead = set(brokers.loc[brokers["state"] == "dead", "broker_id"])
    return [
        int(s) - (kafka_samples.FOLLOWER_LAG_BYTES if leader in dead else 0)
        for s, leader in zip(partitions["size_bytes"], partitions["leader"])
    ]


def test_renderers_print_what_kafka_prints():
    partitions = pd.DataFrame(
        {"topic": ["a-b"], "partition": [0], "replicas": [[1, 2]], "leader": [1], "size_bytes": [10_000]}
    )
    brokers = pd.DataFrame({"broker_id": [1, 2], "rack": ["r1", None], "state": ["active", "dead"]})
    assert kafka_samples.describe(partitions, brokers) == (
        "Topic: a-b\tTopicId: 612d62AAAAAAAAAAAAAAAA\tPartitionCount: 1\tReplicationFactor: 2\t"
        "Configs: min.insync.replicas=2,segment.bytes=1073741824\n"
        "\tTopic: a-b\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1\tElr: \tLastKnownElr: \n"
    )
    assert kafka_samples.api_versions(brokers).splitlines()[0] == (
        "kafka-1.internal:9092 (id: 1 rack: r1 isFenced: false) -> ("
    )
    lines = kafka_samples.log_dirs(partitions, brokers).splitlines()
    assert lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1",
    ]
    assert json.loads(lines[2])["brokers"][0]["logDirs"][kafka_samples.dir_index("a-b", 0)]["partitions"] == [
        {"partition": "a-b-0", "size": 10_000, "offsetLag": 0, "isFuture": False}
    ]


def test_import_plan_export_from_kafka_tool_output_of_demo_clusters(spark, warehouse, tmp_path, capsys, monkeypatch):
    # Given the tool output of two demo clusters (cluster-2 has a dead broker, which api-versions does not list)
    fleet = demo_fleet()
    manifest = tmp_path / "fleet.toml"
    entries = []
    for cluster in ("cluster-1", "cluster-2"):
        paths = write_files(tmp_path / "files", fleet, cluster)
        entries.append(
            f'[[cluster]]\nid = "{cluster}"\n'
            + "".join(f'{k} = "{Path(p).relative_to(tmp_path)}"\n' for k, p in paths.items())
        )
    manifest.write_text(f'snapshot_ts = "{DEMO_SNAPSHOT.isoformat()}"\n\n' + "\n".join(entries))
    # When importing them with the manifest
    assert cli.main(["import", "--warehouse", warehouse, "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert "snapshot 2026-11-01T00:00:00+00:00 of cluster cluster-2" in out
    dead = int(of(fleet["brokers"], "cluster-2").query("state == 'dead'")["broker_id"].iloc[0])
    assert (
        f"1 broker named in replica lists but not in {tmp_path}/files/cluster-2-brokers.txt: imported as dead: {dead}"
        in out
    )

    # Then the imported snapshot equals each cluster's: replicas, leaders, racks, states, sizes, rates
    for cluster in ("cluster-1", "cluster-2"):
        want_p, want_b = of(fleet["partitions"], cluster), of(fleet["brokers"], cluster)
        got_p = of(table(warehouse, "partitions"), cluster).sort_values(["topic", "partition"], ignore_index=True)
        want_p = want_p.sort_values(["topic", "partition"], ignore_index=True)
        assert got_p[["topic", "partition"]].values.tolist() == want_p[["topic", "partition"]].values.tolist()
        assert got_p["replicas"].map(list).tolist() == want_p["replicas"].tolist()
        assert got_p["leader"].tolist() == want_p["leader"].tolist()
        assert got_p["size_bytes"].tolist() == expected_size(want_p, want_b)
        live = set(want_b.loc[want_b["state"] != "dead", "broker_id"])
        assert got_p["log_dirs"].map(list).tolist() == [
            [f"/var/lib/kafka/data-{kafka_samples.dir_index(t, p)}" if b in live else None for b in replicas]
            for t, p, replicas in zip(want_p["topic"], want_p["partition"], want_p["replicas"])
        ]
        got_b = of(table(warehouse, "brokers"), cluster).sort_values("broker_id", ignore_index=True)
        assert got_b["broker_id"].tolist() == want_b["broker_id"].tolist()
        assert got_b["state"].tolist() == want_b["state"].tolist()
        racks = [r if s != "dead" else None for r, s in zip(want_b["rack"], want_b["state"])]  # Kafka omits the dead
        assert got_b["rack"].tolist() == racks
        keys = ["topic", "partition"]
        got_t = of(table(warehouse, "throughput"), cluster).sort_values(keys, ignore_index=True)
        want_t = of(fleet["throughput"], cluster).sort_values(keys, ignore_index=True)
        rates = ["topic", "partition", "bytes_in_per_sec", "bytes_out_per_sec", "messages_in_per_sec"]
        assert got_t[rates].values.tolist() == want_t[rates].values.tolist()

    # When planning and exporting cluster-2
    assert plan(warehouse) == 0
    plans = of(table(warehouse, "plans"), "cluster-2")
    # Then the broker missing from the api-versions output gets no replicas
    assert not any(dead in replicas for replicas in plans["replicas"])
    assert (
        cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-2", "--out-dir", str(tmp_path / "waves")])
        == 0
    )
    waves = sorted((tmp_path / "waves").glob("wave-*.json"))
    moved = [p for w in waves for p in json.loads(w.read_text())["partitions"]]
    assert moved and not any(dead in p["replicas"] for p in moved)
    evacuated = {
        (t, p)
        for t, p, r in zip(*(of(fleet["partitions"], "cluster-2")[c] for c in ("topic", "partition", "replicas")))
        if dead in r
    }
    assert evacuated <= {(p["topic"], p["partition"]) for p in moved}
    # And the rollback puts each replica back in the log dir it came from ("any": the dead broker's, unknown)
    rollback = json.loads((tmp_path / "waves" / "rollback.json").read_text())["partitions"]
    for entry in rollback:
        home = f"/var/lib/kafka/data-{kafka_samples.dir_index(entry['topic'], entry['partition'])}"
        assert entry["log_dirs"] == ["any" if b == dead else home for b in entry["replicas"]], entry
    check_kafka_format({"version": 1, "partitions": rollback})

    # When importing the same files again (Spark is not even needed to see that), then planning again:
    # nothing is written
    before = versions(warehouse)
    with monkeypatch.context() as patched:
        patched.setattr("jobs.session.get_spark", lambda *a, **k: pytest.fail("a no-op import started Spark"))
        assert cli.main(["import", "--warehouse", warehouse, "--manifest", str(manifest)]) == 0
    assert "is already in the warehouse: nothing written" in capsys.readouterr().out
    assert plan(warehouse) == 0
    assert versions(warehouse) == before


def test_throughput_estimated_from_size_growth_between_two_snapshots_ten_minutes_apart(
    spark, warehouse, tmp_path, capsys
):
    # Given a snapshot written by an older collector (no log_dirs column), without throughput
    fleet = demo_fleet()
    for name in ("brokers", "partitions"):
        write_with_delta_rs(warehouse, name, of(fleet[name], "cluster-1"))
    # And the cluster's tool output ten minutes later, every partition grown (one shrunk: retention)
    later = DEMO_SNAPSHOT + dt.timedelta(minutes=10)
    grown = demo_fleet(later)
    parts = grown["partitions"]
    growth = pd.Series(range(len(parts)), dtype="int64") * 6_000 + 600
    growth[0] = -5_000
    parts["size_bytes"] = parts["size_bytes"] + growth
    paths = write_files(tmp_path / "later", grown, "cluster-1", rates=False)
    # When importing them with a fan-out of 2.5
    assert import_files(warehouse, "cluster-1", paths, "--snapshot-ts", later.isoformat(), "--fan-out", "2.5") == 0
    out = capsys.readouterr().out
    assert "throughput: ESTIMATED from size growth over 10 min (since the snapshot of 2026-11-01T00:00:00+00:00)" in out
    # Then each partition's rate is its size growth / 600 s (never negative), bytes_out 2.5x that
    rates = table(warehouse, "throughput").sort_values(["topic", "partition"], ignore_index=True)
    mine = of(parts, "cluster-1").assign(growth=growth[parts["cluster_id"] == "cluster-1"].to_numpy())
    mine = mine.sort_values(["topic", "partition"], ignore_index=True)
    assert rates["snapshot_ts"].eq(pd.Timestamp(later)).all() and len(rates) == len(mine)
    assert rates["bytes_in_per_sec"].tolist() == pytest.approx((mine["growth"].clip(lower=0) / 600).tolist())
    assert rates["bytes_out_per_sec"].tolist() == pytest.approx((mine["growth"].clip(lower=0) / 600 * 2.5).tolist())
    assert rates["bytes_in_per_sec"].min() == 0.0
    # And the old snapshot still reads, its log dirs null; the planner plans the new one
    snapshots = table(warehouse, "partitions").groupby("snapshot_ts")["log_dirs"].apply(lambda s: s.notna().all())
    assert snapshots.to_dict() == {pd.Timestamp(DEMO_SNAPSHOT): False, pd.Timestamp(later): True}
    assert plan(warehouse) == 0
    assert table(warehouse, "plan_runs")["snapshot_ts"].tolist() == [pd.Timestamp(later)]


BAD = {
    "topics": ("\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,x\tIsr: 1\n", "line 1: Replicas: expected broker ids"),
    "brokers": ("k:9092 (id: 1 rack: null) -> (\n\tProduce(0): 0 to 9 [usable: 9],\n", "line 1: this broker's API"),
    "log_dirs": ('Querying brokers\n{"version":1,"brokers":[{"broker":1,"logDirs":[', "line 2 column 48: JSON does"),
}


@pytest.mark.parametrize("kind", BAD)
def test_a_bad_file_exits_2_naming_file_and_line_and_writes_nothing(spark, warehouse, tmp_path, capsys, kind):
    paths = write_files(tmp_path, demo_fleet(), "cluster-1")
    Path(paths[kind]).write_text(BAD[kind][0])
    assert import_files(warehouse, "cluster-1", paths) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"partition-planner: error: {paths[kind]}: {BAD[kind][1]}") and "Traceback" not in err
    assert not Path(warehouse).exists() or not any(Path(warehouse).iterdir())


def test_an_interrupted_import_is_invisible_and_rerunning_it_completes_it(spark, warehouse, tmp_path, monkeypatch):
    from jobs.warehouse import Warehouse

    paths = write_files(tmp_path, demo_fleet(), "cluster-1")
    real_append = Warehouse.append

    def killed_before_partitions(self, spec, *args, **kwargs):
        if spec.name == "partitions":
            raise RuntimeError("killed")
        return real_append(self, spec, *args, **kwargs)

    monkeypatch.setattr(Warehouse, "append", killed_before_partitions)
    with pytest.raises(RuntimeError, match="killed"):
        import_files(warehouse, "cluster-1", paths)
    monkeypatch.undo()
    # the planner sees no snapshot: its partitions rows were never written
    assert not DeltaTable.is_deltatable(f"{warehouse}/partitions")
    written = table(warehouse, "brokers")["snapshot_ts"].iloc[0]
    # the same command again, with no --snapshot-ts, completes that snapshot instead of starting a new one
    assert import_files(warehouse, "cluster-1", paths) == 0
    brokers, partitions = table(warehouse, "brokers"), table(warehouse, "partitions")
    assert set(brokers["snapshot_ts"]) == {written} == set(partitions["snapshot_ts"])
    assert len(brokers) == len(of(demo_fleet()["brokers"], "cluster-1"))
    assert plan(warehouse) == 0


def test_other_files_at_a_time_already_imported_are_refused(spark, warehouse, tmp_path, capsys):
    fleet = demo_fleet()
    first = write_files(tmp_path / "a", fleet, "cluster-1")
    assert import_files(warehouse, "cluster-1", first, "--snapshot-ts", "2026-11-02T00:00:00Z") == 0
    before = versions(warehouse)
    other = write_files(tmp_path / "b", fleet, "cluster-1")
    Path(other["brokers"]).write_text(Path(other["brokers"]).read_text() + "\n")  # other bytes: other files
    assert import_files(warehouse, "cluster-1", other, "--snapshot-ts", "2026-11-02T00:00:00Z") == 2
    err = capsys.readouterr().err
    assert (
        "tables throughput, brokers, partitions already hold a snapshot of cluster cluster-1 at "
        "2026-11-02T00:00:00+00:00" in err
    )
    assert versions(warehouse) == before


def in_flight(text: str, partition_line: str) -> tuple[str, list[int], list[int]]:
    """The describe text with one partition mid-reassignment, as Kafka prints it (KIP-455): its third replica
    is being replaced by a broker that held none of it; Replicas lists the target, then the one removed."""
    line = next(line for line in text.splitlines() if partition_line in line)
    cells = dict(c.split(": ", 1) for c in line.strip().split("\t") if ": " in c)
    replicas = [int(b) for b in cells["Replicas"].split(",")]
    brokers = sorted(
        {
            int(b)
            for row in text.splitlines()
            if "Replicas: " in row
            for b in row.split("Replicas: ")[1].split("\t")[0].split(",")
        }
    )
    newcomer = next(b for b in brokers if b not in replicas)
    target = [*replicas[:-1], newcomer]
    union = ",".join(map(str, [*target, replicas[-1]]))
    moved = line.replace(f"Replicas: {cells['Replicas']}", f"Replicas: {union}").replace(
        "\tElr:", f"\tAdding Replicas: {newcomer}\tRemoving Replicas: {replicas[-1]}\tElr:"
    )
    return text.replace(line, moved), target, replicas


def test_issue_37_import_plan_export_of_a_reassignment_in_flight_keep_every_replication_factor(
    spark, warehouse, tmp_path, capsys
):
    """Finding 2 / acceptance 3: the in-flight partition was imported with four replicas and planned as RF 4."""
    paths = write_files(tmp_path, demo_fleet(), "cluster-1")
    text, target, origin = in_flight(Path(paths["topics"]).read_text(), "Partition: 3\t")
    Path(paths["topics"]).write_text(text)
    assert import_files(warehouse, "cluster-1", paths) == 0
    out = capsys.readouterr().out
    assert "1 partition in the middle of a reassignment" in out
    rows = table(warehouse, "partitions")
    moving = rows[rows["adding_replicas"].notna()]
    assert len(moving) == 1 and list(moving["removing_replicas"].iloc[0]) == [origin[-1]]
    key = (moving["topic"].iloc[0], int(moving["partition"].iloc[0]))

    assert plan(warehouse) == 0
    run = table(warehouse, "plan_runs").iloc[0]
    assert "1 partition mid-reassignment in the snapshot" in run["notes"] and f"{key[0]}:{key[1]}" in run["notes"]
    rf = {(t, int(p)): len(r) for t, p, r in zip(rows["topic"], rows["partition"], rows["replicas"])}
    rf[key] = len(target)
    plans = table(warehouse, "plans")
    assert {(t, int(p)): len(r) for t, p, r in zip(plans["topic"], plans["partition"], plans["replicas"])} == rf
    moves = table(warehouse, "moves")
    assert all(len(f) == rf[(t, int(p))] for t, p, f in zip(moves["topic"], moves["partition"], moves["from_replicas"]))
    assert (
        cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--out-dir", str(tmp_path / "x")]) == 0
    )
    for name in [*sorted((tmp_path / "x").glob("wave-*.json")), tmp_path / "x" / "rollback.json"]:
        for entry in json.loads(Path(name).read_text())["partitions"]:
            assert len(entry["replicas"]) == rf[(entry["topic"], entry["partition"])], (name, entry)


@pytest.mark.parametrize("where", ["mid-line", "mid-topic"])
def test_issue_37_a_topics_file_cut_short_is_refused_with_exit_2_and_nothing_written(
    spark, warehouse, tmp_path, capsys, where
):
    """Finding 1 / acceptance 3: a file whose last line stops inside the replica list imported with exit 0."""
    paths = write_files(tmp_path, demo_fleet(), "cluster-1")
    text = Path(paths["topics"]).read_text()
    lines = text.splitlines(keepends=True)
    partition_rows = [i for i, line in enumerate(lines) if "Partition: 1\t" in line]
    last = partition_rows[len(partition_rows) // 2]
    if where == "mid-line":
        cut = (
            "".join(lines[:last])
            + lines[last].split("Replicas: ")[0]
            + "Replicas: "
            + lines[last].split("Replicas: ")[1][:1]
        )
        expected = f"line {last + 1}: the file ends inside this partition line"
    else:
        cut = "".join(lines[: last + 1])
        expected = "its header says PartitionCount"
    Path(paths["topics"]).write_text(cut)
    assert import_files(warehouse, "cluster-1", paths) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"partition-planner: error: {paths['topics']}: ") and expected in err
    assert len(err.strip().splitlines()) == 1
    assert not any(Path(warehouse, name).exists() for name in ("brokers", "partitions", "throughput"))


def test_broker_tags_from_an_imported_csv_place_a_topic_through_the_spark_job(spark, warehouse, tmp_path):
    # the brokers CSV carries placement tags (a collector could write the same columns); a rule of the config
    # requires one of them: the committed plan keeps that topic on the tagged brokers only
    fleet = demo_fleet()
    cluster = "cluster-1"
    paths = write_files(tmp_path / "files", fleet, cluster)
    brokers = of(fleet["brokers"], cluster)
    ssd = {1, 2, 3, 4}  # one per rack at least (racks az1..az3)
    tier = {int(b): "tier=ssd" if b in ssd else "tier=hdd" for b in brokers["broker_id"]}
    cells = zip(brokers["broker_id"], brokers["rack"], brokers["state"])
    rows = [f"{b},{rack or ''},{state},{tier[int(b)]}" for b, rack, state in cells]
    Path(paths["brokers"]).write_text("broker_id,rack,state,tags\n" + "\n".join(rows) + "\n")
    assert import_files(warehouse, cluster, paths) == 0
    assert sorted(table(warehouse, "brokers")["tags"].dropna()) == sorted(tier.values())
    config = tmp_path / "rules.toml"
    config.write_text('[[constraints.placement]]\ntopics = "orders.*"\nrequire_tags = { tier = "ssd" }\n')
    assert plan(warehouse, "--config", str(config), "--cluster", cluster) == 0
    plans = table(warehouse, "plans")
    orders = plans[plans["topic"].str.startswith("orders")]
    assert len(orders) and all(set(r) <= ssd for r in orders["replicas"])
