"""round_robin: examples, Kafka's balance assertions, and hypothesis invariants."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assigners import (
    COMMITTED,
    FAILED,
    Constraints,
    InsufficientBrokersError,
    PlanRequest,
    plan_cluster,
)
from tests.unit.clusters import assert_valid, brokers_frame, partitions_frame, random_clusters


def plan(brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints | None = None, seed: int = 0):
    return plan_cluster(
        brokers, parts, PlanRequest("c1", "round_robin", constraints or Constraints(), seed, allow_worse=True)
    )


def counts(planned: pd.DataFrame) -> tuple[Counter[int], Counter[int]]:
    replicas = Counter(b for r in planned["replicas"] for b in r)
    leaders = Counter(int(r[0]) for r in planned["replicas"])
    return replicas, leaders


def test_spreads_leaders_and_replicas_evenly_on_a_uniform_cluster():
    # Given 6 brokers over 3 racks and 60 partitions of RF 3 (60*3/6 = 30 replicas each)
    brokers = brokers_frame(list(range(1, 7)))
    parts = partitions_frame([[1, 2, 3]] * 60)
    # When
    result = plan(brokers, parts)
    # Then: Kafka's own assertion when divisible: P*RF/B replicas and P/B leaders per broker
    replicas, leaders = counts(result.planned)
    assert result.status == COMMITTED
    assert set(replicas.values()) == {30}
    assert set(leaders.values()) == {10}
    assert result.metrics is not None and result.metrics.rack_violations_after == 0


def test_replica_sets_do_not_repeat_within_a_wrap_shift():
    brokers = brokers_frame(list(range(1, 7)))
    parts = partitions_frame([[1, 2, 3]] * 12)
    planned = plan(brokers, parts).planned
    sets = [frozenset(r) for r in planned["replicas"]]
    # two wraps of 6 partitions: the follower shift changes, so the second wrap repeats no set of the first
    assert not set(sets[:6]) & set(sets[6:])


def test_never_places_on_dead_draining_or_excluded_brokers():
    brokers = brokers_frame(
        list(range(1, 8)), states=["active", "dead", "draining", "active", "active", "active", "active"]
    )
    parts = partitions_frame([[1, 2, 3]] * 40)
    constraints = Constraints(excluded_brokers=frozenset({7}))
    result = plan(brokers, parts, constraints)
    used = {b for r in result.planned["replicas"] for b in r}
    assert used == {1, 4, 5, 6}


def test_uses_every_rack_when_rf_exceeds_racks():
    brokers = brokers_frame(list(range(1, 7)), racks=["a", "a", "a", "b", "b", "b"])
    parts = partitions_frame([[1, 2, 3]] * 10)
    for reps in plan(brokers, parts).planned["replicas"]:
        assert {"a", "b"} == {"a" if b <= 3 else "b" for b in reps}


def test_rf_override_per_topic_raises_and_lowers_rf():
    brokers = brokers_frame(list(range(1, 7)))
    parts = partitions_frame(
        [[1, 2]] * 5 + [[1, 2, 3]] * 5, topics=["up"] * 5 + ["down"] * 5, numbers=list(range(5)) * 2
    )
    result = plan(brokers, parts, Constraints(replication_factor={"up": 3, "down": 1}))
    lengths = dict(zip(result.planned["topic"], result.planned["replicas"].map(len)))
    assert lengths == {"up": 3, "down": 1}


def test_too_few_eligible_brokers_fails_with_a_message_naming_cluster_and_topics():
    brokers = brokers_frame([1, 2, 3], states=["active", "active", "dead"])
    parts = partitions_frame([[1, 2, 3]] * 2, topics=["orders"] * 2, numbers=[0, 1])
    result = plan(brokers, parts)
    assert result.status == FAILED
    assert result.error is not None
    assert "cluster c1" in result.error and "not enough eligible brokers" in result.error
    assert "topic orders rf=3" in result.error and "(table brokers)" in result.error


def test_no_active_brokers_is_a_typed_failure():
    result = plan(brokers_frame([1, 2], states=["dead", "draining"]), partitions_frame([[1]]))
    assert result.status == FAILED and "no active brokers" in (result.error or "")


def test_same_seed_same_plan_other_seed_other_start():
    brokers = brokers_frame(list(range(1, 10)))
    parts = partitions_frame([[1, 2, 3]] * 30)
    first = plan(brokers, parts, seed=1).planned
    again = plan(brokers, parts, seed=1).planned
    other = plan(brokers, parts, seed=2).planned
    pd.testing.assert_frame_equal(first, again)
    assert first["replicas"].tolist() != other["replicas"].tolist()


@settings(max_examples=150, deadline=None)
@given(random_clusters(), st.booleans(), st.integers(0, 3))
def test_property_every_plan_is_valid_or_a_typed_failure_exactly_when_infeasible(cluster, rack_aware, seed):
    brokers, parts = cluster
    constraints = Constraints(rack_aware=rack_aware)
    eligible = int((brokers["state"] == "active").sum())
    max_rf = int(parts["replicas"].map(len).max())
    result = plan(brokers, parts, constraints, seed)
    if eligible == 0 or max_rf > eligible:
        assert result.status == FAILED
        assert ("no active brokers" if eligible == 0 else InsufficientBrokersError.kind) in (result.error or "")
        return
    assert result.status == COMMITTED, result.error
    assert_valid(brokers, parts, result.planned, constraints)


@settings(max_examples=60, deadline=None)
@given(random_clusters(), st.integers(0, 3), st.randoms(use_true_random=False))
def test_property_deterministic_and_independent_of_row_order(cluster, seed, rnd):
    brokers, parts = cluster
    first = plan(brokers, parts, seed=seed)
    shuffled_parts = parts.sample(frac=1.0, random_state=rnd.randint(0, 1000)).reset_index(drop=True)
    shuffled_brokers = brokers.sample(frac=1.0, random_state=rnd.randint(0, 1000)).reset_index(drop=True)
    second = plan(shuffled_brokers, shuffled_parts, seed=seed)
    assert first.status == second.status and first.error == second.error
    pd.testing.assert_frame_equal(first.planned.reset_index(drop=True), second.planned.reset_index(drop=True))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 80), st.integers(0, 5))
def test_property_counts_within_one_on_uniform_racks(n_racks, per_rack, rf, n_parts, seed):
    # uniform brokers: every rack the same size, all active, same weight
    n = n_racks * per_rack
    if rf > n:
        return
    brokers = brokers_frame(list(range(1, n + 1)), racks=[f"r{i % n_racks}" for i in range(n)])
    current = [list(range(1, rf + 1))] * n_parts
    result = plan(brokers, partitions_frame(current), seed=seed)
    replicas, leaders = counts(result.planned)
    replica_counts = [replicas.get(b, 0) for b in range(1, n + 1)]
    leader_counts = [leaders.get(b, 0) for b in range(1, n + 1)]
    assert max(replica_counts) - min(replica_counts) <= 1, replica_counts
    assert max(leader_counts) - min(leader_counts) <= 1, leader_counts


@pytest.mark.parametrize("brokers_n,parts_n,rf", [(6, 60, 3), (9, 90, 3), (12, 48, 2), (5, 50, 1)])
def test_exact_share_when_divisible(brokers_n, parts_n, rf):
    brokers = brokers_frame(list(range(1, brokers_n + 1)))
    replicas, leaders = counts(plan(brokers, partitions_frame([list(range(1, rf + 1))] * parts_n)).planned)
    assert set(replicas.values()) == {parts_n * rf // brokers_n}
    assert set(leaders.values()) == {parts_n // brokers_n}
