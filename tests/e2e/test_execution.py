"""From plan to execution through the CLI: wave files that rebuild the plan, a rollback that restores the
baseline, the staleness check against newer snapshots, and ``status`` (issue 14)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest

from jobs import cli
from tests.conftest import write_with_delta_rs
from tests.e2e.test_plan_cli import LATER, plan, small_fleet, table, write_fleet

pytestmark = pytest.mark.integration
CLUSTER = "cluster-1"


@pytest.fixture
def planned(spark, warehouse):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    return warehouse


def check_kafka_format(payload: dict) -> None:
    """kafka-reassign-partitions' rules for its JSON file, checked on their own."""
    assert payload["version"] == 1 and isinstance(payload["partitions"], list)
    keys = [(p["topic"], p["partition"]) for p in payload["partitions"]]
    assert len(keys) == len(set(keys)), "a partition listed twice"
    for entry in payload["partitions"]:
        assert set(entry) <= {"topic", "partition", "replicas", "log_dirs"}
        assert isinstance(entry["topic"], str) and entry["topic"]
        assert isinstance(entry["partition"], int) and entry["partition"] >= 0
        replicas = entry["replicas"]
        assert replicas and all(isinstance(b, int) and not isinstance(b, bool) for b in replicas)
        assert len(set(replicas)) == len(replicas), entry
        if "log_dirs" in entry:
            assert len(entry["log_dirs"]) == len(replicas)


def apply(layout: dict, payload: dict) -> None:
    for entry in payload["partitions"]:
        key = (entry["topic"], entry["partition"])
        assert key in layout, f"{key} is not a partition of the cluster"
        layout[key] = list(entry["replicas"])


def live_layout(fleet: dict[str, pd.DataFrame]) -> dict:
    parts = fleet["partitions"].query("cluster_id == @CLUSTER")
    return {(t, int(p)): list(r) for t, p, r in zip(parts["topic"], parts["partition"], parts["replicas"])}


def export_dir(warehouse: str, out: Path, *extra: str) -> int:
    return cli.main(["export", "--warehouse", warehouse, "--cluster", CLUSTER, "--out-dir", str(out), *extra])


def test_wave_files_in_order_rebuild_the_plan_and_the_rollback_restores_the_baseline(planned, tmp_path, capsys):
    out = tmp_path / "exec"
    assert export_dir(planned, out, "--throttle-bytes", "10000000", "--max-hours", "2") == 0
    waves = sorted(out.glob("wave-*.json"))
    moves = table(planned, "moves").query("cluster_id == @CLUSTER")
    assert [w.name for w in waves] == [f"wave-{n:03d}.json" for n in range(1, int(moves["wave"].max()) + 1)]
    layout = live_layout(small_fleet())
    baseline = dict(layout)
    for wave in waves:
        payload = json.loads(wave.read_text())
        check_kafka_format(payload)
        apply(layout, payload)
    plans = table(planned, "plans").query("cluster_id == @CLUSTER")
    assert layout == {(t, int(p)): list(r) for t, p, r in zip(plans["topic"], plans["partition"], plans["replicas"])}
    rollback = json.loads((out / "rollback.json").read_text())
    check_kafka_format(rollback)
    assert len(rollback["partitions"]) == len(moves)
    apply(layout, rollback)
    assert layout == baseline

    runbook = (out / "runbook.md").read_text()
    assert "--reassignment-json-file wave-001.json --execute --throttle 10000000" in runbook
    assert "--reassignment-json-file wave-001.json --verify" in runbook
    assert "to finish within 2 h: `--throttle " in runbook
    assert "rollback.json --execute" in runbook
    assert "{" not in runbook.split("## Wave")[0] and "e+" not in runbook
    # Exporting again gives the same files, byte for byte
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert export_dir(planned, out, "--throttle-bytes", "10000000", "--max-hours", "2") == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def newer_snapshot(warehouse: str, change, ts=LATER) -> dict[str, pd.DataFrame]:
    """Write a later snapshot of cluster-1 whose layout ``change`` edits in place (a dict of replica lists)."""
    fleet = small_fleet(ts)
    layout = live_layout(fleet)
    change(layout)
    parts = fleet["partitions"]
    mine = parts["cluster_id"] == CLUSTER
    parts.loc[mine, "replicas"] = pd.Series(
        [layout[(t, int(p))] for t, p in zip(parts.loc[mine, "topic"], parts.loc[mine, "partition"])],
        index=parts.index[mine],
        dtype=object,
    )
    parts.loc[mine, "leader"] = [r[0] for r in parts.loc[mine, "replicas"]]
    for name in ("brokers", "partitions"):
        frame = fleet[name]
        write_with_delta_rs(warehouse, name, frame[frame["cluster_id"] == CLUSTER])
    return fleet


