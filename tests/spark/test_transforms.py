"""Spark transforms of the pipeline, compared with chispa."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality

from jobs.pipeline import moves_columns, with_baseline, with_throughput
from schemas import MOVES

pytestmark = pytest.mark.spark
T1 = dt.datetime(2026, 1, 1)
T2 = dt.datetime(2026, 1, 2)


def test_with_throughput_takes_newest_rates_at_or_before_the_snapshot(spark):
    parts = spark.createDataFrame(
        [("c", T2, "t", 0), ("c", T2, "t", 1)], "cluster_id string, snapshot_ts timestamp, topic string, partition int"
    )
    rates = spark.createDataFrame(
        [
            ("c", T1, "t", 0, 1.0, 2.0, None),
            ("c", T2, "t", 0, 5.0, 6.0, None),
            ("c", dt.datetime(2026, 1, 3), "t", 0, 99.0, 99.0, None),
        ],
        "cluster_id string, snapshot_ts timestamp, topic string, partition int, bytes_in_per_sec double, "
        "bytes_out_per_sec double, messages_in_per_sec double",
    )
    snaps = spark.createDataFrame([("c", T2)], "cluster_id string, snapshot_ts timestamp")
    actual = with_throughput(parts, rates, snaps).select(
        "topic", "partition", "bytes_in", "bytes_out", "has_throughput"
    )
    expected = spark.createDataFrame(
        [("t", 0, 5.0, 6.0, True), ("t", 1, None, None, False)],
        "topic string, partition int, bytes_in double, bytes_out double, has_throughput boolean",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_with_baseline_left_joins_previous_plan(spark):
    parts = spark.createDataFrame([("c", "t", 0), ("c", "t", 1)], "cluster_id string, topic string, partition int")
    plans = spark.createDataFrame(
        [("c", "t", 0, [3, 1], 4)], "cluster_id string, topic string, partition int, replicas array<int>, epoch long"
    )
    actual = with_baseline(parts, plans)
    expected = spark.createDataFrame(
        [("c", "t", 0, [3, 1], 4), ("c", "t", 1, None, None)],
        "cluster_id string, topic string, partition int, baseline_replicas array<int>, baseline_epoch long",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


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
