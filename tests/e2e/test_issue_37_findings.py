"""Issue 37's findings 4, 6, 7, 8 and 10, one test each, as a new user meets them: unknown sizes shown as zero,
tracebacks on ordinary mistakes, numpy reprs, nonsense accepted by export, figures that disagree. (Findings 1-3,
5 and 9 have their own files: test_kafka_formats / test_import, test_live / test_execution, test_execute_script,
test_no_jvm.)"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from jobs import cli
from tests.e2e.test_import import demo_fleet, import_files, write_files
from tests.e2e.test_plan_cli import plan, small_fleet, table, versions, write_fleet

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "cluster-1"


def shell(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """One CLI command in a shell of its own, as a user types it (``pp`` is the console script)."""
    environ = {**os.environ, **env}
    line = command.replace("pp ", f"{sys.executable} -m jobs.cli ", 1)
    return subprocess.run(["bash", "-c", line], check=False, cwd=ROOT, env=environ, capture_output=True, text=True)


@pytest.fixture
def unsized(spark, warehouse, tmp_path):
    """A cluster imported without --log-dirs (sizes unknown) and without throughput (rates unknown), planned."""
    paths = write_files(tmp_path / "files", demo_fleet(), CLUSTER, rates=False)
    del paths["log_dirs"]
    assert import_files(warehouse, CLUSTER, paths, "--snapshot-ts", "2026-11-01T00:00:00Z") == 0
    return warehouse


def test_finding_4_unknown_sizes_and_rates_are_null_and_said_so_never_zero(unsized, tmp_path, capsys):
    capsys.readouterr()
    assert plan(unsized) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(CLUSTER))
    assert "size unknown" in line and "0.00 GiB" not in line
    assert "max_load/bound unknown->unknown (no throughput measured)" in line and "0.00->0.00" not in line
    run = table(unsized, "plan_runs").iloc[0]
    assert pd.isna(run["bytes_to_move"]) and pd.isna(run["max_load_after"]) and pd.isna(run["load_lower_bound"])
    moves = table(unsized, "moves")
    copying = moves["added_brokers"].map(len) > 0
    assert moves.loc[copying, "bytes_to_move"].isna().all() and (moves.loc[~copying, "bytes_to_move"] == 0).all()

    out = tmp_path / "exec"
    args = ["export", "--warehouse", unsized, "--cluster", CLUSTER, "--out-dir", str(out), "--max-hours", "4"]
    assert cli.main(args) == 0
    runbook = (out / "runbook.md").read_text()
    assert "0 B to copy" not in runbook and "about 0 s" not in runbook and "(0 B/s)" not in runbook
    assert "size unknown" in runbook and "no time estimate and no suggested throttle" in runbook
    assert "to finish within 4 h: no suggestion, the sizes are unknown" in runbook
    rows = [r for r in runbook.splitlines() if re.match(r"^\| \d+ \|", r)]
    leader_only = (~copying).groupby(moves["wave"]).sum()
    assert [int(r.split("|")[3].replace(",", "")) for r in rows] == leader_only.tolist()  # copies nothing, only

    capsys.readouterr()
    assert cli.main(["status", "--warehouse", unsized, "--cluster", CLUSTER]) == 0
    shown = capsys.readouterr().out
    assert "size unknown" in shown and " 0 B" not in shown

    report = tmp_path / "report"
    assert cli.main(["report", "--warehouse", unsized, "--cluster", CLUSTER, "--out", str(report)]) == 0
    page = (report / CLUSTER / "v1" / "index.html").read_text()
    assert "unknown (sizes not measured)" in page and "unknown (no throughput measured yet)" in page


def test_finding_6_ordinary_mistakes_end_in_one_line_not_a_traceback(spark, warehouse, tmp_path, capsys):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    afile = tmp_path / "a-file"
    afile.write_text("x")
    capsys.readouterr()
    for args in (["report", "--out", str(afile)], ["export", "--cluster", CLUSTER, "--out-dir", str(afile)]):
        with pytest.raises(SystemExit) as exited:  # argparse's usage error
            cli.main([args[0], "--warehouse", warehouse, *args[1:]])
        assert exited.value.code == 2
        assert f"{args[-2]} {afile} is a file; give a folder" in capsys.readouterr().err

    closed = shell(f"pp export --warehouse {warehouse} --cluster {CLUSTER} | head -c 20")
    assert closed.stdout.startswith('{"version":1') and closed.stderr == ""  # a closed stdout ends quietly

    unreachable = shell("pp plan --config conf/production.example.toml")
    assert unreachable.returncode == 1
    assert unreachable.stderr.count("\n") == 1, unreachable.stderr  # no cloud SDK warnings, no traceback
    assert "table partitions at s3a://platform-lake/kafka-inventory/partitions cannot be reached" in unreachable.stderr


def test_finding_7_messages_print_plain_numbers_and_counts_in_grammar(spark, warehouse, tmp_path, capsys):
    from tests.e2e.test_execution import newer_snapshot

    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    moves = table(warehouse, "moves").query("cluster_id == @CLUSTER")
    move = moves[moves["kind"] != "leader"].iloc[-1]
    key = (move["topic"], int(move["partition"]))
    newer_snapshot(warehouse, lambda layout: layout.__setitem__(key, [int(b) for b in move["from_replicas"]][::-1]))
    out = tmp_path / "exec"
    capsys.readouterr()
    for args in (["status"], ["export"], ["export", "--out-dir", str(out), "--allow-drift"]):
        cli.main([args[0], "--warehouse", warehouse, "--cluster", CLUSTER, *args[1:]])
    text = capsys.readouterr()
    written = text.out + text.err + (out / "runbook.md").read_text()
    assert "np.int" not in written and "np.float" not in written and "array(" not in written
    assert "1 partitions" not in written and "1 partition of plan v1" in written


def test_finding_8_export_refuses_nonsense_numbers_at_parse_time(spark, warehouse, tmp_path, capsys):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    out = tmp_path / "exec"
    for flag, value in (("--throttle-bytes", "-5"), ("--throttle-bytes", "0"), ("--max-hours", "0")):
        for extra in (["--out-dir", str(out)], []):
            with pytest.raises(SystemExit) as exited:
                cli.main(["export", "--warehouse", warehouse, "--cluster", CLUSTER, flag, value, *extra])
            assert exited.value.code == 2
            assert f"argument {flag}: expected a number > 0, found '{value}'" in capsys.readouterr().err
    assert not out.exists()


def test_finding_10_figures_agree(spark, warehouse, tmp_path, capsys):
    fleet = small_fleet()
    dead = int(fleet["brokers"].query("cluster_id == @CLUSTER")["broker_id"].iloc[0])
    brokers = fleet["brokers"]
    brokers.loc[(brokers["cluster_id"] == CLUSTER) & (brokers["broker_id"] == dead), "state"] = "dead"
    write_fleet(warehouse, fleet)
    assert plan(warehouse) == 0
    # a dry run of inputs already planned never prints committed
    capsys.readouterr()
    assert plan(warehouse, "--dry-run") == 0
    dry = capsys.readouterr().out
    statuses = [line.split()[1] for line in dry.splitlines() if line.startswith("cluster-")]
    assert statuses == ["dry-run", "dry-run"], dry  # "already committed by run ..." says why nothing is written

    out = tmp_path / "report"
    assert cli.main(["report", "--warehouse", warehouse, "--cluster", CLUSTER, "--out", str(out)]) == 0
    folder = out / CLUSTER / "v1"
    page = (folder / "index.html").read_text()
    text = re.sub(r"<[^>]+>", " ", page)
    assert "`" not in text  # code spans are <code>, not markdown backticks
    assert not re.search(r"\b\d+\.0 → \d+\.0\b", text)  # counts are whole numbers
    assert "MB/s" not in page + (folder / "summary.md").read_text()  # one unit family: MiB/s
    busiest = page.split("<h2>Busiest brokers after the plan</h2>")[1].split("</table>")[0]
    emptied = page.split("<h2>Brokers the plan empties (dead, draining or excluded)</h2>")[1].split("</table>")[0]
    assert f"<td>{dead}</td>" not in busiest and f"<td>{dead}</td>" in emptied

    # import warns about a snapshot time in the future: plan would ignore it
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    paths = write_files(tmp_path / "files", demo_fleet(), CLUSTER)
    before = versions(warehouse)
    assert import_files(str(tmp_path / "wh2"), CLUSTER, paths, "--snapshot-ts", future) == 0
    assert f"--snapshot-ts {future.replace('Z', '+00:00')} is in the future" in capsys.readouterr().err
    assert versions(warehouse) == before


def test_the_runbook_says_execute_sh_runs_the_waves_and_keeps_the_commands(spark, warehouse, tmp_path):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    out = tmp_path / "exec"
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", CLUSTER, "--out-dir", str(out)]) == 0
    runbook = (out / "runbook.md").read_text()
    assert "`execute.sh` runs every wave below in order" in runbook
    assert "--reassignment-json-file wave-001.json --execute --throttle" in runbook
    elected = json.loads((out / "election.json").read_text())["partitions"]
    assert elected and all(set(p) == {"topic", "partition"} for p in elected)
