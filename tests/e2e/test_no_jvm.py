"""Commands that need no Spark start no JVM (issue 37, finding 9 / acceptance 5; issue 40): ``import`` writes with
delta-rs, ``sql`` answers with DataFusion, and ``plan`` / ``sql --engine spark`` usage errors are found before Spark
starts. Each runs as its own process with the JVM log pointed at a fresh path: a JVM that started would have
created it (jobs.session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_import import demo_fleet, write_files

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *args: str) -> tuple[int, str, bool]:
    """(exit code, stderr, whether a JVM started) of one CLI process."""
    jvm_log = tmp_path / f"jvm-{len(list(tmp_path.glob('jvm-*')))}.log"
    env = {**os.environ, "PARTITION_PLANNER_JVM_LOG": str(jvm_log)}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *args],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr, jvm_log.exists()


def test_import_and_usage_errors_start_no_jvm(tmp_path):
    warehouse = str(tmp_path / "wh")
    paths = write_files(tmp_path / "files", demo_fleet(), "cluster-1")
    files = [f"--{k.replace('_', '-')}={v}" for k, v in paths.items()]
    code, err, jvm = run(tmp_path, "import", "--warehouse", warehouse, "--cluster", "cluster-1", *files)
    assert (code, jvm) == (0, False), err
    assert Path(warehouse, "partitions", "_delta_log").is_dir()
    code, err, jvm = run(tmp_path, "sql", "--warehouse", warehouse, "SELECT count(*) AS n FROM partitions")
    assert (code, jvm) == (0, False), err  # DataFusion answers from the Delta log (issue 40)

    cases = {
        "empty run id": (["plan", "--warehouse", warehouse, "--run-id", ""], "--run-id is empty"),
        "unknown cluster": (
            ["plan", "--warehouse", warehouse, "--cluster", "nope"],
            "no snapshot in table partitions for cluster(s) nope (known: cluster-1)",
        ),
        "no warehouse": (["plan", "--warehouse", str(tmp_path / "none")], "table partitions: no Delta table at"),
        "sql on tables plan has not written": (
            ["sql", "--warehouse", warehouse, "SELECT * FROM plan_runs"],
            "the query reads tables the warehouse",
        ),
    }
    for name, (args, message) in cases.items():
        code, err, jvm = run(tmp_path, *args)
        assert (code, jvm) == (2, False), (name, err)
        assert message in err and len(err.strip().splitlines()) == 1, (name, err)