def test_a_drifted_partition_stops_export_and_status_follows_the_waves(planned, tmp_path, capsys):
    moves = table(planned, "moves").query("cluster_id == @CLUSTER")
    wave_1 = moves[moves["wave"] == 1]
    drifted = moves[(moves["wave"] > 1) & (moves["kind"] != "leader")].iloc[0]
    key = (drifted["topic"], int(drifted["partition"]))
    elsewhere = [int(b) for b in drifted["from_replicas"]][
        ::-1
    ]  # same brokers, another leader: neither baseline nor target

    def wave_1_done_and_one_drifted(layout):
        for t, p, to in zip(wave_1["topic"], wave_1["partition"], wave_1["to_replicas"]):
            layout[(t, int(p))] = list(to)
        layout[key] = elsewhere

    newer_snapshot(planned, wave_1_done_and_one_drifted)
    capsys.readouterr()
    out = tmp_path / "exec"
    assert export_dir(planned, out) == 1
    err = capsys.readouterr().err
    expected = "[" + ", ".join(str(int(b)) for b in drifted["from_replicas"]) + "]"
    # issue 37, finding 7: plain numbers, never numpy reprs; finding 3: the message says what resolves it
    assert f"partition {key[0]}:{key[1]} drifted: expected {expected}" in err and f"found {elsewhere}" in err
    assert "np.int" not in err and "1 partition of plan v1" in err and "run plan" in err
    assert "nothing written" in err and not out.exists()
    assert cli.main(["export", "--warehouse", planned, "--cluster", CLUSTER]) == 1

    assert export_dir(planned, out, "--allow-drift") == 0
    assert not (out / "wave-001.json").exists(), "wave 1 is done: nothing of it is left to execute"
    exported = {
        (e["topic"], e["partition"]) for w in out.glob("wave-*.json") for e in json.loads(w.read_text())["partitions"]
    }
    assert key not in exported and len(exported) == len(moves) - len(wave_1) - 1
    assert "drifted, left out" in (out / "runbook.md").read_text()

    assert cli.main(["status", "--warehouse", planned, "--cluster", CLUSTER]) == 1
    shown = capsys.readouterr().out
    n = len(wave_1)
    assert f"{'1':>9} {n:>10,} {n:>6,} {0:>6,} {0:>7,} {0:>7,} {'0 B':>11}" in shown


def test_issue_37_a_drifted_partition_is_resolved_by_planning_again(planned, tmp_path, capsys):
    """Finding 3 / acceptance 4: re-planning used to be `skipped` ("v1 still pending"), so export kept exiting 1.
    Now plan writes v2 from where the partition is, and v2's files take the drifted layout to the new plan."""
    moves = table(planned, "moves").query("cluster_id == @CLUSTER")
    move = moves[(moves["wave"] > 1) & (moves["kind"] != "leader")].iloc[0]
    key = (move["topic"], int(move["partition"]))
    elsewhere = [int(b) for b in move["from_replicas"]][::-1]
    fleet = newer_snapshot(planned, lambda layout: layout.__setitem__(key, elsewhere))
    assert cli.main(["status", "--warehouse", planned, "--cluster", CLUSTER]) == 1
    assert f"partition {key[0]}:{key[1]} drifted" in capsys.readouterr().out

    assert plan(planned) == 0
    shown = capsys.readouterr().out
    runs = table(planned, "plan_runs").query("cluster_id == @CLUSTER and status == 'committed'")
    assert sorted(runs["plan_version"]) == [1, 2]
    v2 = runs[runs["plan_version"] == 2].iloc[0]
    assert (
        "1 partition drifted from v1" in v2["notes"]
        and f"{key[0]}:{key[1]} at {','.join(map(str, elsewhere))}" in (v2["notes"])
    )
    assert f"{CLUSTER}      committed v2" in shown

    out = tmp_path / "exec-v2"
    assert export_dir(planned, out) == 0  # without --allow-drift
    layout = live_layout(fleet)
    assert layout[key] == elsewhere
    for wave in sorted(out.glob("wave-*.json")):
        apply(layout, json.loads(wave.read_text()))
    plans = table(planned, "plans").query("cluster_id == @CLUSTER and plan_version == 2")
    assert layout == {(t, int(p)): list(r) for t, p, r in zip(plans["topic"], plans["partition"], plans["replicas"])}
    moved = table(planned, "moves").query("cluster_id == @CLUSTER and plan_version == 2")
    row = moved[(moved["topic"] == key[0]) & (moved["partition"] == key[1])].iloc[0]
    assert list(row["from_replicas"]) == elsewhere
    # and planning again without a newer snapshot writes nothing new: v2 is pending, not drifted
    assert plan(planned) == 0
    again = table(planned, "plan_runs").query("cluster_id == @CLUSTER and status == 'committed'")
    assert sorted(again["plan_version"]) == [1, 2]


