"""Shared fixtures: one SparkSession per test run, temp warehouses, input writers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import settings

# CI (CI=true, as .ci/run is called) replays the same examples every run, so a landing never depends
# on the draw; local runs keep exploring new ones (and hypothesis keeps what fails in .hypothesis/).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["SPARK_TESTING"] = "1"
os.environ["TZ"] = "UTC"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from jobs.session import get_spark

    session = get_spark(app_name="partition-planner-tests", master="local[2]")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[str]:
    """A temp warehouse; afterwards every plan_runs row left in it is checked: ``error`` only on failures."""
    path = str(tmp_path / "warehouse")
    yield path
    assert_errors_only_on_failures(path)


def assert_errors_only_on_failures(warehouse: str) -> None:
    """An alert on ``plan_runs.error IS NOT NULL`` must fire on failed runs only."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(f"{warehouse}/plan_runs"):
        return
    runs = DeltaTable(f"{warehouse}/plan_runs").to_pandas(columns=["cluster_id", "status", "error"])
    healthy = runs[runs["status"] != "failed"]
    assert healthy["error"].isna().all(), healthy[healthy["error"].notna()].to_dict("records")
    assert runs.loc[runs["status"] == "failed", "error"].notna().all()


@pytest.fixture
def store(spark: object, warehouse: str) -> object:
    from jobs.store import open_store

    return open_store(spark, warehouse)  # type: ignore[arg-type]


def write_with_delta_rs(warehouse: str, name: str, pdf: pd.DataFrame, mode: str = "append") -> None:
    """Write an input table the way an outside collector would: delta-rs from pandas, DESIGN.md schema."""
    from deltalake import write_deltalake

    from schemas import ALL_TABLES

    spec = ALL_TABLES[name]
    # a collector that predates an optional column leaves it out (readers see null)
    names = [c.name for c in spec.columns if c.name in pdf.columns or not c.optional]
    schema = pa.schema([spec.arrow_schema().field(n) for n in names])
    table = pa.Table.from_pandas(pdf[names], schema=schema, preserve_index=False)
    write_deltalake(f"{warehouse}/{name}", table, mode=mode)
