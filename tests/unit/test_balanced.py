"""``balanced``: invariants (hypothesis), and how far it is from the exact optimum (CP-SAT oracle)."""

from __future__ import annotations

import statistics

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from assigners import COMMITTED, SKIPPED, Constraints, PlanRequest, plan_cluster
from tests.unit.clusters import assert_valid, brokers_frame, executed, partitions_frame
from tests.unit.oracle import fewest_moves
from tests.unit.scenarios import scenario


def plan(brokers, parts, previous=False, constraints=None):
    request = PlanRequest("c", "balanced", constraints or Constraints(), has_previous_plan=previous, allow_worse=True)
    return plan_cluster(brokers, parts, request)


def back_and_forth(live: pd.DataFrame, planned: pd.DataFrame) -> list[tuple[str, int, int]]:
    """(topic, a, b) where the plan moves a replica of the topic a -> b and another b -> a.

    As sticky's rule counts them: only a partition that changes one replica names a definite
    a -> b (with more, the plan does not say which replaced which).
    """
    before = {(t, p): set(r) for t, p, r in zip(live["topic"], live["partition"], live["replicas"])}
    moves = set()
    for t, p, r in zip(planned["topic"], planned["partition"], planned["replicas"]):
        gone, new = before[(t, p)] - set(r), set(r) - before[(t, p)]
        if len(gone) == len(new) == 1:
            moves.add((t, *gone, *new))
    return sorted(m for m in moves if (m[0], m[2], m[1]) in moves)


def test_issue_forced_moves_count_for_the_topic_rule():
    # p5 has no replica in rack1, so the rack rule forces 1 -> 7; count balancing then wanted p2 7 -> 1.
    # The shared balancer now starts from the moves already made, so the pair A->B / B->A never forms.
    brokers = brokers_frame([1, 2, 3, 4, 5, 6, 7], ["rack0"] * 5 + ["rack1"] * 2)
    reps = [[2, 6, 4, 5], [1, 6, 5, 7], [5, 4, 7, 6], [1, 4, 5, 3], [5, 2, 6, 4], [2, 3, 4, 1]]
    parts = partitions_frame(reps, ["topic0"] * 6, list(range(6)), [1.0, 8.0, 2.0, 12.0, 2.0, 2.0])
    for strategy in ("balanced", "sticky"):
        result = plan_cluster(brokers, parts, PlanRequest("c", strategy, allow_worse=True))
        assert result.status == COMMITTED, result.error
        assert_valid(brokers, parts, result.planned, Constraints())
        assert back_and_forth(parts, result.planned) == [], strategy


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["drifted", "skewed", "rf_gt_racks"]))
def test_property_a_cluster_within_every_threshold_is_skipped(seed, kind):
    brokers, parts = scenario(kind, 6, 60, seed)
    first = plan(brokers, parts)
    if any("goal not met" in n for n in first.notes) or first.metrics.replica_spread_after > 1:
        return  # this cluster cannot meet every threshold: nothing to skip
    live = executed(parts, first.planned)[parts.columns]  # executed, and no plan on record
    again = plan(brokers, live)
    assert again.status == SKIPPED and "within every balance threshold" in again.notes[-1]


def test_balanced_evens_every_load_goal_where_sticky_leaves_them():
    brokers, parts = scenario("skewed", 12, 600, seed=1)
    sticky = plan_cluster(brokers, parts, PlanRequest("c", "sticky", allow_worse=True)).metrics
    balanced = plan(brokers, parts).metrics
    goals = ("bytes_in_ratio_after", "bytes_out_ratio_after", "disk_ratio_after")
    assert all(getattr(balanced, g) <= 1.05 + 1e-9 for g in goals), [getattr(balanced, g) for g in goals]
    assert max(getattr(sticky, g) for g in goals) > 1.10  # the gap balanced closes
    assert balanced.replica_spread_after <= 1 and balanced.leader_spread_after <= 1
    assert balanced.moves <= 1.35 * balanced.min_moves  # 120 for a bound of 92 today


def test_a_goal_out_of_reach_is_named_in_the_notes():
    # one partition carries most of the produce rate: no broker can be within 1.05 of the bytes_in bound
    brokers, parts = scenario("skewed", 6, 30, seed=3)
    parts.loc[0, "bytes_in"] = float(parts["bytes_in"].sum() * 5)
    result = plan(brokers, parts)
    note = next(n for n in result.notes if n.startswith("bytes_in goal not met"))
    assert "broker" in note and "x the lower bound" in note and "its heaviest replica is t" in note


def test_moves_against_the_exact_optimum_on_small_clusters():
    """CP-SAT's fewest moves reaching the same thresholds, on seeded small clusters (6 brokers, <= 60 partitions).

    Prints the distribution. Guards what holds today (issue 12's target, <= 1.10x on average and
    <= 1.25x at worst, is not reached yet): where balanced meets every threshold it never beats the
    optimum (the oracle and the planner agree on the goals), and its mean ratio stays below 1.5x.
    """
    kinds = ["drifted", "skewed", "broker_added", "broker_removed", "rf_gt_racks"]
    ratios, unmet = [], 0
    for seed in range(30):
        kind = kinds[seed % len(kinds)]
        brokers, parts = scenario(kind, 6, 24 + (seed * 7) % 37, seed=100 + seed)
        optimum = fewest_moves(brokers, parts, seconds=3)
        if optimum.status != "optimal" or not optimum.moves:
            continue
        result = plan(brokers, parts)
        met = not any("goal not met" in n for n in result.notes) and result.metrics.replica_spread_after <= 1
        unmet += not met
        if met:
            assert result.metrics.moves >= optimum.moves, (seed, kind, result.metrics.moves, optimum.moves)
        ratios.append(result.metrics.moves / optimum.moves)
    print(
        f"\nbalanced / optimum moves on {len(ratios)} clusters: mean {statistics.mean(ratios):.2f}, "
        f"median {statistics.median(ratios):.2f}, max {max(ratios):.2f}, percentiles 25/75/90 "
        f"{np.percentile(ratios, [25, 75, 90]).round(2).tolist()}; reachable thresholds missed on {unmet}"
    )
    assert len(ratios) >= 20
    assert statistics.mean(ratios) < 1.5
