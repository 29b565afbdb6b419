"""Trust under bad clocks (issue 15): a stale snapshot fails its cluster by name, a snapshot from the future
cannot shadow the real ones; and orphans of a killed run vanish for plain readers after the next run."""

from __future__ import annotations

import datetime as dt

import pytest

from jobs import cli
from tests.conftest import write_with_delta_rs
from tests.e2e.test_plan_cli import LATER, plan, small_fleet, table, write_fleet

pytestmark = pytest.mark.integration


def test_a_snapshot_older_than_max_snapshot_age_fails_its_cluster_naming_the_time(spark, warehouse, tmp_path, capsys):
    write_fleet(warehouse, small_fleet())  # snapshots of 2026-11-01, weeks before the run
    config = tmp_path / "age.toml"
    config.write_text('[job]\nmax_snapshot_age = "6h"\n')
    assert plan(warehouse, "--config", str(config)) == 1
    out = capsys.readouterr().out
    assert "cluster-1" in out and "the newest snapshot in table partitions is from 2026-11-01T00:00:00+00:00" in out
    assert "older than max_snapshot_age 6.0h" in out
    runs = table(warehouse, "plan_runs")
    assert set(runs["status"]) == {"failed"} and len(runs) == 2
    from deltalake import DeltaTable

    assert not DeltaTable.is_deltatable(f"{warehouse}/plans"), "nothing planned for a stale cluster"
    # planning as of the snapshot's own time measures the age from then: fine
    assert plan(warehouse, "--config", str(config), "--as-of", "2026-11-01T03:00:00Z") == 0


def test_a_snapshot_from_the_future_is_ignored_with_a_warning_unless_asked_for(spark, warehouse, capsys):
    write_fleet(warehouse, small_fleet())
    future = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=3)
    ahead = small_fleet(future, seed=9)
    for name in ("brokers", "partitions", "throughput"):
        write_with_delta_rs(warehouse, name, ahead[name][ahead[name]["cluster_id"] == "cluster-1"])
    assert plan(warehouse) == 0
    captured = capsys.readouterr()
    assert f"cluster cluster-1: ignored the snapshot of {future.isoformat()}" in captured.err
    runs = table(warehouse, "plan_runs").set_index("cluster_id")
    assert runs.loc["cluster-1", "snapshot_ts"].to_pydatetime() == small_fleet()["partitions"]["snapshot_ts"].iloc[0]
    # a real snapshot written after the bad one is still planned from
    write_fleet(warehouse, small_fleet(LATER, seed=4))
    assert plan(warehouse) == 0
    runs = table(warehouse, "plan_runs")
    assert runs.loc[runs["cluster_id"] == "cluster-1", "snapshot_ts"].max() == LATER
    # --as-of selects the future snapshot explicitly
    assert plan(warehouse, "--as-of", (future + dt.timedelta(hours=1)).isoformat()) == 0
    runs = table(warehouse, "plan_runs")
    assert runs.loc[runs["cluster_id"] == "cluster-1", "snapshot_ts"].max() == future


def test_maintain_deletes_orphans_compacts_and_vacuums_and_the_warehouse_still_plans(
    spark, warehouse, monkeypatch, capsys
):
    from jobs import pipeline

    write_fleet(warehouse, small_fleet())
    monkeypatch.setattr(pipeline, "write_plan_runs", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("killed")))
    with pytest.raises(RuntimeError):
        plan(warehouse, "--run-id", "killed")
    monkeypatch.undo()
    monkeypatch.setattr(pipeline, "remove_orphans", lambda *a, **k: None)  # as if the run died right after
    assert plan(warehouse, "--run-id", "good") == 0
    monkeypatch.undo()
    assert "killed" in set(table(warehouse, "plans")["run_id"])
    write_fleet(warehouse, small_fleet(LATER, seed=5))  # a second snapshot: two small files per input table
    from deltalake import DeltaTable

    files_before = len(DeltaTable(f"{warehouse}/partitions").file_uris())
    capsys.readouterr()
    assert cli.main(["maintain", "--warehouse", warehouse, "--retain", "0h"]) == 0
    out = capsys.readouterr().out
    assert "plans " in out and "orphan rows deleted" in out and "files compacted into" in out
    plans = table(warehouse, "plans")
    assert "killed" not in set(plans["run_id"]) and "killed" not in set(table(warehouse, "moves")["run_id"])
    assert len(DeltaTable(f"{warehouse}/partitions").file_uris()) < files_before
    runs = table(warehouse, "plan_runs")
    assert len(plans) == runs.loc[runs["status"] == "committed", "partitions"].sum()
    # the maintained warehouse reads and plans as before: the new snapshot a new version, a rerun a no-op
    assert plan(warehouse) == 0
    assert set(table(warehouse, "plan_runs")["plan_version"]) == {1, 2}
    assert plan(warehouse) == 0
    assert len(table(warehouse, "plan_runs")) == len(runs) + 2
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--wave", "1"]) == 0
    assert cli.main(["maintain", "--warehouse", warehouse, "--retain", "a week"]) == 2


def test_a_cluster_above_max_partitions_per_cluster_fails_before_a_worker_holds_it(spark, warehouse, tmp_path, capsys):
    fleet = small_fleet()
    parts = fleet["partitions"]
    fleet["partitions"] = parts[(parts["cluster_id"] == "cluster-1") | (parts.groupby("cluster_id").cumcount() < 40)]
    write_fleet(warehouse, fleet)
    config = tmp_path / "size.toml"
    config.write_text("[job]\nmax_partitions_per_cluster = 50\n")
    assert plan(warehouse, "--config", str(config)) == 1
    out = capsys.readouterr().out
    assert (
        "cluster cluster-1: 60 partitions in its snapshot (table partitions), above max_partitions_per_cluster 50"
        in out
    )
    runs = table(warehouse, "plan_runs").set_index("cluster_id")
    assert runs.loc["cluster-1", "status"] == "failed" and runs.loc["cluster-2", "status"] == "committed"
    assert set(table(warehouse, "plans")["cluster_id"]) == {"cluster-2"}
