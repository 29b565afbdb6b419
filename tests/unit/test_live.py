"""The live layout read honestly (issue 37): a reassignment in flight is planned from its target, replication
factors are never changed unless the config asks, drift from the plan in force makes a new version."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assigners import COMMITTED, FAILED, SKIPPED, Constraints, PlanRequest, plan_cluster
from assigners.planner import STRATEGIES
from tests.unit.clusters import brokers_frame, partitions_frame


def in_flight_cluster(moving: dict[int, tuple[list[int], list[int]]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nine brokers over three racks, 30 RF-3 partitions; ``moving``: row -> (adding, removing), Kafka's union in
    ``replicas`` (target first, then the brokers being removed)."""
    brokers = brokers_frame(list(range(1, 10)))
    replicas = [[1 + (i % 9), 1 + ((i + 1) % 9), 1 + ((i + 2) % 9)] for i in range(30)]
    adding: list[list[int] | None] = [None] * 30
    removing: list[list[int] | None] = [None] * 30
    for row, (add, remove) in moving.items():
        target = [b for b in replicas[row] if b not in remove] + add
        replicas[row] = target + remove
        adding[row], removing[row] = add, remove
    parts = partitions_frame(replicas).assign(adding_replicas=adding, removing_replicas=removing)
    return brokers, parts


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_issue_37_a_reassignment_in_flight_keeps_its_replication_factor_in_every_strategy(strategy):
    """Finding 2: Replicas 1,2,4,3 with Adding 4 / Removing 3 used to be planned as four replicas."""
    brokers, parts = in_flight_cluster({0: ([4], [3]), 7: ([2], [9])})
    result = plan_cluster(brokers, parts, PlanRequest("c", strategy=strategy))
    assert result.status in (COMMITTED, SKIPPED), result.error
    assert "2 partitions mid-reassignment in the snapshot" in result.notes[0]
    assert "t0:0 1,2,4,3 -> 1,2,4" in result.notes[0] and "t0:7 8,2,9 -> 8,2" not in result.notes[0]
    planned = result.planned
    assert (planned["replicas"].map(len) == 3).all(), planned.loc[planned["replicas"].map(len) != 3]
    moved = planned[planned["kind"].notna()]
    assert (moved["from_replicas"].map(len) == 3).all()  # moves start from the in-flight target
    first = moved[(moved["topic"] == "t0") & (moved["partition"] == 0)]
    if len(first):
        assert list(first["from_replicas"].iloc[0]) == [1, 2, 4]


def test_adding_or_removing_brokers_outside_the_replicas_fail_the_cluster_by_name():
    brokers, parts = in_flight_cluster({})
    parts.at[3, "removing_replicas"] = [7]
    result = plan_cluster(brokers, parts, PlanRequest("c"))
    assert result.status == FAILED
    assert result.error.startswith("cluster c: invalid input: adding / removing replicas not among the replicas")
    assert "t0:3 replicas=4,5,6 adding= removing=7" in result.error and "(table partitions)" in result.error


@given(
    st.lists(st.integers(1, 3), min_size=12, max_size=12),
    st.sampled_from(sorted(STRATEGIES)),
)
@example([3] * 11 + [1], "balanced").via("one partition cut to one replica, the rest RF 3")
@settings(max_examples=25, deadline=None)
def test_no_plan_changes_a_replica_count_the_config_does_not_ask_for(counts, strategy):
    """Finding 1 at the planner: each partition keeps its own count (a cut snapshot must not lower the others or
    raise this one); counts that differ within a topic are named in the notes."""
    brokers = brokers_frame(list(range(1, 7)))
    replicas = [[1 + (i + k) % 6 for k in range(n)] for i, n in enumerate(counts)]
    parts = partitions_frame(replicas, topics=["t"] * 12, numbers=list(range(12)))
    result = plan_cluster(brokers, parts, PlanRequest("c", strategy=strategy))
    assert result.status in (COMMITTED, SKIPPED), result.error
    if result.status == COMMITTED:
        planned = result.planned.sort_values("partition")
        assert planned["replicas"].map(len).tolist() == counts
    uneven = [n for n in result.notes if n.startswith("topic t: partition")]
    assert bool(uneven) == (len(set(counts)) > 1)


def test_a_configured_replication_factor_still_changes_counts_and_silences_the_note():
    brokers = brokers_frame(list(range(1, 7)))
    parts = partitions_frame([[1, 2, 3]] * 5 + [[4]], topics=["t"] * 6, numbers=list(range(6)))
    result = plan_cluster(brokers, parts, PlanRequest("c", constraints=Constraints(replication_factor={"t": 3})))
    assert result.status == COMMITTED
    assert set(result.planned["replicas"].map(len)) == {3}
    assert not [n for n in result.notes if n.startswith("topic t:")]


def test_drift_from_the_plan_in_force_writes_a_new_version_with_the_same_targets():
    """Finding 3 at the planner: a plan whose targets equal the plan in force used to be `skipped` as pending."""
    brokers = brokers_frame(list(range(1, 10)))
    parts = partitions_frame([[1 + (i % 9), 1 + ((i + 3) % 9), 1 + ((i + 6) % 9)] for i in range(30)])
    first = plan_cluster(brokers, parts, PlanRequest("c"))
    target = dict(zip(zip(first.planned["topic"], first.planned["partition"]), first.planned["replicas"]))
    start = dict(zip(zip(parts["topic"], parts["partition"]), parts["replicas"]))
    again = parts.assign(
        previous_replicas=[list(target[k]) for k in zip(parts["topic"], parts["partition"])],
        previous_baseline=[list(start[k]) for k in zip(parts["topic"], parts["partition"])],
        previous_epoch=1,
    )
    request = PlanRequest("c", has_previous_plan=True, previous_partitions=30, previous_version=1)
    pending = plan_cluster(brokers, again, request)
    assert pending.status == SKIPPED and "v1 still pending" in " ".join(pending.notes)

    moved = next(k for k in target if list(target[k]) != list(start[k]))
    row = int(parts.index[(parts["topic"] == moved[0]) & (parts["partition"] == moved[1])][0])
    elsewhere = list(start[moved])[::-1]  # same brokers, another preferred leader: neither end
    drifted = again.copy()
    drifted.at[row, "replicas"] = elsewhere
    result = plan_cluster(brokers, drifted, request)
    assert result.status == COMMITTED
    assert any(n.startswith("1 partition drifted from v1") and f"{moved[0]}:{moved[1]} at" in n for n in result.notes)
    planned = result.planned.set_index(["topic", "partition"])
    assert list(planned.loc[moved, "replicas"]) == list(target[moved])  # the pending target is kept
    assert list(planned.loc[moved, "from_replicas"]) == elsewhere
