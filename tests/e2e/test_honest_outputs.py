"""Every output says what happened: exit codes, warnings, run ids, never-worse, dry runs, the demo's guard."""

from __future__ import annotations

import datetime as dt
import io
import json

import pandas as pd
import pytest

from jobs import cli
from jobs.config import parse_config
from jobs.demo import DEMO_SNAPSHOT
from jobs.history import derive_run_id
from tests.e2e.test_plan_cli import LATER, plan, small_fleet, table, versions, write_fleet

pytestmark = pytest.mark.integration


@pytest.fixture
def planned(spark, warehouse):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    return warehouse


def test_as_of_before_every_snapshot_exits_1_naming_the_earliest(spark, warehouse, capsys):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse, "--as-of", "2026-10-01") == 1
    err = capsys.readouterr().err
    assert "no snapshot at or before 2026-10-01T00:00:00+00:00 in table partitions" in err
    assert "the earliest is 2026-11-01T00:00:00+00:00" in err
    assert versions(warehouse)["plan_runs"] is None


@pytest.mark.parametrize("command", ["sql", "report", "export"])
def test_the_read_side_on_a_missing_warehouse_or_table_exits_2_naming_the_path(spark, tmp_path, capsys, command):
    extra = {"sql": ["SELECT 1"], "report": ["--out", str(tmp_path / "r")], "export": ["--cluster", "c"]}[command]
    nowhere = tmp_path / "no-such-warehouse"
    assert cli.main([command, "--warehouse", str(nowhere), *extra]) == 2
    assert f"no warehouse at {nowhere}" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main([command, "--warehouse", str(empty), *extra]) == 2
    err = capsys.readouterr().err
    assert "no Delta table" in err and str(empty) in err
    if command != "sql":
        assert f"plan_runs at {empty / 'plan_runs'}" in err


def test_export_of_a_wave_beyond_the_plan_exits_2_naming_the_wave_count(planned, tmp_path, capsys):
    runs = table(planned, "plan_runs").set_index("cluster_id")
    waves = int(runs.loc["cluster-1", "waves"])
    moves = table(planned, "moves")
    assert waves == moves.loc[moves.cluster_id == "cluster-1", "wave"].max()
    out = tmp_path / "w.json"
    args = ["export", "--warehouse", planned, "--cluster", "cluster-1", "--out", str(out)]
    assert cli.main([*args, "--wave", str(waves + 1)]) == 2
    assert f"has {waves} waves (1-{waves}); --wave {waves + 1} is not one" in capsys.readouterr().err
    assert not out.exists()
    assert cli.main([*args, "--wave", str(waves)]) == 0
    assert len(json.loads(out.read_text())["partitions"]) > 0


def test_config_naming_unknown_clusters_topics_and_partitions_warns(spark, warehouse, tmp_path, capsys):
    write_fleet(warehouse, small_fleet())
    config = tmp_path / "typos.toml"
    config.write_text(
        '[constraints.replication_factor]\n"topic-0000" = 3\n"topic-typo" = 2\n'
        '[clusters."cluster-9".constraints]\nrack_aware = true\n'
        '[clusters."cluster-1".constraints.preferred_leaders]\n"topic-0000:999" = 2\n'
    )
    assert plan(warehouse, "--config", str(config)) == 0
    err = capsys.readouterr().err
    assert "warning: config [clusters.'cluster-9'] names a cluster with no snapshot in table partitions" in err
    for cluster in ("cluster-1", "cluster-2"):
        assert f"warning: cluster {cluster}: config names replication_factor topic-typo" in err
    assert "warning: cluster cluster-1: config names preferred_leaders topic-0000:999" in err
    notes = table(warehouse, "plan_runs").set_index("cluster_id")["notes"]
    assert "preferred_leaders topic-0000:999" in notes["cluster-1"] and "topic-typo" in notes["cluster-2"]


