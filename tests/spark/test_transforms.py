"""Spark transforms of the pipeline, compared with chispa."""

from __future__ import annotations

import datetime as dt
import os
import time

import pandas as pd
import pytest
from chispa import assert_df_equality

from jobs import inputs
from jobs.commit import moves_columns
from jobs.inputs import assemble_partitions, at_snapshots, select_snapshots, stacked_inputs
from schemas import MOVES, PARTITIONS, PLAN_INPUT, THROUGHPUT

pytestmark = pytest.mark.spark
T1 = dt.datetime(2026, 1, 1)
T2 = dt.datetime(2026, 1, 2)
T3 = dt.datetime(2026, 1, 3)


def test_stacked_inputs_keep_rates_up_to_the_snapshot_and_the_previous_plan(spark, store):
    store.append(
        "partitions",
        spark.createDataFrame(
            [("c", T2, "t", 0, [1, 2], 1, 10), ("c", T1, "t", 0, [9], 9, 1)], PARTITIONS.ddl(optional=False)
        ),
    )
    store.append(
        "throughput",
        spark.createDataFrame(
            [("c", T1, "t", 0, 1.0, 2.0, None), ("c", T2, "t", 0, 5.0, 6.0, None), ("c", T3, "t", 0, 99.0, 9.0, None)],
            THROUGHPUT.ddl(),
        ),
    )
    plans = spark.createDataFrame(
        [("c", "t", 0, [3, 1], 4, [0, 2])],
        "cluster_id string, topic string, partition int, replicas array<int>, epoch long, cores array<int>",
    )
    moves = spark.createDataFrame(
        [("c", "t", 0, [1, 2])], "cluster_id string, topic string, partition int, from_replicas array<int>"
    )
    actual = stacked_inputs(store, {"c": T2}, plans, moves)
    expected = spark.createDataFrame(
        [  # arrays a source lacks are empty: Spark's Arrow writer is slow on null arrays
            ("c", "partition", "t", 0, [1, 2], 1, 10, None, None, None, None, [], [], []),
            ("c", "throughput", "t", 0, [], None, None, T1, 1.0, 2.0, None, [], [], []),
            ("c", "throughput", "t", 0, [], None, None, T2, 5.0, 6.0, None, [], [], []),
            ("c", "previous", "t", 0, [3, 1], None, None, None, None, None, 4, [0, 2], [], []),
            ("c", "previous_move", "t", 0, [1, 2], None, None, None, None, None, None, [], [], []),
        ],
        actual.schema,
    )
    assert actual.columns == PLAN_INPUT.column_names
    assert_df_equality(actual, expected, ignore_row_order=True)


def test_at_snapshots_picks_each_clusters_own_snapshot(spark):
    odd = "it's a \\ cluster"  # quotes and backslashes reach the SQL literal escaped
    t2_micros = T2 + dt.timedelta(microseconds=7)
    rows = spark.createDataFrame(
        [(c, ts) for c in ("a", "b", odd, "other") for ts in (T1, T2, t2_micros, T3)],
        "cluster_id string, snapshot_ts timestamp",
    )
    snapshots = {"a": T1, "b": t2_micros, odd: T3.replace(tzinfo=dt.UTC)}
    exact = rows.where(at_snapshots(snapshots))
    assert sorted(exact.collect()) == sorted([("a", T1), ("b", t2_micros), (odd, T3)])
    upto = rows.where(at_snapshots(snapshots, "<="))
    assert upto.count() == 1 + 3 + 4


@pytest.fixture
def tokyo_clock():
    """The driver's local zone set to UTC+9, as on an operator's laptop (the session stays UTC)."""
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    yield
    os.environ["TZ"] = "UTC"
    time.tzset()


def test_snapshots_are_found_whatever_the_machines_time_zone(spark, store, tokyo_clock):
    t1, t2 = T1.replace(tzinfo=dt.UTC), (T2 + dt.timedelta(microseconds=5)).replace(tzinfo=dt.UTC)
    store.append(
        "partitions",
        spark.createDataFrame([("c", ts, "t", 0, [1], 1, 10) for ts in (t1, t2)], PARTITIONS.ddl(optional=False)),
    )
    snapshots = select_snapshots(store, None, None)
    assert snapshots == {"c": t2}
    assert store.read("partitions").where(at_snapshots(snapshots)).count() == 1
    assert select_snapshots(store, dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC), ["c"]) == {"c": t1}


