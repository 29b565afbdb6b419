"""The CLI end to end on a temp warehouse: idempotence, versions, as-of, dry run, isolation, recovery."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from assigners import STRATEGIES
from jobs import cli, pipeline
from jobs.demo import DEMO_SNAPSHOT, generate_fleet
from schemas import MOVES, PLAN_RUNS, PLANS
from tests.conftest import write_with_delta_rs

pytestmark = pytest.mark.integration
TABLES = ("brokers", "partitions", "throughput", "plans", "moves", "plan_runs")
LATER = DEMO_SNAPSHOT + dt.timedelta(hours=6)


def small_fleet(ts: dt.datetime = DEMO_SNAPSHOT, seed: int = 3) -> dict[str, pd.DataFrame]:
    return generate_fleet(clusters=2, brokers=6, topics=8, partitions=60, seed=seed, snapshot_ts=ts)


def write_fleet(warehouse: str, fleet: dict[str, pd.DataFrame]) -> None:
    for name, frame in fleet.items():
        write_with_delta_rs(warehouse, name, frame)


def versions(warehouse: str) -> dict[str, int | None]:
    out = {}
    for name in TABLES:
        path = f"{warehouse}/{name}"
        out[name] = DeltaTable(path).version() if DeltaTable.is_deltatable(path) else None
    return out


def table(warehouse: str, name: str) -> pd.DataFrame:
    return DeltaTable(f"{warehouse}/{name}").to_pandas()


def plan(warehouse: str, *extra: str) -> int:
    return cli.main(["plan", "--warehouse", warehouse, *extra])


def test_plan_twice_writes_once_then_new_snapshot_is_version_2(spark, warehouse, capsys):
    # Given inputs written by another writer (delta-rs from pandas, DESIGN.md schema)
    write_fleet(warehouse, small_fleet())
    # When planning twice
    assert plan(warehouse) == 0
    first = versions(warehouse)
    assert plan(warehouse) == 0
    # Then the second run wrote nothing and says what was committed, by whom
    assert versions(warehouse) == first
    out = capsys.readouterr().out
    assert "committed v1   2026-11-01T00:00Z  balanced        already committed by run run-" in out
    # And the outputs are ordinary Delta tables with the contract schema
    plans, runs = table(warehouse, "plans"), table(warehouse, "plan_runs")
    assert list(plans.columns) == PLANS.column_names and list(runs.columns) == PLAN_RUNS.column_names
    assert list(table(warehouse, "moves").columns) == MOVES.column_names
    assert set(runs["status"]) == {"committed"} and set(plans["plan_version"]) == {1}
    assert len(plans) == len(small_fleet()["partitions"])

    # When a new snapshot arrives for cluster-1 in which broker 2 died (v1 was never executed)
    later = small_fleet(LATER)
    c1 = later["brokers"]["cluster_id"] == "cluster-1"
    later["brokers"].loc[c1 & (later["brokers"]["broker_id"] == 2), "state"] = "dead"
    for name in TABLES[:3]:
        frame = later[name]
        write_with_delta_rs(warehouse, name, frame[frame["cluster_id"] == "cluster-1"])
    assert plan(warehouse) == 0
    # Then cluster-1 gets plan_version 2 whose moves start from the live layout of the new snapshot
    plans = table(warehouse, "plans")
    v1 = plans[(plans.cluster_id == "cluster-1") & (plans.plan_version == 1)].set_index(["topic", "partition"])
    v2 = plans[(plans.cluster_id == "cluster-1") & (plans.plan_version == 2)].set_index(["topic", "partition"])
    live = later["partitions"].query("cluster_id == 'cluster-1'").set_index(["topic", "partition"])["replicas"]
    moves = table(warehouse, "moves")
    m2 = moves[(moves.cluster_id == "cluster-1") & (moves.plan_version == 2)]
    assert len(v2) == len(v1) and len(m2) > 0
    assert all(2 not in list(r) for r in v2["replicas"])
    for move in m2.itertuples():
        assert list(move.from_replicas) == list(live[(move.topic, move.partition)])
        assert list(move.to_replicas) == list(v2.loc[(move.topic, move.partition), "replicas"])
    # epochs count changes of the planned assignment (v1 -> v2), not of the live layout
    changed = [k for k in v2.index if list(v2.loc[k, "replicas"]) != list(v1.loc[k, "replicas"])]
    assert changed and all(v2.loc[k, "epoch"] == v1.loc[k, "epoch"] + 1 for k in changed)
    same = v2.index.difference(pd.MultiIndex.from_tuples(changed))
    assert (v2.loc[same, "epoch"] == v1.loc[same, "epoch"]).all()
    # And cluster-2 (same snapshot, v1 unexecuted, same target) is skipped as pending, not re-versioned
    runs = table(warehouse, "plan_runs").sort_values("finished_at")
    latest = runs.groupby("cluster_id").tail(1).set_index("cluster_id")
    assert latest.loc["cluster-1", "status"] == "committed" and latest.loc["cluster-1", "plan_version"] == 2
    assert latest.loc["cluster-2", "status"] == "skipped" and latest.loc["cluster-2", "plan_version"] == 1
    assert "v1 still pending" in latest.loc["cluster-2", "notes"]


def rf3_cluster() -> dict[str, pd.DataFrame]:
    """One cluster, 9 brokers in 3 racks, RF 3 only: losing a broker forces nothing beyond its own replicas."""
    fleet = generate_fleet(clusters=1, brokers=9, topics=8, partitions=90, seed=3)
    parts = fleet["partitions"][fleet["partitions"]["replicas"].map(len) == 3]
    keys = pd.MultiIndex.from_frame(parts[["topic", "partition"]])
    rates = fleet["throughput"]
    return {
        **fleet,
        "partitions": parts,
        "throughput": rates[pd.MultiIndex.from_frame(rates[["topic", "partition"]]).isin(keys)],
    }


def test_plans_start_from_the_live_cluster_and_keep_the_plan_in_force(spark, warehouse, tmp_path, capsys):
    # Given a sticky plan v1 of cluster-1, never executed
    config = tmp_path / "sticky.toml"
    config.write_text('[planner]\nstrategy = "sticky"\n')
    fleet = rf3_cluster()
    write_fleet(warehouse, fleet)
    assert plan(warehouse, "--config", str(config), "--cluster", "cluster-1") == 0
    plans = table(warehouse, "plans")
    v1 = plans[plans.cluster_id == "cluster-1"].set_index(["topic", "partition"])["replicas"].map(list)
    # When a new snapshot arrives with the live layout unchanged
    write_fleet(warehouse, {k: v.assign(snapshot_ts=LATER) for k, v in fleet.items()})
    assert plan(warehouse, "--config", str(config), "--cluster", "cluster-1") == 0
    # Then no new version: v1 is still pending, and the summary says how much of it
    assert set(table(warehouse, "plans")["plan_version"]) == {1}
    pending = int((table(warehouse, "moves").cluster_id == "cluster-1").sum())
    assert f"v1 still pending: {pending} partitions not at their planned layout" in capsys.readouterr().out

    # When half of v1 was applied and broker 5 died, in a third snapshot
    third = {k: v.assign(snapshot_ts=LATER + dt.timedelta(hours=6)) for k, v in fleet.items()}
    parts = third["partitions"]
    c1 = parts.index[parts["cluster_id"] == "cluster-1"]
    applied = c1[: len(c1) // 2]
    parts.loc[applied, "replicas"] = pd.Series(
        [v1[(t, p)] for t, p in zip(parts.loc[applied, "topic"], parts.loc[applied, "partition"])], index=applied
    )
    parts.loc[applied, "leader"] = [r[0] for r in parts.loc[applied, "replicas"]]  # executed: the leader follows
    brokers = third["brokers"]
    brokers.loc[(brokers["cluster_id"] == "cluster-1") & (brokers["broker_id"] == 5), "state"] = "dead"
    write_fleet(warehouse, third)
    assert plan(warehouse, "--config", str(config), "--cluster", "cluster-1") == 0
    # Then v2's moves all start from that live layout and, applied to it, give exactly v2
    plans, moves = table(warehouse, "plans"), table(warehouse, "moves")
    v2 = plans[plans.plan_version == 2].set_index(["topic", "partition"])["replicas"].map(list)
    live = parts.loc[c1].set_index(["topic", "partition"])["replicas"].map(list)
    result = live.copy()
    for move in moves[moves.plan_version == 2].itertuples():
        assert list(move.from_replicas) == live[(move.topic, move.partition)]
        result[(move.topic, move.partition)] = list(move.to_replicas)
    assert all(result[k] == v2[k] for k in v2.index)
    # And partitions the dead broker does not touch keep v1's target (no flip-flop)
    untouched = [k for k in v1.index if 5 not in v1[k]]
    assert untouched and all(sorted(v2[k]) == sorted(v1[k]) for k in untouched)


def test_as_of_picks_the_older_snapshot_and_dry_run_writes_nothing(spark, warehouse, capsys):
    write_fleet(warehouse, small_fleet(DEMO_SNAPSHOT))
    write_fleet(warehouse, small_fleet(LATER, seed=4))
    before = versions(warehouse)
    assert plan(warehouse, "--dry-run") == 0
    assert "dry run: nothing written" in capsys.readouterr().out
    assert versions(warehouse) == before
    assert plan(warehouse, "--as-of", "2026-11-01T03:00:00Z", "--cluster", "cluster-2") == 0
    runs = table(warehouse, "plan_runs")
    assert runs["cluster_id"].tolist() == ["cluster-2"]
    assert runs["snapshot_ts"].iloc[0] == pd.Timestamp(DEMO_SNAPSHOT)
    assert set(table(warehouse, "plans")["snapshot_ts"]) == {pd.Timestamp(DEMO_SNAPSHOT)}


def test_one_bad_cluster_fails_alone_with_a_named_error(spark, warehouse, capsys):
    fleet = small_fleet()
    parts = fleet["partitions"]
    bad = parts.index[parts["cluster_id"] == "cluster-2"][:2]
    parts.at[bad[0], "replicas"] = [1, 2, 42]
    parts.at[bad[1], "replicas"] = [1, 1, 3]
    write_fleet(warehouse, fleet)
    assert plan(warehouse) == 1
    runs = table(warehouse, "plan_runs").set_index("cluster_id")
    assert runs.loc["cluster-1", "status"] == "committed"
    error = runs.loc["cluster-2", "error"]
    assert runs.loc["cluster-2", "status"] == "failed"
    assert "cluster cluster-2" in error and "(table partitions)" in error and "unknown=[42]" in error
    assert set(table(warehouse, "plans")["cluster_id"]) == {"cluster-1"}
    assert "cluster-2" in capsys.readouterr().out
    # A rerun fails the same way without piling up identical failure rows
    runs_version = versions(warehouse)["plan_runs"]
    assert plan(warehouse) == 1
    assert versions(warehouse)["plan_runs"] == runs_version


def test_a_crash_before_the_commit_marker_is_invisible_and_the_rerun_completes_it(spark, warehouse, monkeypatch):
    write_fleet(warehouse, small_fleet())

    def crash(*args, **kwargs):
        raise RuntimeError("killed before plan_runs")

    monkeypatch.setattr(pipeline, "write_plan_runs", crash)
    with pytest.raises(RuntimeError):
        plan(warehouse)
    # plans and moves were written, but no reader counts them: no committed run names them
    assert len(table(warehouse, "plans")) > 0
    assert not DeltaTable.is_deltatable(f"{warehouse}/plan_runs")
    from jobs.queries import committed
    from jobs.store import open_store

    store = open_store(spark, warehouse)
    assert committed(store, "plans").count() == 0
    plans_version = versions(warehouse)["plans"]
    monkeypatch.undo()
    # The rerun recognises its own earlier commits (Delta app transactions) and only adds the marker
    assert plan(warehouse) == 0
    assert versions(warehouse)["plans"] == plans_version
    plans = table(warehouse, "plans")
    assert not plans.duplicated(["cluster_id", "topic", "partition"]).any()
    assert committed(store, "plans").count() == len(plans)


def test_a_crash_between_the_plans_and_moves_commits_is_completed_by_the_rerun(spark, warehouse, monkeypatch):
    """The workers write the plan rows into stage folders and the driver commits the files they name: a run
    killed after the plans commit leaves its staged moves files unseen, and the rerun writes only moves."""
    from jobs.store import DeltaRsStore, open_store

    write_fleet(warehouse, small_fleet())
    if not isinstance(open_store(spark, warehouse), DeltaRsStore):
        pytest.skip("the workers stage files only where delta-rs keeps the log")
    commit_staged = DeltaRsStore.commit_staged

    def killed_at_moves(self, name, *args, **kwargs):
        if name == "moves":
            raise RuntimeError("killed before the moves commit")
        return commit_staged(self, name, *args, **kwargs)

    monkeypatch.setattr(DeltaRsStore, "commit_staged", killed_at_moves)
    with pytest.raises(RuntimeError):
        plan(warehouse)
    monkeypatch.undo()
    staged_moves = [p for p in (Path(warehouse) / "moves").rglob("*.parquet")]
    assert staged_moves and not DeltaTable.is_deltatable(f"{warehouse}/moves")  # written, never committed
    plans_version, plans_rows = versions(warehouse)["plans"], len(table(warehouse, "plans"))

    assert plan(warehouse) == 0
    assert versions(warehouse)["plans"] == plans_version  # its rows were committed once, by the first try
    plans, moves = table(warehouse, "plans"), table(warehouse, "moves")
    assert len(plans) == plans_rows and not plans.duplicated(["cluster_id", "topic", "partition"]).any()
    assert len(moves) > 0 and not moves.duplicated(["cluster_id", "topic", "partition"]).any()
    added = pa.table(DeltaTable(f"{warehouse}/moves").get_add_actions(flatten=True))["path"].to_pylist()
    committed_files = {Path(warehouse, "moves", unquote(f)).resolve() for f in added}
    assert not committed_files & {p.resolve() for p in staged_moves}  # the first try's files stay out
    before = versions(warehouse)
    assert plan(warehouse) == 0 and versions(warehouse) == before  # and a third run has nothing to do


def test_a_killed_runs_rows_are_gone_for_a_plain_reader_after_the_next_run(spark, warehouse, monkeypatch):
    write_fleet(warehouse, small_fleet())
    monkeypatch.setattr(pipeline, "write_plan_runs", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(RuntimeError):
        plan(warehouse, "--run-id", "first-try")  # killed after plans and moves committed, before the marker
    monkeypatch.undo()
    assert set(table(warehouse, "plans")["run_id"]) == {"first-try"}
    assert plan(warehouse, "--run-id", "second-try") == 0
    # a plain delta-rs reader, which does not join plan_runs, sees only the committed run's rows
    plans, moves = table(warehouse, "plans"), table(warehouse, "moves")
    assert set(plans["run_id"]) == {"second-try"} and set(moves["run_id"]) == {"second-try"}
    assert set(plans["plan_version"]) == {1}


def test_export_report_and_sql(spark, warehouse, tmp_path, capsys):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    out = tmp_path / "reassign.json"
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    moves = table(warehouse, "moves")
    assert payload["version"] == 1
    assert len(payload["partitions"]) == int((moves.cluster_id == "cluster-1").sum())
    first = payload["partitions"][0]
    assert set(first) == {"topic", "partition", "replicas"} and all(isinstance(b, int) for b in first["replicas"])
    assert (
        cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--wave", "1", "--out", str(out)]) == 0
    )
    assert 0 < len(json.loads(out.read_text())["partitions"]) <= len(payload["partitions"])
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", "nope"]) == 2

    report_dir = tmp_path / "report"
    assert cli.main(["report", "--warehouse", warehouse, "--out", str(report_dir)]) == 0
    brokers = pd.read_csv(report_dir / "cluster-1" / "v1" / "brokers.csv")
    assert (
        brokers["replicas_after"].sum()
        == table(warehouse, "plans").query("cluster_id == 'cluster-1'")["replicas"].map(len).sum()
    )
    assert "# Plan cluster-1 v1" in (report_dir / "cluster-1" / "v1" / "summary.md").read_text()

    capsys.readouterr()
    assert (
        cli.main(
            [
                "sql",
                "--warehouse",
                warehouse,
                "SELECT cluster_id, count(*) AS n FROM plans_latest GROUP BY cluster_id ORDER BY cluster_id",
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "cluster-1" in shown and "cluster-2" in shown


def test_report_explains_a_plan_with_the_config_it_was_made_with(spark, warehouse, tmp_path):
    """A broker excluded only in the run's config is not eligible in report's brokers.csv, with no --config."""
    write_fleet(warehouse, small_fleet())
    config = tmp_path / "exclude.toml"
    config.write_text('[clusters."cluster-1".constraints]\nexcluded_brokers = [2]\n')
    assert plan(warehouse, "--config", str(config), "--cluster", "cluster-1") == 0
    runs = table(warehouse, "plan_runs")
    recorded = json.loads(runs.loc[runs.cluster_id == "cluster-1", "config_json"].iloc[0])
    assert recorded["constraints"]["excluded_brokers"] == [2] and recorded["strategy"] == "balanced"

    report_dir = tmp_path / "report"
    assert cli.main(["report", "--warehouse", warehouse, "--cluster", "cluster-1", "--out", str(report_dir)]) == 0
    brokers = pd.read_csv(report_dir / "cluster-1" / "v1" / "brokers.csv").set_index("broker_id")
    assert not brokers.loc[2, "eligible"] and brokers.drop(index=2)["eligible"].all()
    assert brokers.loc[2, "replicas_after"] == 0


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--config", "/nonexistent.toml"], "not found"),
        (["--cluster", "cluster-9"], "cluster-9"),
        (["--strategy", "magic"], "known strategies"),
    ],
)
def test_usage_and_config_errors_exit_2(spark, warehouse, tmp_path, capsys, args, fragment):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse, *args) == 2
    assert fragment in capsys.readouterr().err
    assert versions(warehouse)["plans"] is None


def test_unknown_config_key_exits_2(spark, warehouse, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[planner]\nstrategy = 'round_robin'\nsed = 1\n")
    assert plan(warehouse, "--config", str(bad)) == 2
    assert "unknown key planner.sed" in capsys.readouterr().err


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_runs_end_to_end_and_reruns_as_a_no_op(spark, warehouse, strategy):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse, "--strategy", strategy) == 0
    runs = table(warehouse, "plan_runs")
    assert set(runs["strategy"]) == {strategy} and set(runs["status"]) <= {"committed", "skipped"}
    plans = table(warehouse, "plans")
    committed = set(runs.loc[runs["status"] == "committed", "cluster_id"])
    assert set(plans["cluster_id"]) == committed and set(plans["strategy"]) <= {strategy}
    brokers = table(warehouse, "brokers")
    for cluster_id, rows in plans.groupby("cluster_id"):
        active = set(brokers.loc[(brokers["cluster_id"] == cluster_id) & (brokers["state"] == "active"), "broker_id"])
        assert all(set(r) <= active and len(set(r)) == len(r) for r in rows["replicas"]), cluster_id
    first = versions(warehouse)
    assert plan(warehouse, "--strategy", strategy) == 0
    assert versions(warehouse) == first


def test_a_cluster_whose_constraints_cannot_be_met_fails_alone(spark, warehouse, tmp_path):
    write_fleet(warehouse, small_fleet())
    config = tmp_path / "conf.toml"
    config.write_text('[clusters."cluster-2".constraints]\nmin_failure_domains = 5\n')
    assert plan(warehouse, "--config", str(config)) == 1
    runs = table(warehouse, "plan_runs").set_index("cluster_id")
    assert runs.loc["cluster-1", "status"] == "committed" and runs.loc["cluster-2", "status"] == "failed"
    error = runs.loc["cluster-2", "error"]
    assert "cluster cluster-2" in error and "min_failure_domains" in error and "rack" in error, error
    assert set(table(warehouse, "plans")["cluster_id"]) == {"cluster-1"}


def test_cores_pins_and_a_move_budget_end_to_end_then_the_next_snapshot_keeps_cores(spark, warehouse, tmp_path):
    fleet = small_fleet()
    write_fleet(warehouse, fleet)
    first_partition = fleet["partitions"].sort_values(["topic", "partition"]).iloc[0]
    pinned = f"{first_partition['topic']}:{first_partition['partition']}"
    config = tmp_path / "conf.toml"
    config.write_text(
        '[planner]\nstrategy = "sticky"\n[constraints]\nassign_cores = true\nmax_moves = 4\n'
        f'[clusters."cluster-1".constraints.preferred_leaders]\n"{pinned}" = 3\n'
    )
    assert plan(warehouse, "--config", str(config)) == 0
    plans, runs = table(warehouse, "plans"), table(warehouse, "plan_runs").set_index("cluster_id")
    assert all(len(c) == len(r) for c, r in zip(plans["cores"], plans["replicas"]))
    assert (runs["moves"] <= 4).all() or runs["notes"].str.contains("forced moves alone").any()
    assert runs["moves_deferred"].notna().all() and runs["affinity_hints_unmet"].eq(0).all()
    c1 = plans[plans["cluster_id"] == "cluster-1"].set_index(["topic", "partition"])
    assert c1.loc[(first_partition["topic"], first_partition["partition"]), "leader"] == 3
    # a new snapshot with the same layout: replicas that stay keep their cores
    write_fleet(warehouse, {k: v.assign(snapshot_ts=LATER) for k, v in small_fleet().items()})
    assert plan(warehouse, "--config", str(config)) == 0
    plans = table(warehouse, "plans")
    v1 = plans[plans["plan_version"] == 1].set_index(["cluster_id", "topic", "partition"])
    v2 = plans[plans["plan_version"] == 2].set_index(["cluster_id", "topic", "partition"])
    same = [k for k in v2.index if list(v2.loc[k, "replicas"]) == list(v1.loc[k, "replicas"])]
    assert same and all(list(v2.loc[k, "cores"]) == list(v1.loc[k, "cores"]) for k in same)


# The output rows of a fixed fleet, every strategy: a refactor keeps them byte for byte. A change to a
# strategy on purpose changes them: then print the new digests (pytest -s) and replace these. (balanced, last:
# the combined load became a goal, and a goal the racks force above its bound is held to its ratio of the
# rack floor, issue 38)
OUTPUT_DIGESTS = {"balanced": "5b87b375f5f8ee27", "sticky": "48dc78767c1315a8"}
RUN_TIME_COLUMNS = {"started_at", "finished_at"}


def output_digest(warehouse: str) -> str:
    import hashlib

    blob = hashlib.sha256()
    for name in ("plans", "moves", "plan_runs"):
        frame = table(warehouse, name)
        frame = frame[[c for c in frame.columns if c not in RUN_TIME_COLUMNS]]
        rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in frame.to_dict("records"))
        blob.update("\n".join([name, *rows]).encode())
    return blob.hexdigest()[:16]


@pytest.mark.parametrize("strategy", ["balanced", "sticky"])
def test_the_output_rows_of_a_fixed_fleet_are_pinned(spark, warehouse, strategy):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse, "--strategy", strategy) == 0
    digest = output_digest(warehouse)
    print(f"\n{strategy}: {digest}")
    if strategy == "balanced":  # cluster-1's disk goal met (stuck before the rebuilds that ruin the moves onto
        # the broker a goal is stuck on); CP-SAT finds no plan there meeting both disk and bytes in
        notes = table(warehouse, "plan_runs").set_index("cluster_id")["notes"].fillna("")
        assert "disk goal not met" not in notes["cluster-1"] and "not met" not in notes["cluster-2"], notes.tolist()
    assert digest == OUTPUT_DIGESTS[strategy], "the output rows changed (on purpose? replace OUTPUT_DIGESTS)"