def test_a_reused_run_id_must_name_the_same_run(planned, tmp_path, capsys):
    # Given a committed run with an explicit id
    assert plan(planned, "--run-id", "manual-1", "--strategy", "rendezvous", "--allow-worse") == 0
    before = versions(planned)
    # When the same id is reused with a different strategy, config or cluster selection: exit 2, nothing written
    config = tmp_path / "other.toml"
    config.write_text("[planner]\nstrategy = 'rendezvous'\nseed = 7\nallow_worse = true\n")
    cases = [
        (["--strategy", "sticky", "--allow-worse"], "cluster cluster-1: strategy rendezvous then, sticky now"),
        (["--config", str(config)], "cluster cluster-1: config"),
        (
            ["--strategy", "rendezvous", "--allow-worse", "--cluster", "cluster-1"],
            "clusters ['cluster-1', 'cluster-2'] then, ['cluster-1'] now",
        ),
    ]
    for args, fragment in cases:
        capsys.readouterr()
        assert plan(planned, "--run-id", "manual-1", *args) == 2, args
        err = capsys.readouterr().err
        assert "run id 'manual-1' was used for a different run" in err and fragment in err, err
        assert versions(planned) == before
    # And the same run again is a no-op that names what it really committed
    capsys.readouterr()
    assert plan(planned, "--run-id", "manual-1", "--strategy", "rendezvous", "--allow-worse") == 0
    out = capsys.readouterr().out
    status = table(planned, "plan_runs").query("run_id == 'manual-1'").set_index("cluster_id")
    for cluster, row in status.iterrows():
        assert f"{cluster:<14} {row['status']:<9} v{row['plan_version']}" in out
        assert "rendezvous      already" in out
    assert versions(planned) == before
    # And an empty id is a usage error
    assert plan(planned, "--run-id", "") == 2
    assert "--run-id is empty" in capsys.readouterr().err


def test_the_derived_run_id_changes_whenever_the_plan_could():
    snapshots = {"c1": DEMO_SNAPSHOT, "c2": DEMO_SNAPSHOT}
    base = parse_config({})

    def run_id(config, snaps=snapshots, strategy=None):
        return derive_run_id({c: config.cluster_hash(c, strategy) for c in snaps}, snaps)

    variants = {
        "strategy": run_id(base, strategy="sticky"),
        "seed": run_id(parse_config({"planner": {"seed": 1}})),
        "constraint": run_id(parse_config({"constraints": {"excluded_brokers": [3]}})),
        "cluster override": run_id(parse_config({"clusters": {"c2": {"constraints": {"max_moves": 5}}}})),
        "allow_worse": run_id(parse_config({"planner": {"allow_worse": True}})),
        "load weights": run_id(parse_config({"planner": {"load_weights": {"leader_out": 2.0}}})),
        "waves": run_id(parse_config({"planner": {"wave_broker_limit": 3}})),
        "snapshot": run_id(base, {"c1": DEMO_SNAPSHOT, "c2": LATER}),
        "selection": run_id(base, {"c1": DEMO_SNAPSHOT}),
    }
    plain = run_id(base)
    assert plain == run_id(parse_config({"job": {"warehouse": "elsewhere"}}))  # where tables live changes no plan
    assert all(v != plain for v in variants.values()), variants
    assert len(set(variants.values())) == len(variants)


def test_a_plan_that_makes_the_cluster_worse_is_skipped_unless_allowed(spark, warehouse, tmp_path, capsys):
    # Given a cluster whose live layout is sticky's balanced plan (v1, executed)
    fleet = small_fleet()
    write_fleet(warehouse, fleet)
    assert plan(warehouse, "--strategy", "sticky", "--cluster", "cluster-1") == 0
    v1 = table(warehouse, "plans").set_index(["topic", "partition"])["replicas"]
    executed = {k: v.assign(snapshot_ts=LATER) for k, v in fleet.items()}
    parts = executed["partitions"]
    c1 = parts["cluster_id"] == "cluster-1"
    rows = parts.index[c1]
    parts.loc[rows, "replicas"] = pd.Series(
        [list(v1[(t, p)]) for t, p in zip(parts.loc[rows, "topic"], parts.loc[rows, "partition"])], index=rows
    )
    parts.loc[rows, "leader"] = [r[0] for r in parts.loc[rows, "replicas"]]  # executed: the leader follows
    write_fleet(warehouse, executed)
    capsys.readouterr()
    # When rendezvous would spread it by hash: skipped, both scores named
    assert plan(warehouse, "--strategy", "rendezvous", "--cluster", "cluster-1") == 0
    out = capsys.readouterr().out
    row = table(warehouse, "plan_runs").sort_values("finished_at").iloc[-1]
    assert row["status"] == "skipped" and row["plan_version"] == 1 and pd.isna(row["error"])
    assert f"from {row['balance_score_before']:g} to {row['balance_score_after']:g}" in row["notes"]
    assert row["balance_score_after"] < row["balance_score_before"] and "--allow-worse" in out
    # And --allow-worse commits it as v2, saying so
    assert plan(warehouse, "--strategy", "rendezvous", "--cluster", "cluster-1", "--allow-worse") == 0
    row = table(warehouse, "plan_runs").sort_values("finished_at").iloc[-1]
    assert row["status"] == "committed" and row["plan_version"] == 2 and "allowed by allow_worse" in row["notes"]


