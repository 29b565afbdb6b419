"""The table store's contract, held against every backend that can start here.

Real Delta tables on disk, read back by delta-rs itself. ``delta-rs`` (the
bridge) always runs; ``delta-spark`` runs when Delta Lake's JVM classes are
on the Spark classpath, and is skipped with that reason otherwise.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable

from jobs.store import Supersede, TableNotFoundError
from schemas import BROKERS, PLANS

pytestmark = pytest.mark.spark
TS = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(params=["delta-rs", "delta-spark"])
def store(request, spark, warehouse):
    from jobs.store import has_delta_jvm, open_store

    if request.param == "delta-spark" and not has_delta_jvm(spark):
        pytest.skip(
            "delta-spark: Delta Lake's JVM classes are not on the classpath (Maven Central is unreachable here)"
        )
    return open_store(spark, warehouse, backend=request.param)


def plan_rows(spark, cluster, version, run_id, n):
    rows = [(cluster, version, run_id, TS, "round_robin", "t", i, [1, 2], 1, 1.5, 1, None) for i in range(n)]
    return spark.createDataFrame(rows, PLANS.spark_schema())


@pytest.mark.parametrize("few", [False, True], ids=["spark-write", "few-rows"])
def test_partitioned_round_trip_time_travel_and_delta_rs_readback(spark, store, warehouse, few):
    # Given two appends to the partitioned plans table (few: files written from the driver, as Spark lays them out)
    first = plan_rows(spark, "a b:c", 1, "r1", 3).unionByName(plan_rows(spark, "c2", 1, "r1", 2))
    assert store.append("plans", first, few=few) == 0
    assert store.append("plans", plan_rows(spark, "c2", 2, "r2", 4), few=few) == 1
    # Then Spark reads the latest and the older version, partition values restored
    assert_df_equality(store.read("plans", version=0), first, ignore_row_order=True)
    assert store.read("plans").where("cluster_id = 'c2'").count() == 6
    # And delta-rs sees an ordinary partitioned Delta table with the contract schema
    table = DeltaTable(f"{warehouse}/plans")
    assert table.metadata().partition_columns == ["cluster_id"]
    assert pa.schema(table.schema().to_arrow()).names == PLANS.column_names
    assert table.protocol().min_reader_version == 1 and table.protocol().min_writer_version == 2
    pdf = table.to_pandas()
    assert sorted(pdf.groupby("cluster_id").size().items()) == [("a b:c", 3), ("c2", 6)]
    assert str(pdf["snapshot_ts"].dtype) == "datetime64[us, UTC]"


@pytest.mark.parametrize("few", [False, True], ids=["spark-write", "few-rows"])
def test_supersede_replaces_rows_of_a_crashed_attempt_in_one_commit(spark, store, few):
    store.append("plans", plan_rows(spark, "c1", 1, "committed-run", 2), few=few)
    store.append("plans", plan_rows(spark, "c1", 2, "crashed-run", 5), few=few)  # never got its plan_runs row
    version = store.append(
        "plans",
        plan_rows(spark, "c1", 2, "retry", 3),
        supersede=Supersede({"c1": 2}),
        txns={"partition-planner/retry/c1": 2},
        few=few,
    )
    runs = {r["run_id"]: r["count"] for r in store.read("plans").groupBy("run_id").count().collect()}
    assert runs == {"committed-run": 2, "retry": 3}
    assert version == 2
    assert store.txn_version("plans", "partition-planner/retry/c1") == 2
    assert store.txn_version("plans", "partition-planner/other/c1") is None


def test_empty_and_missing_tables(spark, store):
    assert store.read("plans").count() == 0  # outputs: empty with the schema
    assert store.read("plans").schema == PLANS.spark_schema()
    with pytest.raises(TableNotFoundError, match="table brokers"):
        store.read("brokers")
    assert store.version("plans") is None


def test_reads_input_written_by_another_writer(spark, warehouse, store):
    import pandas as pd

    from tests.conftest import write_with_delta_rs

    pdf = pd.DataFrame(
        {
            "cluster_id": ["x"],
            "snapshot_ts": [pd.Timestamp(TS)],
            "broker_id": [7],
            "rack": ["az1"],
            "state": ["active"],
            "cores": [None],
            "weight": [2.5],
            "disk_capacity_bytes": [None],
            "max_partitions": [100],
        }
    )
    write_with_delta_rs(warehouse, "brokers", pdf)
    row = store.read("brokers").first()
    assert store.read("brokers").schema == BROKERS.spark_schema()
    assert (row["broker_id"], row["weight"], row["max_partitions"], row["snapshot_ts"]) == (
        7,
        2.5,
        100,
        TS.replace(tzinfo=None),
    )


def test_missing_columns_are_named(spark, warehouse, store):
    from deltalake import write_deltalake

    write_deltalake(f"{warehouse}/brokers", pa.table({"cluster_id": ["x"], "broker_id": [1]}))
    from jobs.store import TableSchemaError

    with pytest.raises(TableSchemaError, match=r"lacks columns \['snapshot_ts', 'rack'"):
        store.read("brokers")


def test_an_output_table_from_an_older_release_reads_and_gains_the_new_columns(spark, store, warehouse):
    from deltalake import write_deltalake

    from schemas import PLAN_RUNS

    fields = list(PLAN_RUNS.arrow_schema())
    older = pa.schema(fields[: PLAN_RUNS.column_names.index("balance_score_before")])  # before the score came
    write_deltalake(f"{warehouse}/plan_runs", pa.Table.from_pylist([{"run_id": "r0", "status": "x"}], schema=older))
    # reads: the new columns are null
    assert store.read("plan_runs").select("run_id", "balance_score_after").collect() == [("r0", None)]
    # appends: the log schema gains them, and the new rows keep their values
    row = {c: None for c in PLAN_RUNS.column_names} | {"run_id": "r1", "status": "y", "balance_score_after": 75.0}
    store.append("plan_runs", spark.createDataFrame([row], PLAN_RUNS.spark_schema()))
    table = DeltaTable(f"{warehouse}/plan_runs")
    assert pa.schema(table.schema().to_arrow()).names == PLAN_RUNS.column_names
    got = table.to_pandas().set_index("run_id")["balance_score_after"]
    assert got["r1"] == 75.0 and pd.isna(got["r0"])


def test_a_commit_for_several_clusters_records_every_app_transaction_and_a_retry_is_a_no_op(spark, store):
    rows = plan_rows(spark, "c1", 1, "run", 2).unionByName(plan_rows(spark, "c2", 1, "run", 3))
    txns = {"partition-planner/run/c1": 1, "partition-planner/run/c2": 1}
    version = store.append(
        "plans", rows, supersede=Supersede({"c1": 1, "c2": 1}), txns=txns, metadata={"run_id": "run"}
    )
    assert store.txn_versions("plans", sorted(txns)) == txns
    # the same commit again (a retried job): nothing is written
    assert store.append("plans", rows, supersede=Supersede({"c1": 1, "c2": 1}), txns=txns) == version
    assert store.version("plans") == version and store.read("plans").count() == 5


def test_the_history_lists_commits_newest_first_with_their_metadata(spark, store):
    assert store.history("plans") == []
    store.append("plans", plan_rows(spark, "c1", 1, "r1", 2), metadata={"run_id": "r1"})
    store.append("plans", plan_rows(spark, "c1", 2, "r2", 2), metadata={"run_id": "r2"})
    history = store.history("plans")
    assert [c.version for c in history] == [1, 0]
    assert [c.metadata.get("run_id") for c in history] == ["r2", "r1"]
    assert all(c.timestamp_ms > 0 for c in history)


def test_staged_files_commit_only_those_named_with_their_transactions(spark, warehouse):
    """The plan job's workers write parquet into a stage folder and the driver commits the files their
    outcome rows name: a file in the folder that no outcome names (a retried task's first try) stays out,
    partition values and stats come from the files, and the same commit again adds nothing."""
    from jobs.store import DeltaRsStore, new_stage, open_store, write_parquet

    store = open_store(spark, warehouse, backend="delta-rs")
    assert isinstance(store, DeltaRsStore)
    stage = new_stage()
    folder = f"{store.location('plans')}/{stage}"
    arrow = plan_rows(spark, "a b:c", 1, "r1", 3).toArrow().cast(PLANS.arrow_schema())
    named = write_parquet(arrow, folder, PLANS) + write_parquet(
        plan_rows(spark, "c2", 1, "r1", 2).toArrow(), folder, PLANS
    )
    stray = write_parquet(arrow, folder, PLANS)  # the same cluster's rows again, from a task's failed first try
    assert len(named) == 2 and stray[0] not in named and stray[0].startswith("cluster_id=a%20b%3Ac/")
    txns = {"partition-planner/r1/a b:c": 1, "partition-planner/r1/c2": 1}
    version = store.commit_staged("plans", stage, named, txns, {"run_id": "r1"})
    assert store.txn_versions("plans", sorted(txns)) == txns
    pdf = DeltaTable(f"{warehouse}/plans").to_pandas()
    assert sorted(pdf.groupby("cluster_id").size().items()) == [("a b:c", 3), ("c2", 2)]
    stats = pa.table(DeltaTable(f"{warehouse}/plans").get_add_actions(flatten=True)).to_pydict()
    assert sorted(stats["num_records"]) == [2, 3] and sorted(stats["max.partition"]) == [1, 2]
    assert store.commit_staged("plans", stage, named + stray, txns, {}) == version  # a retried commit
    assert store.read("plans").count() == 5