def test_the_snapshot_catalog_read_from_the_files_is_the_spark_jobs(spark, store, tokyo_clock):
    # where delta-rs keeps the log, snapshots are picked and counted from two columns without a Spark job (issue
    # 40); the Spark job stays for Delta's JVM backend: both give the same, at every bound, in any local zone
    times = [dt.datetime(2026, 1, d, h, tzinfo=dt.UTC) for d, h in ((1, 0), (1, 6), (2, 0), (3, 12))]
    rows = [("a", ts, "t", p, [1], 1, 10) for ts in times for p in range(1 + times.index(ts))]
    rows += [("b", times[1], "t", p, [1], 1, 10) for p in range(3)] + [("c", times[3], "u", 0, [2], 2, 1)]
    store.append("partitions", spark.createDataFrame(rows, PARTITIONS.ddl(optional=False)))
    if store.backend != "delta-rs":
        pytest.skip("the files are read with delta-rs only where it keeps the log")
    bounds = [None, times[0], times[1] + dt.timedelta(hours=1), times[3], dt.datetime(2025, 1, 1, tzinfo=dt.UTC)]
    for bound in bounds:
        files = inputs._catalog_from_files(inputs._snapshot_columns(store), bound)
        assert files == inputs._catalog_in_spark(store, bound), bound
        assert all(first.tzinfo is not None for first, *_ in files.values())
    assert inputs.snapshot_catalog(store, times[1])["a"] == (times[0], times[1], times[3])
    chosen = {"a": times[2], "b": times[1], "c": times[3]}
    assert inputs.partition_counts(store, chosen) == inputs._counts_in_spark(store, chosen) == {"a": 3, "b": 3, "c": 1}


def test_assemble_partitions_picks_newest_rate_and_joins_the_previous_plan():
    rows = [
        ("c", "partition", "t", 0, [1, 2], 1, 10, None, None, None, None, None, [], []),
        ("c", "partition", "t", 1, [2, 1], 2, 20, None, None, None, None, None, [], []),
        ("c", "partition", "t", 2, [1, 2, 4, 3], 1, 5, None, None, None, None, None, [4], [3]),  # mid-reassignment
        ("c", "throughput", "t", 0, None, None, None, T2, 5.0, 6.0, None, None, [], []),
        ("c", "throughput", "t", 0, None, None, None, T1, 1.0, 2.0, None, None, [], []),
        ("c", "throughput", "t", 0, None, None, None, T2, 4.0, 6.0, None, None, [], []),  # same time: larger wins
        ("c", "previous", "t", 0, [3, 1], None, None, None, None, None, 4, [0, 2], [], []),
        ("c", "previous", "t", 1, [2, 1], None, None, None, None, None, 1, [], [], []),
        ("c", "previous_move", "t", 0, [1, 2], None, None, None, None, None, None, [], [], []),
    ]
    inputs = pd.DataFrame(rows, columns=PLAN_INPUT.column_names)
    out = assemble_partitions(inputs.iloc[::-1])  # row order must not matter
    out = out.sort_values("partition").reset_index(drop=True)
    assert out[["partition", "bytes_in", "bytes_out", "has_throughput"]].fillna(-1).values.tolist() == [
        [0, 5.0, 6.0, True],
        [1, -1, -1, False],
        [2, -1, -1, False],
    ]
    assert out["previous_replicas"].tolist() == [[3, 1], [2, 1], None]
    # where the plan in force started: its move's from_replicas, else (left alone) its target
    assert out["previous_baseline"].tolist() == [[1, 2], [2, 1], None]
    assert out["previous_epoch"].fillna(-1).tolist() == [4, 1, -1]
    assert out["previous_cores"].tolist()[0] == [0, 2]
    assert out["replicas"].tolist() == [[1, 2], [2, 1], [1, 2, 4, 3]] and out["size_bytes"].tolist() == [10, 20, 5]
    assert [list(a) for a in out["adding_replicas"]] == [[], [], [4]]
    assert [list(r) for r in out["removing_replicas"]] == [[], [], [3]]