def test_a_dry_run_never_says_committed(spark, warehouse, capsys):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse, "--dry-run") == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cluster-")]
    assert len(lines) == 2 and all(" dry-run " in line and "committed" not in line for line in lines)
    assert versions(warehouse)["plans"] is None


def test_the_summary_line_states_what_the_plan_costs(spark, warehouse, capsys):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse, "--dry-run", "--cluster", "cluster-1") == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("cluster-1"))
    assert plan(warehouse, "--cluster", "cluster-1") == 0  # the same plan, committed: its figures are in plan_runs
    r = table(warehouse, "plan_runs").set_index("cluster_id").loc["cluster-1"]
    assert "2026-11-01T00:00Z" in line  # the snapshot planned from
    assert f"moves {r['moves']:,} replicas in {r['partitions_moved']:,} partitions" in line
    assert f"{r['waves']} waves" in line and "GiB" in line and "rack_violations" in line


def test_demo_refuses_a_snapshot_that_collides_with_another_fleet(spark, warehouse, capsys):
    args = ["demo", "--warehouse", warehouse, "--clusters", "1", "--topics", "5", "--partitions", "40"]
    assert cli.main([*args, "--brokers", "6"]) == 0
    before = versions(warehouse)
    assert cli.main([*args, "--brokers", "9"]) == 2
    assert "already holds a snapshot of cluster-1 at 2026-11-01" in capsys.readouterr().err
    assert versions(warehouse) == before
    assert cli.main([*args, "--brokers", "6"]) == 0  # the same demo again: plans again, writes nothing new
    assert versions(warehouse) == before


def test_sql_errors_are_one_message_and_the_prompt_reads_statements(planned, capsys, monkeypatch):
    assert cli.main(["sql", "--warehouse", planned, "SELECT nope FROM plans"]) == 2
    err = capsys.readouterr().err
    assert "No field named nope" in err and "Project" not in err and "at org.apache" not in err
    assert len(err) < 600, err
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT count(*) AS n\nFROM plans_latest;\nSELECT 'second' AS s;\n"))
    assert cli.main(["sql", "--warehouse", planned]) == 0
    out = capsys.readouterr().out
    assert str(len(table(planned, "plans"))) in out and "second" in out


def test_a_cluster_first_planned_before_as_of_is_not_left_out_silently(spark, warehouse, capsys):
    write_fleet(warehouse, small_fleet())
    later_only = {
        k: v[v["cluster_id"] == "cluster-2"].assign(snapshot_ts=LATER, cluster_id="cluster-3")
        for k, v in small_fleet().items()
    }
    write_fleet(warehouse, later_only)
    as_of = (DEMO_SNAPSHOT + dt.timedelta(hours=1)).isoformat()
    assert plan(warehouse, "--as-of", as_of, "--cluster", "cluster-3") == 1
    assert "the earliest is 2026-11-01T06:00:00+00:00 (cluster cluster-3)" in capsys.readouterr().err
    assert plan(warehouse, "--as-of", as_of) == 0  # without --cluster it did not exist yet: planned are 1 and 2
    assert sorted(table(warehouse, "plan_runs")["cluster_id"]) == ["cluster-1", "cluster-2"]


def test_spark_start_up_lines_and_warnings_stay_out_of_the_terminal(spark, warehouse, tmp_path):
    # a fresh process: this session's JVM is already running
    import os
    import subprocess
    import sys

    write_fleet(warehouse, small_fleet())
    jvm_log = tmp_path / "jvm.log"
    env = {**os.environ, "PARTITION_PLANNER_JVM_LOG": str(jvm_log)}
    command = [sys.executable, "-m", "jobs.cli", "plan", "--warehouse", warehouse, "--dry-run", "--log-level", "ERROR"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # nothing from Spark, nothing from us at ERROR
    assert "dry-run" in done.stdout
    assert "log4j" in jvm_log.read_text()  # Spark's banner went to the log file instead