def test_status_reports_wave_1_done_and_the_rest_pending_then_all_done(planned, capsys):
    moves = table(planned, "moves").query("cluster_id == @CLUSTER")
    wave_1 = moves[moves["wave"] == 1]

    def wave_1_applied(layout):
        for t, p, to in zip(wave_1["topic"], wave_1["partition"], wave_1["to_replicas"]):
            layout[(t, int(p))] = list(to)

    newer_snapshot(planned, wave_1_applied)
    capsys.readouterr()
    assert cli.main(["status", "--warehouse", planned, "--cluster", CLUSTER]) == 0
    shown = capsys.readouterr().out
    n = len(wave_1)
    assert f"{'1':>9} {n:>10,} {n:>6,} {0:>6,} {0:>7,} {0:>7,} {'0 B':>11}" in shown
    left = moves[moves["wave"] > 1]
    assert f"pending: {len(left):,} partitions" in shown

    def all_applied(layout):
        for t, p, to in zip(moves["topic"], moves["partition"], moves["to_replicas"]):
            layout[(t, int(p))] = list(to)

    newer_snapshot(planned, all_applied, LATER + dt.timedelta(hours=1))
    assert cli.main(["status", "--warehouse", planned, "--cluster", CLUSTER]) == 0
    assert f"done: all {len(moves):,} partitions are at their target" in capsys.readouterr().out


def test_report_is_a_page_with_charts_whose_headline_is_the_plan_runs_row(planned, tmp_path):
    import re

    from PIL import Image

    out = tmp_path / "report"
    assert cli.main(["report", "--warehouse", planned, "--out", str(out), "--cluster", CLUSTER]) == 0
    folder = out / CLUSTER / "v1"
    page = (folder / "index.html").read_text()
    charts = re.findall(r'<img src="([^"]+\.png)"', page)
    assert len(charts) >= 4
    for chart in charts:
        with Image.open(folder / chart) as image:
            image.load()  # decodes the whole file
            assert image.size[0] > 300 and image.size[1] > 200
    run = table(planned, "plan_runs").query("cluster_id == @CLUSTER").iloc[0]
    moves = table(planned, "moves").query("cluster_id == @CLUSTER")
    cards = re.findall(r'<div class="v">([^<]*)</div><div class="k">([^<]*)</div>', page)
    headline = {key: value for value, key in cards}
    assert headline["replica moves"] == f"{int(run['moves']):,}"
    assert headline["partitions changed"] == f"{len(moves):,}" == f"{int(run['partitions_moved']):,}"
    assert headline["leader moves"] == f"{int(run['leader_moves']):,}"
    assert headline["waves"] == f"{int(moves['wave'].max()):,}" == f"{int(run['waves']):,}"
    assert headline["balance score (0-100)"] == (
        f"{run['balance_score_before']:.1f} → {run['balance_score_after']:.1f}"
    )
    assert headline["rack violations"] == f"{run['rack_violations_before']} → {run['rack_violations_after']}"
    assert int(run["bytes_to_move"]) == int(moves["bytes_to_move"].sum())
    waves_table = page.split("<h2>Waves")[1]
    assert waves_table.count("<tr") == int(run["waves"]) + 1  # a row per wave plus the header
    text = re.sub(r"<[^>]+>", " ", page) + (folder / "summary.md").read_text()
    assert not re.search(r"\d\.\d+e[+-]\d", text), "scientific notation"
    assert not re.search(r"\{\d+: \d+", text), "a dict dump"
    assert "## Waves" in (folder / "summary.md").read_text()
