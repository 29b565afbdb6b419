"""What a plan is measured against and when it commits: live baseline, pending plans, never worse."""

from __future__ import annotations

import pytest

from assigners import COMMITTED, SKIPPED, Constraints, PlanRequest, plan_cluster
from tests.unit.clusters import brokers_frame, executed
from tests.unit.test_strategies import zipf_cluster


def sticky_plan_of(brokers, parts):
    first = plan_cluster(brokers, parts, PlanRequest("c", "sticky"))
    assert first.status == COMMITTED, first.error
    return first


def test_an_unexecuted_plan_is_still_pending_not_replanned():
    # Given v1 planned from a drifted cluster, and a new snapshot where nobody executed it
    brokers, parts = zipf_cluster(12, 3, 600, 1.5)
    first = sticky_plan_of(brokers, parts)
    pending = executed(parts, first.planned, live=False)
    # When planning again
    again = plan_cluster(
        brokers,
        pending,
        PlanRequest("c", "sticky", has_previous_plan=True, previous_partitions=600, previous_version=1),
    )
    # Then no new version: the target is v1's, and the note counts what is still to do
    assert again.status == SKIPPED
    assert f"v1 still pending: {first.metrics.partitions_moved} partitions not at their planned layout" in again.notes
    # And every figure describes the live cluster, not the unexecuted plan
    assert again.metrics.moves == first.metrics.moves and again.metrics.moves > 0
    assert again.metrics.rack_violations_before == first.metrics.rack_violations_before
    live = pending.set_index(["topic", "partition"])["replicas"]
    moves = again.planned[again.planned["kind"].notna()]
    assert all(
        list(f) == list(live[(t, p)]) for t, p, f in zip(moves["topic"], moves["partition"], moves["from_replicas"])
    )


def test_moves_start_from_the_live_layout_when_half_of_the_plan_was_executed_and_a_broker_died():
    brokers, parts = zipf_cluster(12, 3, 600, 1.5)
    first = sticky_plan_of(brokers, parts).planned
    # half of v1 executed: the first 300 partitions are at v1's layout, the rest still live
    snapshot = executed(parts, first, live=False)
    snapshot.loc[:299, "replicas"] = snapshot.loc[:299, "previous_replicas"]
    dead = brokers.assign(state=["dead" if b == 4 else "active" for b in brokers["broker_id"]])
    request = PlanRequest("c", "sticky", has_previous_plan=True, previous_partitions=600, previous_version=1)
    again = plan_cluster(dead, snapshot, request)
    assert again.status == COMMITTED, again.error
    planned = again.planned.set_index(["topic", "partition"])
    live = snapshot.set_index(["topic", "partition"])["replicas"]
    v1 = first.set_index(["topic", "partition"])["replicas"]
    # every move starts from the live layout; applied to it, the moves give exactly the new plan
    applied = live.map(list).copy()
    for key, move in again.planned[again.planned["kind"].notna()].set_index(["topic", "partition"]).iterrows():
        assert list(move["from_replicas"]) == list(live[key])
        applied[key] = list(move["replicas"])
    assert all(applied[k] == list(planned.loc[k, "replicas"]) for k in planned.index)
    # partitions the dead broker does not touch keep v1's target: no flip-flop
    untouched = [k for k in planned.index if 4 not in v1[k]]
    assert untouched and all(sorted(planned.loc[k, "replicas"]) == sorted(v1[k]) for k in untouched)
    assert all(4 not in r for r in planned["replicas"])


def test_a_plan_that_lowers_the_balance_score_without_a_forced_change_is_skipped_unless_allowed():
    # Given a cluster whose live layout is already balanced on every goal (sticky's own result)
    brokers, parts = zipf_cluster(12, 3, 600, 1.5)
    balanced = executed(parts, sticky_plan_of(brokers, parts).planned)[parts.columns]
    # When a hash strategy would spread it by hash instead (worse load and counts)
    worse = plan_cluster(brokers, balanced, PlanRequest("c", "rendezvous"))
    # Then it is skipped, with both scores in the note
    m = worse.metrics
    assert worse.status == SKIPPED and m.balance_score_after < m.balance_score_before == 100.0
    assert any(f"from 100 to {m.balance_score_after:g}" in n and "--allow-worse" in n for n in worse.notes)
    # And allow_worse commits it, saying so
    allowed = plan_cluster(brokers, balanced, PlanRequest("c", "rendezvous", allow_worse=True))
    assert allowed.status == COMMITTED and any("allowed by allow_worse" in n for n in allowed.notes)


def test_a_forced_change_commits_even_when_the_score_drops():
    brokers, parts = zipf_cluster(12, 3, 600, 1.5)
    balanced = executed(parts, sticky_plan_of(brokers, parts).planned)[parts.columns]
    dead = brokers.assign(state=["dead" if b == 4 else "active" for b in brokers["broker_id"]])
    result = plan_cluster(dead, balanced, PlanRequest("c", "rendezvous"))
    assert result.status == COMMITTED, result.notes
    assert all(4 not in r for r in result.planned["replicas"])


@pytest.mark.parametrize("strategy", ["sticky", "round_robin"])
def test_config_entries_naming_what_the_cluster_lacks_are_warnings(strategy):
    brokers, parts = zipf_cluster(6, 3, 60, 1.5)
    constraints = Constraints(
        replication_factor={"no-such-topic": 2},
        excluded_brokers=frozenset({99}),
        affinity_hints=(("ghost", "t1"),),
    )
    result = plan_cluster(brokers, parts, PlanRequest("c", strategy, constraints, allow_worse=True))
    assert result.status == COMMITTED, result.error
    assert result.warnings == ["replication_factor no-such-topic", "excluded_brokers 99", "affinity_hints ghost"]
    assert result.error is None and any("config names what this cluster lacks" in n for n in result.notes)


def test_errors_only_for_failures():
    brokers = brokers_frame([1, 2], states=["dead", "dead"])
    _, parts = zipf_cluster(6, 3, 30, 1.5)
    failed = plan_cluster(brokers, parts, PlanRequest("c", "sticky"))
    assert failed.error and failed.status == "failed"
    ok = plan_cluster(*zipf_cluster(6, 3, 30, 1.5), PlanRequest("c", "sticky", Constraints(max_moves=2)))
    assert ok.error is None and any("move budget" in n for n in ok.notes)
