"""Bad input is refused by name (issue 15): one fleet, one defect per cluster, one healthy cluster. Each broken
cluster fails with a message naming the cluster, the table and the offending row, gets no plans / moves rows,
and the healthy one commits; whole-table problems (schema, a corrupt log) exit 1 naming the table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from deltalake import DeltaTable

from jobs import cli
from jobs.demo import generate_fleet
from tests.conftest import write_with_delta_rs
from tests.e2e.test_plan_cli import plan, table, write_fleet

pytestmark = pytest.mark.integration
Frames = dict[str, pd.DataFrame]


def first_row(frames: Frames, name: str, cluster: str) -> int:
    frame = frames[name]
    return int(frame.index[frame["cluster_id"] == cluster][0])


def set_cell(name: str, column: str, value: object) -> Callable[[Frames, str], None]:
    def defect(frames: Frames, cluster: str) -> None:
        frames[name][column] = frames[name][column].astype(object)
        frames[name].at[first_row(frames, name, cluster), column] = value

    return defect


def duplicate_row(name: str) -> Callable[[Frames, str], None]:
    def defect(frames: Frames, cluster: str) -> None:
        row = frames[name].loc[[first_row(frames, name, cluster)]]
        frames[name] = pd.concat([frames[name], row], ignore_index=True)

    return defect


def replicas(value: list[int | None]) -> Callable[[Frames, str], None]:
    def defect(frames: Frames, cluster: str) -> None:
        frames["partitions"].at[first_row(frames, "partitions", cluster), "replicas"] = value

    return defect


def some_racks_null(frames: Frames, cluster: str) -> None:
    frames["brokers"].at[first_row(frames, "brokers", cluster), "rack"] = None


def leader_elsewhere(frames: Frames, cluster: str) -> None:
    i = first_row(frames, "partitions", cluster)
    frames["partitions"].at[i, "leader"] = 99


def unknown_broker(frames: Frames, cluster: str) -> None:
    i = first_row(frames, "partitions", cluster)
    frames["partitions"].at[i, "replicas"] = [*list(frames["partitions"].at[i, "replicas"])[:-1], 77]


# defect -> (what the message says, the table it names)
CASES: dict[str, tuple[Callable[[Frames, str], None], str, str]] = {
    "duplicate partition": (duplicate_row("partitions"), "duplicate partition", "partitions"),
    "duplicate broker": (duplicate_row("brokers"), "duplicate broker_id", "brokers"),
    "replica on unknown broker": (unknown_broker, "replica on an unknown broker", "partitions"),
    "negative rate": (set_cell("throughput", "bytes_in_per_sec", -5.0), "negative bytes_in_per_sec", "throughput"),
    "NaN rate": (set_cell("throughput", "bytes_in_per_sec", np.nan), "NaN bytes_in_per_sec", "throughput"),
    "infinite rate": (set_cell("throughput", "bytes_out_per_sec", np.inf), "infinite bytes_out_per_sec", "throughput"),
    "negative size": (set_cell("partitions", "size_bytes", -1), "negative size_bytes", "partitions"),
    "leader not a replica": (leader_elsewhere, "leader not among the replicas", "partitions"),
    "rack missing on some brokers": (some_racks_null, "rack missing on some brokers", "brokers"),
    "unknown state": (set_cell("brokers", "state", "zombie"), "state must be one of", "brokers"),
    "null state": (set_cell("brokers", "state", None), "state must be one of", "brokers"),
    "null topic": (set_cell("partitions", "topic", None), "null topic", "partitions"),
    "null partition": (set_cell("partitions", "partition", None), "null partition", "partitions"),
    "empty replica list": (replicas([]), "empty replica list", "partitions"),
    "repeated broker": (replicas([1, 1, 2]), "broker repeated in a replica list", "partitions"),
    "null broker in a list": (replicas([1, None, 2]), "null broker id in a replica list", "partitions"),
    "negative partition number": (set_cell("partitions", "partition", -3), "negative partition number", "partitions"),
    "negative weight": (set_cell("brokers", "weight", -2.0), "invalid weight", "brokers"),
    "zero cores": (set_cell("brokers", "cores", 0), "invalid cores", "brokers"),
    "negative max_partitions": (set_cell("brokers", "max_partitions", -1), "invalid max_partitions", "brokers"),
    "negative disk capacity": (
        set_cell("brokers", "disk_capacity_bytes", -1),
        "invalid disk_capacity_bytes",
        "brokers",
    ),
}


def broken_fleet() -> tuple[Frames, dict[str, str]]:
    """A fleet of one cluster per case plus a healthy last one; returns the frames and case per cluster."""
    frames = generate_fleet(clusters=len(CASES) + 1, brokers=6, topics=3, partitions=12, seed=2)
    owners = {}
    for k, (case, (defect, _, _)) in enumerate(CASES.items()):
        cluster = f"cluster-{k + 1}"
        defect(frames, cluster)
        owners[cluster] = case
    return frames, owners


def test_every_malformed_snapshot_is_refused_by_name_and_the_healthy_cluster_commits(spark, warehouse, capsys):
    frames, owners = broken_fleet()
    healthy = f"cluster-{len(CASES) + 1}"
    # a throughput row of a partition the healthy cluster does not have: a note, not a failure
    stray = frames["throughput"][frames["throughput"]["cluster_id"] == healthy].head(1).assign(topic="gone")
    frames["throughput"] = pd.concat([frames["throughput"], stray], ignore_index=True)
    write_fleet(warehouse, frames)
    assert plan(warehouse) == 1
    out = capsys.readouterr().out
    runs = table(warehouse, "plan_runs").set_index("cluster_id")
    plans = table(warehouse, "plans")
    moves = table(warehouse, "moves") if DeltaTable.is_deltatable(f"{warehouse}/moves") else plans.iloc[0:0]
    for cluster, case in owners.items():
        _, says, named_table = CASES[case]
        error = runs.loc[cluster, "error"]
        assert runs.loc[cluster, "status"] == "failed", (case, runs.loc[cluster, "notes"])
        assert error.startswith(f"cluster {cluster}: ") and says in error, (case, error)
        assert f"(table {named_table})" in error and "offending row" in error, (case, error)
        assert cluster in out and says in out, case
        assert not (plans["cluster_id"] == cluster).any() and not (moves["cluster_id"] == cluster).any(), case
    assert runs.loc[healthy, "status"] == "committed"
    assert "1 partitions in table throughput are not in the snapshot (ignored): gone:" in runs.loc[healthy, "notes"]


def test_a_column_of_the_wrong_type_or_a_missing_column_fails_naming_the_table(spark, warehouse, capsys):
    frames = generate_fleet(clusters=1, brokers=6, topics=3, partitions=12, seed=2)
    for name in ("brokers", "throughput"):
        write_with_delta_rs(warehouse, name, frames[name])
    import pyarrow as pa
    from deltalake import write_deltalake

    text = pa.Table.from_pandas(frames["partitions"].astype({"partition": str}), preserve_index=False)
    write_deltalake(f"{warehouse}/partitions", text)
    assert plan(warehouse) == 1
    err = capsys.readouterr().err
    assert "partitions" in err and "partition" in err and ("type" in err or "string" in err), err
    assert not DeltaTable.is_deltatable(f"{warehouse}/plans")


def test_a_corrupt_delta_log_is_one_message_naming_the_table(spark, warehouse, capsys):
    write_fleet(warehouse, generate_fleet(clusters=1, brokers=6, topics=3, partitions=12, seed=2))
    log = Path(warehouse) / "partitions" / "_delta_log" / "00000000000000000000.json"
    log.write_text(log.read_text()[:-40])  # truncated
    assert plan(warehouse) == 1
    err = capsys.readouterr().err
    assert "table partitions" in err and "Traceback" not in err, err


def test_the_read_side_on_a_corrupt_log_exits_1_with_one_line(spark, warehouse, capsys):
    write_fleet(warehouse, generate_fleet(clusters=1, brokers=6, topics=3, partitions=12, seed=2))
    assert plan(warehouse) == 0
    log = Path(warehouse) / "moves" / "_delta_log" / "00000000000000000000.json"
    log.write_text(log.read_text()[:100])
    capsys.readouterr()
    for command in (["status"], ["export"], ["report", "--out", f"{warehouse}-report"]):
        args = [command[0], "--warehouse", warehouse, "--cluster", "cluster-1", *command[1:]]
        assert cli.main(args) == 1, command
        err = capsys.readouterr().err.strip()
        assert err.startswith("partition-planner: error: table moves at ") and "\n" not in err, err