def test_moves_columns_keeps_changed_partitions_in_contract_order(spark):
    planned = spark.createDataFrame(
        [
            ("c", 2, "r", "t", 0, [2, 1], 2, "leader", [1, 2], 1, [], [], 0, 1, 5),
            ("c", 2, "r", "t", 1, [1, 2], 1, None, None, None, None, None, None, None, 3),
        ],
        "cluster_id string, plan_version long, run_id string, topic string, partition int, replicas array<int>, "
        "leader int, kind string, from_replicas array<int>, from_leader int, added_brokers array<int>, "
        "removed_brokers array<int>, bytes_to_move long, wave int, epoch long",
    )
    actual = moves_columns(planned)
    assert actual.columns == MOVES.column_names
    row = actual.collect()
    assert len(row) == 1 and row[0]["to_replicas"] == [2, 1] and row[0]["to_leader"] == 2 and row[0]["epoch"] == 5


def test_a_small_fleets_inputs_read_by_delta_rs_are_the_spark_scans(spark, warehouse):
    """The plan job reads a small fleet's inputs with delta-rs (FEW_ROWS): the rows each worker gets
    must be those of the Spark scans, with a plan in force (its plans and moves rows), a reassignment in flight,
    a rate history with rows after the snapshot, and brokers written before the tags and taints columns."""
    from jobs import cli, pipeline
    from jobs.demo import DEMO_SNAPSHOT, generate_fleet
    from jobs.history import plans_in_force, read_history
    from jobs.store import DeltaRsStore, open_store
    from schemas import BROKERS
    from tests.conftest import write_with_delta_rs

    later = DEMO_SNAPSHOT + dt.timedelta(hours=6)
    for ts in (DEMO_SNAPSHOT, later):
        fleet = generate_fleet(clusters=2, brokers=6, topics=4, partitions=24, seed=5, snapshot_ts=ts)
        if ts == later:  # one partition mid-reassignment, and a rate measured after the snapshot
            moving = fleet["partitions"].index[0]
            fleet["partitions"].at[moving, "adding_replicas"] = [6]
            fleet["partitions"].at[moving, "removing_replicas"] = [fleet["partitions"].at[moving, "replicas"][0]]
            fleet["partitions"].at[moving, "replicas"] = [*fleet["partitions"].at[moving, "replicas"], 6]
            write_with_delta_rs(
                warehouse, "throughput", fleet["throughput"].assign(snapshot_ts=later + dt.timedelta(1))
            )
        for name, frame in fleet.items():
            write_with_delta_rs(warehouse, name, frame.drop(columns=["tags", "taints"], errors="ignore"))
        if ts == DEMO_SNAPSHOT:
            assert cli.main(["plan", "--warehouse", warehouse, "--log-level", "WARNING"]) == 0
    store = open_store(spark, warehouse)
    if not isinstance(store, DeltaRsStore):
        pytest.skip("the files are read with delta-rs only where it keeps the log")
    snapshots = select_snapshots(store, None, None)
    history = read_history(store, "next-run", list(snapshots))
    assert set(plans_in_force(history, list(snapshots))) == {"cluster-1", "cluster-2"}

    from_files, brokers = inputs.stacked_inputs_from_files(store, snapshots, plans_in_force(history, list(snapshots)))
    scanned, scanned_brokers = pipeline.build_inputs(spark, store, snapshots, history, few=False)
    handed = pipeline.build_inputs(spark, store, snapshots, history, few=True)
    assert set(from_files["source"].to_pylist()) == {"partition", "throughput", "previous", "previous_move"}
    assert from_files["adding_replicas"].to_pylist().count([6]) == 1 and from_files["leader"].null_count
    for ours, theirs in ((handed[0], scanned), (handed[1], scanned_brokers)):
        assert_df_equality(
            ours, theirs, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
        )  # the rows, not the comments
    assert brokers.schema.names == BROKERS.column_names and brokers["tags"].null_count == len(brokers)


