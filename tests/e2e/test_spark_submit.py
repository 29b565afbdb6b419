"""``spark-submit jobs/plan.py`` with the package zip as --py-files runs the same job."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from deltalake import DeltaTable

from jobs.package import build_zip
from tests.e2e.test_plan_cli import small_fleet, write_fleet

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_spark_submit_runs_the_plan_job(warehouse, tmp_path):
    write_fleet(warehouse, small_fleet())
    package = build_zip(tmp_path / "partition_planner.zip")
    assert {"jobs/plan.py", "assigners/round_robin.py", "schemas/tables.py"} <= set(zipfile.ZipFile(package).namelist())
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    cmd = [
        str(spark_submit),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--py-files",
        str(package),
        str(ROOT / "jobs" / "plan.py"),
        "--warehouse",
        warehouse,
        "--log-level",
        "WARNING",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cluster-1" in done.stdout and "committed" in done.stdout
    runs = DeltaTable(f"{warehouse}/plan_runs").to_pandas()
    assert sorted(runs["status"]) == ["committed", "committed"]
