"""Two plan runs on one warehouse at once (issue 15): never two committed runs with one version of a cluster,
never lost or duplicated rows; the loser's cluster fails cleanly or commits the next version."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from jobs.demo import DEMO_SNAPSHOT
from tests.e2e.test_plan_cli import small_fleet, write_fleet

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


def plan_at_once(warehouse: str, runs: list[tuple[str, str]]) -> list[subprocess.CompletedProcess[str]]:
    """Start one ``plan`` process per (run id, strategy) together and wait for all."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobs.cli",
                "plan",
                "--warehouse",
                warehouse,
                "--run-id",
                run_id,
                "--strategy",
                strategy,
                "--log-level",
                "WARNING",
            ],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id, strategy in runs
    ]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=600), *p.communicate()) for p in procs]


def check_tables(warehouse: str) -> pd.DataFrame:
    """Every table as the protocol promises; returns the committed plan_runs rows."""
    runs = DeltaTable(f"{warehouse}/plan_runs").to_pandas()
    committed = runs[runs["status"] == "committed"]
    assert not committed.duplicated(["cluster_id", "plan_version"]).any(), committed[
        ["cluster_id", "plan_version", "run_id"]
    ]
    for cluster, rows in committed.groupby("cluster_id"):
        assert sorted(rows["plan_version"]) == list(range(1, len(rows) + 1)), (cluster, rows["plan_version"].tolist())
    plans = DeltaTable(f"{warehouse}/plans").to_pandas()
    moves = DeltaTable(f"{warehouse}/moves").to_pandas()
    keys = ["cluster_id", "plan_version", "run_id"]
    for name, table, expected in (("plans", plans, "partitions"), ("moves", moves, "partitions_moved")):
        assert not table.duplicated([*keys, "topic", "partition"]).any(), f"{name}: a row written twice"
        counts = table.groupby(keys).size()
        for _, run in committed.iterrows():
            key = (run["cluster_id"], run["plan_version"], run["run_id"])
            assert counts.get(key, 0) == run[expected], f"{name} rows of committed {key} lost or extra"
        orphans = set(counts.index) - {tuple(r) for r in committed[keys].itertuples(index=False)}
        assert not orphans, f"{name} holds rows of no committed run: {orphans}"
    return committed


def test_overlapping_runs_claim_distinct_versions_or_fail_cleanly(spark, warehouse):
    # two runs at a time, as many as the two cores run side by side: different strategies creating the output
    # tables at once, then the same strategy twice over existing outputs (three at once took 186 s of a 20-minute
    # suite on a slow day, the JVMs starving each other)
    rounds = [
        ("empty outputs, different strategies", [("r0-a", "balanced"), ("r0-b", "sticky")]),
        ("existing outputs, one strategy twice", [("r1-a", "sticky"), ("r1-b", "sticky")]),
    ]
    committed_before = 0
    for i, (what, runs) in enumerate(rounds):
        write_fleet(warehouse, small_fleet(DEMO_SNAPSHOT + dt.timedelta(hours=i), seed=10 + i))
        done = plan_at_once(warehouse, runs)
        for proc in done:
            assert proc.returncode in (0, 1), (what, proc.stderr[-2000:])
            if proc.returncode == 1:
                failed = [line for line in proc.stdout.splitlines() if " failed " in line]
                told = (what, proc.stdout, proc.stderr[-3000:])  # stderr: a crash's traceback, to find its cause
                assert failed and all("meanwhile; rerun" in line for line in failed), told
        committed = check_tables(warehouse)
        assert len(committed) > committed_before, f"{what}: nothing committed"
        committed_before = len(committed)