def test_the_planner_worker_makes_the_frames_apply_in_pandas_would_hand_it(spark, tmp_path):
    """The planner's groups travel as Arrow and the worker makes its pandas frames itself (``as_pandas``): they
    must be the frames ``applyInPandas`` handed over before, dtypes included (naive UTC nanosecond timestamps,
    arrays as numpy arrays, null arrays as None, null integers as NaN), or plans could change."""
    import pickle

    import pyarrow as pa

    from jobs.inputs import as_pandas, by_source, by_source_from_arrow
    from schemas import BROKERS

    inputs_df = spark.createDataFrame(
        [
            ("c", "partition", "t", 0, [1, 2], 1, 10, None, None, None, None, [], [3], None),
            ("c", "throughput", "t", 0, [], None, None, T1, 1.5, None, None, [], [], []),
            ("c", "previous", "t", 1, [2, 1], None, None, None, None, None, 4, [0, 2], [], []),
        ],
        PLAN_INPUT.spark_schema(),
    )
    brokers_df = spark.createDataFrame(
        [("c", T2, 1, "az1", "active", 8, None, 10**12, None, "tier=ssd", None)], BROKERS.spark_schema()
    )

    def keep(kind: str, frames: tuple[pd.DataFrame, pd.DataFrame]) -> None:
        with open(tmp_path / kind, "wb") as out:
            pickle.dump(frames, out)

    def handed(key, inputs_pdf, brokers_pdf):
        keep("pandas", (inputs_pdf, brokers_pdf))
        return pd.DataFrame({"n": [len(inputs_pdf)]})

    def made(key, inputs_tbl, brokers_tbl):
        keep("arrow", (as_pandas(inputs_tbl), as_pandas(brokers_tbl), by_source_from_arrow(inputs_tbl)))
        return pa.table({"n": [inputs_tbl.num_rows]})

    grouped = inputs_df.groupBy("cluster_id").cogroup(brokers_df.groupBy("cluster_id"))
    assert grouped.applyInPandas(handed, "n long").collect()[0]["n"] == 3
    assert grouped.applyInArrow(made, "n long").collect()[0]["n"] == 3
    with open(tmp_path / "pandas", "rb") as a, open(tmp_path / "arrow", "rb") as b:
        (handed_inputs, handed_brokers), (made_inputs, made_brokers, made_sources) = pickle.load(a), pickle.load(b)
    pairs = [(made_brokers, handed_brokers), (made_inputs, handed_inputs)]
    for source, part in by_source(handed_inputs).items():  # the worker converts each source's columns alone
        pairs.append((made_sources[source], part))
    for ours, theirs in pairs:
        keys = [c for c in ("source", "topic", "partition", "broker_id") if c in ours]
        ours, theirs = (f.sort_values(keys).reset_index(drop=True) for f in (ours, theirs))
        pd.testing.assert_frame_equal(ours, theirs)
    assert str(made_brokers["snapshot_ts"].dtype) == "datetime64[ns]"
    assert str(by_source(handed_inputs)["partition"]["leader"].dtype) == "float64"  # null on other sources' rows


def test_one_clusters_internal_error_fails_it_alone_with_its_name():
    """A bug met while planning one cluster becomes that cluster's failed outcome (no plan rows), never an
    exception that would sink the fleet's Spark job."""
    from jobs.config import Config
    from jobs.history import History
    from jobs.inputs import by_source
    from jobs.spark_planner import plan_one_cluster, plan_requests
    from schemas import BROKERS

    request = plan_requests(Config(), {"c9": T2}, History({}, {}), None)["c9"]
    sources = by_source(pd.DataFrame(columns=PLAN_INPUT.column_names))
    broken = {**sources, "throughput": sources["throughput"].drop(columns="measured_ts")}  # a column lost
    planned, summary = plan_one_cluster("c9", request, broken, pd.DataFrame(columns=BROKERS.column_names))
    assert planned.empty and summary["status"] == "failed"
    assert summary["error"].startswith("cluster c9: internal error: KeyError(")
