"""``sql``: DataFusion over the Delta logs answers as Spark SQL does, with one-line errors and time travel."""

from __future__ import annotations

import datetime as dt

import pytest
from deltalake import DeltaTable

from jobs import cli
from tests.conftest import assert_errors_only_on_failures
from tests.e2e.test_plan_cli import LATER, plan, small_fleet, table, write_fleet

pytestmark = pytest.mark.integration

# every view, each query ordered and its columns named, so both engines print the same grid
QUERIES = [
    "SELECT broker_id, rack FROM brokers WHERE cluster_id = 'cluster-1' ORDER BY broker_id",
    "SELECT count(*) AS n FROM partitions",
    "SELECT count(*) AS n FROM throughput",
    "SELECT cluster_id, plan_version, status FROM plan_runs ORDER BY cluster_id, plan_version, status",
    "SELECT cluster_id, plan_version, topic, partition, replicas, snapshot_ts FROM plans ORDER BY 1, 2, 3, 4",
    "SELECT cluster_id, count(*) AS n FROM moves GROUP BY cluster_id ORDER BY cluster_id",
    "SELECT plan_version, count(*) AS n FROM plans_raw GROUP BY plan_version ORDER BY plan_version",
    "SELECT count(*) AS n FROM moves_raw",
    "SELECT cluster_id, max(plan_version) AS v, count(*) AS n FROM plans_latest GROUP BY cluster_id ORDER BY 1",
    "SELECT topic, partition, cores FROM plans ORDER BY topic, partition, cluster_id, plan_version",  # NULLs
]


def sql(capsys, warehouse: str, *args: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["sql", "--warehouse", warehouse, *args])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def replanned(spark, tmp_path_factory):
    """Two plan runs: cluster-1 and -2 at version 1, then a later snapshot of cluster-1 at version 2 (one
    warehouse for the module: the queries only read it)."""
    warehouse = str(tmp_path_factory.mktemp("sql") / "warehouse")
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    write_fleet(warehouse, {k: v[v["cluster_id"] == "cluster-1"] for k, v in small_fleet(LATER, seed=4).items()})
    assert plan(warehouse) == 0
    yield warehouse
    assert_errors_only_on_failures(warehouse)


def test_datafusion_answers_every_view_as_spark_sql_prints_it(replanned, capsys):
    for query in QUERIES:
        code, fast, err = sql(capsys, replanned, "--limit", "7", query)
        assert code == 0, (query, err)
        code, spark, err = sql(capsys, replanned, "--engine", "spark", "--limit", "7", query)
        assert code == 0, (query, err)
        assert fast == spark, query
    # the committed view keeps only committed versions: both plan versions of cluster-1, one of cluster-2
    code, out, _ = sql(capsys, replanned, "SELECT cluster_id, plan_version FROM plans_latest GROUP BY 1, 2 ORDER BY 1")
    assert out.splitlines()[3:5] == ["|cluster-1 |2           |", "|cluster-2 |1           |"]


def test_a_table_is_read_as_of_a_version_or_a_time(replanned, capsys):
    count = "SELECT count(*) AS n FROM plans_raw"
    first = DeltaTable(f"{replanned}/plans", version=0).to_pyarrow_table().num_rows
    assert 0 < first < len(table(replanned, "plans"))
    assert sql(capsys, replanned, "--as-of-version", "plans=0", count)[1].splitlines()[3] == f"|{first:<3}|"
    # the time of the first run's commit: every table as it was then
    history = DeltaTable(f"{replanned}/plan_runs").history()
    first_commit = min(h["timestamp"] for h in history if h["version"] == 0)
    then = dt.datetime.fromtimestamp(first_commit / 1000 + 0.001, dt.UTC).isoformat()
    code, out, _ = sql(capsys, replanned, "--as-of", then, "SELECT count(*) AS n FROM plan_runs")
    assert code == 0 and out.splitlines()[3] == "|2  |"  # the first run's two rows, not the second's
    code, _, err = sql(capsys, replanned, "--as-of", "2020-01-01", "SELECT * FROM plans")
    assert code == 2 and "did not exist yet at 2020-01-01: plans (view plans)" in err
    code, _, err = sql(capsys, replanned, "--as-of-version", "plans=9", count)
    assert code == 2 and "has versions up to 1, not 9" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["SELECT nope FROM plans"], "No field named nope. Valid fields are plans.cluster_id"),
        (["SELEC 1"], "Expected: an SQL statement"),
        (["--engine", "spark", "SELECT nope FROM plans"], "UNRESOLVED_COLUMN"),
        (["--as-of-version", "plan=1", "SELECT 1"], "no table 'plan' (tables: brokers,"),
        (["--as-of-version", "3", "SELECT 1"], "expected TABLE=N, e.g. moves=3"),
        (["--as-of", "yesterday", "SELECT 1"], "expected an ISO 8601 time"),
        (["--engine", "spark", "--as-of", "2026-11-01", "SELECT 1"], "with --engine datafusion only"),
    ],
)
def test_errors_are_one_line_and_exit_2(replanned, capsys, args, message):
    code, out, err = sql(capsys, replanned, *args)
    assert code == 2 and message in err and out == "", err
    assert "Traceback" not in err and "at org.apache" not in err and len(err) < 600
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
