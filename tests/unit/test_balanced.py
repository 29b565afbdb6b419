"""``balanced``: invariants (hypothesis), and how far it is from the exact optimum (CP-SAT oracle)."""

from __future__ import annotations

import re
import statistics
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from assigners import COMMITTED, SKIPPED, Constraints, PlanRequest, plan_cluster
from assigners.balance import settle
from assigners.balanced import donate as donate_module
from assigners.balanced import goals, searches
from assigners.balanced import undo as undo_module
from assigners.balanced.donate import donate
from assigners.balanced.goals import balance_goal, improve
from assigners.balanced.leaders import _Walk, anneal_leaders
from assigners.balanced.state import GoalSearch, Resource, UndoMark, counts_outside_bands
from assigners.balanced.strategy import _resources
from assigners.balanced.undo import (
    PairLoads,
    home_slots,
    moved_rows,
    pair_groups,
    undo_needless_moves,
    undo_step,
    undos_refused,
)
from assigners.model import ClusterView, PlacementRule, prepare_brokers, prepare_partitions
from assigners.placement import Usage, keep_valid_each
from assigners.policies import enforce_placement, resolve_placement
from tests.unit.clusters import (
    assert_valid,
    brokers_frame,
    demo_cluster,
    executed,
    partitions_frame,
    random_clusters,
)
from tests.unit.oracle import best_loads, fewest_moves, relaxed_least_peak
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


def met_every_goal(result) -> bool:  # type: ignore[no-untyped-def]
    return not any("goal not met" in n or "out of reach" in n for n in result.notes)


def goals_met(result) -> list[bool]:  # type: ignore[no-untyped-def]
    """Per goal in priority order (replica and leader counts, disk, bytes in, bytes out, load, leader bytes in):
    met? A goal the racks put out of reach is met where its note says it is held to its ratio of the rack floor."""
    names = (("replica count", "replicas count"), ("leaders count",), ("disk",), ("bytes_in",), ("bytes_out",))
    names += (("load",), ("leader_bytes_in",))
    return [
        not any(n.startswith(f"{g} goal") and " instead: " not in n for n in result.notes for g in goal)
        for goal in names
    ]


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["drifted", "skewed", "broker_added", "broker_removed", "rf_gt_racks"]),
    brokers=st.integers(4, 9),
    partitions=st.integers(10, 80),
    seed=st.integers(0, 10_000),
)
@example(kind="rf_gt_racks", brokers=6, partitions=38, seed=3)
@example(kind="skewed", brokers=6, partitions=20, seed=0)
@example(kind="skewed", brokers=7, partitions=10, seed=304)  # a scale-out (broker 1 empty) the rack rule cuts short
@example(kind="skewed", brokers=7, partitions=10, seed=37)  # disk met against its held threshold only on the replan
@example(kind="broker_added", brokers=7, partitions=20, seed=1)  # rack mates at 11 and 13 (held ceiling): kept so
def test_property_replanning_its_own_output_moves_nothing_unless_it_meets_more_goals(kind, brokers, partitions, seed):
    """The executed plan is the plan in force: balanced keeps it, unless a goal the plan missed becomes
    reachable with the plan as the baseline (its per-plan rules, a replica moves once and no topic moves
    A->B and B->A, start over). Then it meets strictly more goals, in priority order. A scale-out that
    leaves a goal unmet says to plan again once executed: that plan evens out what the old brokers could
    not give by moving only onto the new ones, and leaves no goal worse."""
    b, parts = scenario(kind, brokers, partitions, seed)
    first = plan(b, parts)
    assert first.status == COMMITTED, first.error
    live = executed(parts, first.planned)
    again = plan(b, live, previous=True)
    assert again.status in (COMMITTED, SKIPPED), again.error
    if again.status == COMMITTED and again.metrics.moves:
        if any(note.startswith("scale-out:") for note in first.notes):
            assert goals_met(again) >= goals_met(first), (first.notes, again.notes)
        else:
            assert goals_met(again) > goals_met(first), (first.notes, again.notes)


# Found by hypothesis: two topic3 partitions on one rack each lost a replica to the rack rule, and the
# refill gave each the broker the other had left (6 -> 5 and 5 -> 6); the refill now avoids that.
RACK_REPAIR_CROSSING = (
    brokers_frame(list(range(1, 9)), racks=["rack0", "rack0", "rack1", "rack0", "rack1", "rack0", "rack0", "rack0"]),
    partitions_frame(
        [[7], [3], [3, 1], [4, 6], [3, 5], [8, 6], [7, 1], [2, 8]],
        topics=["topic0", "topic1", "topic2", *["topic3"] * 5],
        numbers=[0, 0, 0, 0, 1, 2, 3, 4],
        bytes_in=[5.0, 3.0, 3.0, 2.0, 2.0, 3.0, 1.0, 1.0],
    ),
)


@settings(max_examples=30, deadline=None)
@given(cluster=random_clusters(max_brokers=9, max_rf=4))
@example(cluster=RACK_REPAIR_CROSSING)
def test_property_no_topic_moves_a_to_b_and_b_to_a(cluster):
    brokers, parts = cluster
    result = plan(brokers, parts)
    if result.status == COMMITTED:
        assert back_and_forth(parts, result.planned) == []


def test_a_rack_every_partition_needs_is_named_when_it_keeps_a_goal_out_of_reach():
    # rack r2 has one broker of five and every RF-3 partition needs a replica there
    brokers = brokers_frame([1, 2, 3, 4, 5], ["r0", "r0", "r1", "r1", "r2"])
    reps = [[1, 3, 5], [2, 4, 5], [1, 4, 5], [2, 3, 5]] * 5
    parts = partitions_frame(reps, ["t"] * 20, list(range(20)), [10.0] * 20)
    result = plan(brokers, parts)
    counts = next(n for n in result.notes if n.startswith("replica count goal out of reach"))
    assert "rack r2 must hold a replica of each of the 20 partitions" in counts and "broker 5 holds 20" in counts
    bytes_in = next(n for n in result.notes if n.startswith("bytes_in goal out of reach"))
    assert "rack r2" in bytes_in and "broker 5" in bytes_in


def test_racks_too_small_for_their_share_together_are_named_together():
    # racks of 4, 3 and 3 brokers; 30 RF-3 partitions and 10 RF-2 ones that skip r2: r1 and r2 must hold
    # 2 replicas of each RF-3 partition and 1 of each RF-2 one (r0 can be one of their racks at most),
    # 70 over 6 brokers, 11.7 each, above the band of 11 (110 replicas over 10 brokers); r1 alone: 10 each
    brokers = brokers_frame(list(range(1, 11)), ["r0"] * 4 + ["r1"] * 3 + ["r2"] * 3)
    reps = [[1 + i % 4, 5 + i % 3, 8 + i % 3] for i in range(30)] + [[1 + i % 4, 5 + i % 3] for i in range(10)]
    parts = partitions_frame(reps, ["t"] * 40, list(range(40)), [10.0] * 40)
    result = plan(brokers, parts)
    counts = next(n for n in result.notes if n.startswith("replica count goal out of reach"))
    assert "racks r1, r2 must hold 70 replicas at least: each partition must span 2 or 3 racks" in counts
    assert "r0 is only one of them" in counts


def test_with_uneven_racks_a_load_goal_swaps_within_the_top_brokers_rack():
    # racks of 5, 4 and 4 brokers, every partition RF 3 over 3 racks: a 4-broker rack holds a replica of
    # each, so the best any plan does is 13/12 of the bound. The least loaded brokers are in the 5-broker
    # rack, where every partition already has its replica: only brokers of the top one's rack can swap
    # (without them, disk stopped at 1.20x)
    brokers, parts = scenario("skewed", 13, 300, seed=0)
    result = plan(brokers, parts)
    assert result.status == COMMITTED
    assert result.metrics.disk_ratio_after <= 1.05 * 13 / 12, result.metrics.disk_ratio_after
    assert any(n.startswith("disk goal out of reach: rack r1 must hold a replica of each") for n in result.notes)


@settings(max_examples=40, deadline=None)
@given(cluster=random_clusters(), strategy=st.sampled_from(["sticky", "round_robin", "lpt"]))
def test_property_no_plan_beats_the_rack_rules_floor(cluster, strategy):
    # the floor the notes call out of reach is a true lower bound: every valid plan's most loaded broker
    # (load per unit of capacity, the loads recomputed here from the plan's replica lists) is at least it;
    # the plans of quicker strategies are as good a test as balanced's
    brokers, parts = cluster
    result = plan_cluster(brokers, parts, PlanRequest("c", strategy, allow_worse=True))
    if result.status != COMMITTED:
        return
    c = Constraints()
    b, p = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(b, c)
    planned = [list(r) for r in result.planned["replicas"]]
    search = GoalSearch(planned, p, view, _resources(p, b, view), c)
    for resource in search.resources[:2]:  # disk and bytes_in: every replica carries the partition's amount
        load = dict.fromkeys(view.eligible, 0.0)
        for i, replicas in enumerate(planned):
            for broker in replicas:
                load[broker] += float(resource.follower[i])
        peak = max(load[x] / resource.capacity[slot] for slot, x in enumerate(view.eligible))
        assert peak >= search.rack_floor(resource.follower, resource.capacity)[1] * (1 - 1e-9)


def oracle_clusters() -> list[tuple[str, int, int, int]]:
    """(kind, brokers, partitions, seed): 75 small clusters of 6 brokers, 10 of 7 and 8 with fewer partitions."""
    kinds = ["drifted", "skewed", "broker_added", "broker_removed", "rf_gt_racks"]
    out = [(kinds[s % 5], 6, 24 + (s * 7) % 37, 100 + s) for s in range(75)]
    out += [(kinds[s % 5], 7 + s % 2, 16 + (s * 5) % 15, 200 + s) for s in range(10)]
    return out


def test_moves_against_the_exact_optimum_on_small_clusters():
    """CP-SAT's fewest moves reaching the same thresholds under the same rules, on 85 seeded small clusters.

    Prints the distribution. Issue 12's target: on every cluster the
    solver proves reachable, balanced meets every threshold, never beats
    the optimum (the oracle and the planner agree on the goals and the
    rules), and its moves are at most 1.10x the optimum on average (1.019
    today, with the combined load goal: 1.022 before it) and 1.25x at worst
    (1.25: rf_gt_racks/7/21/204).
    """
    ratios, missed, solved = [], [], 0
    for kind, n_brokers, n_parts, seed in oracle_clusters():
        brokers, parts = scenario(kind, n_brokers, n_parts, seed=seed)
        optimum = fewest_moves(brokers, parts, seconds=5)
        if optimum.status != "optimal" or not optimum.moves:
            continue
        solved += 1
        result = plan(brokers, parts)
        if not met_every_goal(result) or result.metrics.replica_spread_after > 1:
            missed.append((kind, n_brokers, n_parts, seed))
            continue
        assert result.metrics.moves >= optimum.moves, (kind, seed, result.metrics.moves, optimum.moves)
        ratios.append(result.metrics.moves / optimum.moves)
    print(
        f"\nbalanced / optimum moves on {len(ratios)} of {solved} clusters the solver proved reachable: "
        f"mean {statistics.mean(ratios):.3f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}, "
        f"percentiles 25/75/90 {np.percentile(ratios, [25, 75, 90]).round(2).tolist()}; "
        f"reachable thresholds missed on {len(missed)}: {missed}"
    )
    assert solved >= 50
    assert not missed  # 5 before the widening, 4 before smallest first, 3 before every order, 2 before annealing,
    # 1 (rf_gt_racks/7/21/204) before the unmet goal was searched first
    assert max(ratios) <= 1.25  # 2.40 before every count order, the annealing and the rebuilds
    assert statistics.mean(ratios) <= 1.10


OWN_THRESHOLDS = Constraints(balanced_disk_ratio=1.15, balanced_leader_bytes_in_ratio=1.25, balanced_leader_slack=2)


def test_each_goals_own_threshold_against_the_exact_optimum():
    """With a goal's own threshold ([planner.balanced] disk_ratio, leader_bytes_in_ratio, leader_slack), the
    oracle solves for those thresholds, and balanced meets them with as few moves as with the shared ones
    (every fourth oracle cluster: 15 of 22 solvable, mean 1.015x, worst 1.18x today)."""
    ratios, solved = [], 0
    for kind, n_brokers, n_parts, seed in oracle_clusters()[::4]:
        brokers, parts = scenario(kind, n_brokers, n_parts, seed=seed)
        optimum = fewest_moves(brokers, parts, OWN_THRESHOLDS, seconds=5)
        if optimum.status != "optimal" or not optimum.moves:
            continue
        solved += 1
        result = plan(brokers, parts, constraints=OWN_THRESHOLDS)
        assert met_every_goal(result), (kind, seed, result.notes)
        assert result.metrics.moves >= optimum.moves, (kind, seed, result.metrics.moves, optimum.moves)
        ratios.append(result.metrics.moves / optimum.moves)
    assert solved >= 12
    assert max(ratios) <= 1.25 and statistics.mean(ratios) <= 1.10


def test_the_leaders_are_annealed_hot_enough_to_leave_the_layout_the_greedy_search_ends_on():
    # one topic's 13 partitions carry most of the bytes out, each leader about a third of a broker's share:
    # the goal search's transfers stop at 1.107x, and a walk that never climbs stops there too; a leader
    # layout within the threshold exists on the same replica sets (the exact solver's plan moves as many)
    brokers, parts = scenario("skewed", 6, 51, seed=309)
    result = plan(brokers, parts)
    assert met_every_goal(result), result.notes
    # 22 moves against the solver's 21 with every goal (the combined load included): 21 before the plans missing
    # the same goals were ranked by how far they miss them (searches._rank), which changes the search's path
    assert fewest_moves(brokers, parts, seconds=10).moves == 21 and result.metrics.moves <= 22


def test_a_looser_goal_threshold_is_the_one_its_goal_is_held_to():
    brokers, parts = scenario("drifted", 6, 24, seed=100)
    shared, own = plan(brokers, parts), plan(brokers, parts, constraints=OWN_THRESHOLDS)
    assert met_every_goal(shared) and met_every_goal(own)
    assert (shared.metrics.moves, own.metrics.moves) == (15, 13)  # the oracle's optimum either way
    assert shared.metrics.disk_ratio_after <= 1.05 + 1e-9 < own.metrics.disk_ratio_after <= 1.15 + 1e-9
    assert own.metrics.bytes_in_ratio_after <= 1.05 + 1e-9  # the others keep the shared ratio
    # a goal left unmet is named against its own threshold
    strict = replace(OWN_THRESHOLDS, balanced_disk_ratio=1.0)
    note = next(n for n in plan(brokers, parts, constraints=strict).notes if n.startswith("disk goal"))
    assert "(threshold 1)" in note


def test_a_cluster_within_its_goals_own_thresholds_is_skipped_and_told_so():
    brokers, parts = scenario("drifted", 6, 24, seed=100)
    first = plan(brokers, parts, constraints=OWN_THRESHOLDS)
    again = plan(brokers, executed(parts, first.planned)[parts.columns], constraints=OWN_THRESHOLDS)
    assert again.status == SKIPPED
    assert again.notes[-1] == (
        "within every balance threshold (replicas within 1, leaders 2, disk 1.15x, bytes_in 1.05x, bytes_out 1.05x, "
        "load 1.05x, leader_bytes_in 1.25x their bounds): nothing to change"
    )
    each = {f"balanced_{goal}_ratio": 1.2 for goal in ("disk", "bytes_in", "bytes_out", "leader_bytes_in", "load")}
    again = plan(brokers, executed(parts, first.planned)[parts.columns], constraints=Constraints(**each))
    assert "(counts within 1, loads within 1.2x their bounds)" in again.notes[-1]


@pytest.mark.parametrize(("slack", "shifted", "moves"), [(1, 1, 1), (2, 1, None), (2, 3, 2), (3, 2, None), (3, 3, 1)])
def test_a_wider_count_slack_leaves_counts_its_band_allows(slack, shifted, moves):
    """Six brokers of 30 replicas (no load), ``shifted`` followers moved from one broker to a rack mate: a
    band of +-(slack - 1) around the share is left alone (skipped), one beyond it brought just inside."""
    brokers, parts = scenario("drifted", 6, 60, seed=3)
    even = executed(parts, plan(brokers, parts).planned)[parts.columns].assign(
        size_bytes=0, bytes_in=0.0, bytes_out=0.0
    )
    replicas = [list(r) for r in even["replicas"]]
    assert all(n == 30 for n in pd.Series([b for r in replicas for b in r]).value_counts())
    donor = 1
    rack_mate = int(
        brokers.loc[(brokers["rack"] == brokers.loc[0, "rack"]) & (brokers["broker_id"] != donor)].iloc[0, 0]
    )
    followers = [r for r in replicas if donor in r[1:] and rack_mate not in r][:shifted]
    for r in followers:
        r[r.index(donor)] = rack_mate
    result = plan(brokers, even.assign(replicas=replicas), constraints=Constraints(balanced_count_slack=slack))
    if moves is None:
        assert result.status == SKIPPED and result.notes[-1].startswith("within every balance threshold")
    else:
        assert result.status == COMMITTED and result.metrics.moves == moves
        assert result.metrics.replica_spread_after == 2 * (slack - 1)


def test_a_goal_the_others_leave_stuck_is_met_by_searching_it_first(monkeypatch):
    # bytes out (leaders) needs replica sets where heavy and light leaders pair up; the earlier goals' swaps
    # trade them away and leave bytes out stuck. Searched first, then rebuilt: every goal with 11 moves (CP-SAT:
    # 11, the optimum). (rf_gt_racks/7/21/204 was this test's cluster until the combined load goal took its place
    # before bytes out, as in Cruise Control's order: its first search now meets every goal.)
    brokers, parts = scenario("skewed", 6, 30, seed=403)
    result = plan(brokers, parts)
    assert met_every_goal(result) and result.metrics.moves == 11, result.notes
    monkeypatch.setattr(searches, "_unmet_goal_first", lambda best, *_: best)
    without = plan(brokers, parts)
    assert [n.split(" goal")[0] for n in without.notes] == ["bytes_out", "leader_bytes_in"]


def test_a_stuck_count_with_every_load_goal_met_is_left_to_the_count_moves():
    # weights 2 and 1 on six brokers of one rack: the first searches leave broker 3 below its leader band
    # (a "leaders count goal not met" note) with every load goal met, so no load goal is searched first
    # (hypothesis found this raising ValueError); the rebuilds then meet the count too
    brokers = brokers_frame([1, 2, 3, 4, 5, 6], ["rack0"] * 6, ["active"] * 6, [2.0, 1.0, 2.0, 2.0, 2.0, 1.0])
    replicas = [[1], [5], [1], [5], [3], [4], [6], [6], [1], [2, 6], [2, 6], [5, 4]]
    topics = ["topic0"] * 3 + ["topic1"] * 6 + ["topic2"] * 3
    parts = partitions_frame(
        replicas, topics, [0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1, 2], bytes_in=[6, 1, 28, 2, 13, 1, 110, 10, 1, 2, 2, 2]
    )
    result = plan(brokers, parts)
    assert result.status == COMMITTED and result.notes == []
    assert_valid(brokers, parts, result.planned, Constraints())


def test_a_goal_the_usual_candidates_get_stuck_on_is_met_by_the_widened_search():
    # the usual five replicas x five partner brokers leave the disk goal at 1.05x+ on broker 2 with no accepted
    # action; CP-SAT reaches every threshold with 8 moves, and the widened search with 12
    brokers, parts = scenario("skewed", 6, 44, seed=161)
    result = plan(brokers, parts)
    assert met_every_goal(result), result.notes
    assert result.metrics.replica_spread_after <= 1 and result.metrics.leader_spread_after <= 1
    assert_valid(brokers, parts, result.planned, Constraints())


def test_a_goal_an_earlier_one_pins_at_its_threshold_is_met_by_swaps_screened_for_the_earlier_goals(monkeypatch):
    # drifted/6/400/1 evened smallest first: every swap the usual candidates list for bytes in (each partner's
    # lightest replicas) takes a disk load above its threshold; screened for disk in bulk, the swaps that keep
    # it there meet bytes in, and with no more moves than the count balancing's lower bound
    brokers, parts = scenario("drifted", 6, 400, seed=1)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    live = prepared["current"].tolist()
    reached = {}
    for screened in (False, True):
        if not screened:
            monkeypatch.setattr(goals, "improve_screened", lambda search, k, top: False)
        search = settled_search("drifted", 6, 400, seed=1)
        notes, met = searches.reach_goals(search.replicas, prepared, view, search.resources, Constraints())
        moves = sum(len(set(now) - set(was)) for now, was in zip(search.replicas, live))
        reached[screened] = (met, moves, notes)
        monkeypatch.undo()
    assert reached[False][0][:2] == [True, False] and "bytes_in goal not met" in reached[False][2][0]
    assert reached[True] == ([True] * 5, 384, [])


def test_a_rack_repair_whose_lightest_swaps_the_topic_rule_refuses_is_screened_down_to_legal_ones():
    # the 1M bench fleet's cluster-10: 6 brokers in racks of 2, one new and empty, 10k partitions of 333 topics
    # drawn without racks (6,512 rack violations). After the repair, every swap the screen listed for broker 2
    # (the lowest peaks: its partner's lightest replicas) broke the topic rule while thousands of others were
    # legal; the plan stopped with disk at 1.432x and bytes in at 1.458x the bound, in 5.9 s. Screened again
    # for legal swaps only: every goal met in ~1 s, 1.04x the count balancing's lower bound on moves
    from jobs.demo import generate_fleet

    brokers, parts = demo_cluster(generate_fleet(clusters=10, partitions=10_000, topics=333), "cluster-10")
    result = plan(brokers, parts)
    assert met_every_goal(result), result.notes
    assert result.metrics.moves <= 1.05 * result.metrics.min_moves, (result.metrics.moves, result.metrics.min_moves)
    assert_valid(brokers, parts, result.planned, Constraints())


@pytest.mark.parametrize(
    "cluster, most, moves",
    [
        # every start (two count orders, each plain and widened) misses leader bytes in, which an exact solver
        # over the leaders alone meets (docs/balanced.md, known limits). Compared on goals met and moves alone,
        # the plan kept missed it at 1.148x the bound; ranked on how far they miss it (searches._above, to a
        # hundredth of the threshold), 1.094x with as many moves
        ("cluster-33", 1.10, 1_324),
        # where its screened swaps were offered the deeper legal swaps beside the lowest-peak ones, rounds took
        # swaps of less gain and it ended at 1.196x (1,626 moves); the lowest-peak legal ones tried first
        # (goals.improve_screened), 1.115x with 1,629
        ("cluster-84", 1.12, 1_640),
    ],
)
def test_a_mid_size_cluster_missing_a_leader_goal_from_every_start_misses_it_least(cluster, most, moves):
    # the demo generator's 1,000-partition clusters of 24 brokers
    from jobs.demo import generate_fleet

    number = int(cluster.split("-")[1])
    brokers, parts = demo_cluster(generate_fleet(clusters=number, topics=200, partitions=1_000), cluster)
    result = plan(brokers, parts)
    missed = [note for note in result.notes if "not met" in note or "out of reach" in note]
    assert len(missed) == 1 and missed[0].startswith("leader_bytes_in goal not met"), result.notes
    assert float(re.search(r" at ([0-9.]+)x the lower bound", missed[0])[1]) <= most, missed
    assert result.metrics.moves <= moves
    assert_valid(brokers, parts, result.planned, Constraints())


@given(
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.lists(st.sampled_from([0.0, -1.0, -1.004, -1.02, -1.3]), min_size=3, max_size=3),
    st.lists(st.sampled_from([0.0, -1.0, -1.004, -1.02, -1.3]), min_size=3, max_size=3),
    st.integers(-5, 0),
    st.integers(-5, 0),
)
def test_plans_rank_on_goals_met_then_misses_beyond_the_tolerance_then_moves(
    met_a, met_b, over_a, over_b, moves_a, moves_b
):
    a, b = (met_a, tuple(over_a), moves_a), (met_b, tuple(over_b), moves_b)
    assert searches._above(a, b, 0.0) == (a > b)  # no tolerance: the ranks' own order
    wide = searches._above(a, b, 0.01)
    if met_a != met_b:
        assert wide == (met_a > met_b)
    else:  # the first miss differing by more than the tolerance decides, else the moves
        apart = [(x, y) for x, y in zip(over_a, over_b) if abs(x - y) > 0.01]
        assert wide == (apart[0][0] > apart[0][1] if apart else moves_a > moves_b)


def test_a_small_cluster_is_searched_from_every_count_order_and_the_fewest_moves_kept():
    # broker_added/6/38/102: evening the counts smallest first, in partition order or largest first leaves
    # bytes_out at 1.07x on broker 2; coldest by bytes_in first meets every goal with CP-SAT's 29 moves.
    # rf_gt_racks/6/52/104: smallest first meets every goal with 13 moves, partition order with 10 (CP-SAT: 9)
    for (kind, n_parts, seed), most in ((("broker_added", 38, 102), 29), (("rf_gt_racks", 52, 104), 10)):
        brokers, parts = scenario(kind, 6, n_parts, seed=seed)
        result = plan(brokers, parts)
        assert met_every_goal(result), (kind, result.notes)
        assert result.metrics.moves <= most, (kind, result.metrics.moves)
        assert result.metrics.replica_spread_after <= 1 and result.metrics.leader_spread_after <= 1
        assert_valid(brokers, parts, result.planned, Constraints())


def test_a_large_cluster_stuck_on_its_first_count_order_is_searched_from_the_second_before_widening(monkeypatch):
    # drifted/6/400/1 (1,200 replicas: above SMALL, two count orders) with its orders as a small cluster's
    # first two: evened smallest first, bytes in stays stuck at 1.051x (with the screened swaps switched off:
    # they meet it, and no scenario cluster tried is stuck with them, 140 of 6-8 brokers); evened in partition
    # order, the plain search meets every goal with the fewest moves (384, the count balancing's lower bound),
    # so the first order's widened search, the costliest, is never run (a large cluster's own orders, partition
    # order first, meet every goal at once on every scenario cluster tried: none is stuck there to show it)
    brokers, parts = scenario("drifted", 6, 400, seed=1)
    starts, widened = [], []
    reach, orders = searches.reach_goals, searches._count_orders
    monkeypatch.setattr(searches, "_count_orders", lambda partitions, small: orders(partitions, True))
    monkeypatch.setattr(goals, "improve_screened", lambda search, k, top: False)

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        (widened if kwargs.get("widen") else starts).append(kwargs.get("since") is None)
        return reach(*args, **kwargs)

    monkeypatch.setattr(searches, "reach_goals", counted)
    result = plan(brokers, parts)
    assert starts.count(True) == 2 and not widened  # both orders searched, neither widened
    assert met_every_goal(result), result.notes
    assert result.metrics.moves == result.metrics.min_moves == 384
    assert result.metrics.replica_spread_after <= 1 and result.metrics.leader_spread_after <= 1
    assert_valid(brokers, parts, result.planned, Constraints())


def settled_search(
    kind: str, n_brokers: int, n_parts: int, seed: int, constraints: Constraints | None = None
) -> GoalSearch:
    """A goal search on a scenario's layout with its counts evened as ``balanced`` first evens them."""
    c = constraints or Constraints()
    brokers, parts = scenario(kind, n_brokers, n_parts, seed=seed)
    prepared_brokers, prepared = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(prepared_brokers, c)
    replicas = keep_valid_each([list(r) for r in prepared["preferred"]], prepared["rf"].tolist(), view, True)
    settle(replicas, prepared, view, since=prepared["current"].tolist(), take_first=prepared["size_bytes"].to_numpy())
    return GoalSearch(replicas, prepared, view, _resources(prepared, prepared_brokers, view), c)


def search_at(kind: str, n_brokers: int, n_parts: int, seed: int) -> GoalSearch:
    """A goal search whose live layout is the settled one of :func:`settled_search`: nothing moved yet."""
    brokers, parts = scenario(kind, n_brokers, n_parts, seed=seed)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    replicas = settled_search(kind, n_brokers, n_parts, seed).replicas
    live = prepared.assign(current=[list(r) for r in replicas])
    return GoalSearch(replicas, live, view, _resources(prepared, prepared_brokers, view), Constraints())


def needless_swap(search: GoalSearch) -> tuple[int, int]:
    """Two followers of different topics on two brokers of one rack (neither the hottest of any goal), whose
    undo alone would take a count out of its band, swapped; their rows."""
    hottest = {int(np.argmax(search.load[k])) for k in range(len(search.resources))}
    undo_alone_leaves_band = [
        (a, b)
        for a in range(len(search.brokers))
        for b in range(len(search.brokers))
        if a != b
        and search.rack_of[a] == search.rack_of[b]
        and not hottest & {a, b}
        and not (search.count_ok(search.count, 0, a, -1) and search.count_ok(search.count, 0, b, +1))
    ]
    a, b = undo_alone_leaves_band[0]
    on_a = [r for r in search.rows_on(a).tolist() if not search.lead[r]]
    on_b = [r for r in search.rows_on(b).tolist() if not search.lead[r]]
    p = next(r for r in on_a if b not in search.replicas[search.part[r]])
    q = next(
        r
        for r in on_b
        if a not in search.replicas[search.part[r]] and search.topic[search.part[r]] != search.topic[search.part[p]]
    )
    search.apply_steps(((p, b, False, True), (q, a, False, True)))
    return p, q


def test_a_swap_nothing_needs_is_undone_as_a_pair_where_either_undo_alone_leaves_a_count_band():
    # two followers of different topics trade brokers within one rack: counts stay, and either replica
    # going back alone would take a broker out of its band, so only the pair puts the live layout back
    search = search_at("drifted", 12, 1000, 3)
    live = [list(r) for r in search.replicas]
    peaks = [float(search.load[k].max()) for k in range(len(search.resources))]
    needless_swap(search)
    assert search.replicas != live
    assert undo_needless_moves(search) == 2
    assert search.replicas == live
    assert [float(search.load[k].max()) for k in range(len(search.resources))] == pytest.approx(peaks)
    assert not search.moved_in.any()


@pytest.mark.parametrize(
    "kind, n_brokers, n_parts, seed, load_ratio",
    # large clusters with a needless move left are few: since shedding, 24 x 3,000 seed 4 of rf_gt_racks leaves none;
    # on uneven racks, since the load is held to its ratio of what bytes out leaves reachable, only a load held
    # to that floor itself does (load_ratio 1.0)
    [("rf_gt_racks", 13, 400, 1, 1.05), ("rf_gt_racks", 16, 1000, 3, 1.05), ("uneven_racks", 24, 3000, 4, 1.0)],
)
def test_undoing_saves_the_moves_it_counts_and_makes_nothing_worse(kind, n_brokers, n_parts, seed, load_ratio):
    # after one pass of the goals (clusters where later actions leave earlier moves needless): each undo puts
    # a moved replica back on a live broker of its partition, no goal's peak rises above its threshold (or the
    # peak it had), no count leaves its band further (or, in a rack forced above the bands, its held ceiling),
    # and every partition still keeps the rack rule
    search = settled_search(kind, n_brokers, n_parts, seed, Constraints(balanced_load_ratio=load_ratio))
    search.batch = searches.BATCH if n_parts > 200 else 1
    for resource in search.resources:
        balance_goal(search, resource)
    live = [set(r) for r in search.live.lists]

    def moves() -> int:
        return sum(len(set(now) - was) for now, was in zip(search.replicas, live))

    before, peaks = moves(), [float(search.load[k].max()) for k in range(len(search.resources))]
    counts = search.count.copy()
    undone = undo_needless_moves(search)
    assert undone > 0 and moves() == before - undone
    for k in range(len(search.resources)):
        assert search.load[k].max() <= max(peaks[k], search.target(k)) * (1 + 1e-9)
    for b, (was, now) in enumerate(zip(counts.tolist(), search.count.tolist())):
        low, _ = search.band(b, 0)
        assert min(was, low) <= now <= max(was, search.ceiling(b, 0))
    view = search.view
    for replicas, rf in zip(search.replicas, search.rf.tolist()):
        assert len({view.domain_of[b] for b in replicas}) >= view.required_domains(rf)


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("drifted", 3)])
def test_a_round_on_a_large_cluster_takes_the_next_options_of_its_ranking_each_lowering_the_top_broker(kind, seed):
    # 12 brokers, 3,000 replicas: after the counts are evened the top broker is 1.2-1.6x the disk bound, tens
    # of swaps above the threshold; one round takes several, each of its own partitions, and none lifts
    # another broker to where the top broker was
    search = settled_search(kind, 12, 1000, seed)
    one = settled_search(kind, 12, 1000, seed)  # the same start, one action a round (as on a small cluster)
    search.batch = searches.BATCH
    top = int(np.argmax(search.load[0]))
    assert search.ratio(0) > 1.15
    before, peak = [list(r) for r in search.replicas], float(search.load[0][top])
    assert improve(search, 0, top) and improve(one, 0, top)
    assert one.actions == 1 and 1 < search.actions <= searches.BATCH
    changed = [(set(was) - set(now), set(now) - set(was)) for was, now in zip(before, search.replicas) if was != now]
    assert len(changed) == 2 * search.actions  # swaps: each of two partitions moves one replica, once
    assert all(len(gone) == len(new) == 1 for gone, new in changed)
    # disk per broker from the replica lists alone (independent of the search's bookkeeping)
    sizes = search.sizes.astype(float)
    disk = np.zeros(len(search.brokers))
    for replicas, size in zip(search.replicas, sizes):
        for broker in replicas:
            disk[search.slot_of(broker)] += size
    assert np.allclose(disk / search.resources[0].capacity, search.load[0])
    assert search.load[0][top] < one.load[0][top] < peak
    assert max(np.delete(search.load[0], top)) < peak


@pytest.mark.parametrize("kind, seed", [("capped", 4), ("drifted", 1)])
def test_what_the_search_keeps_between_rounds_is_what_the_layout_it_reached_gives(kind, seed):
    # the rules' answers per (replica, broker) and the replicas moved away from each broker outlive the
    # actions that leave them true: after a search of many actions (with caps: a broker's room changes
    # with its replicas), each kept answer is the rules' own and each broker's list is found from scratch
    search = settled_search(kind, 12, 1000, seed)
    search.batch = searches.BATCH
    for resource in search.resources:
        balance_goal(search, resource)
    assert search.actions > 20
    # the answers still current (their topic has not moved since, nor a capped broker's replicas)
    kept = []
    for key, (answer, stamp, moved) in search._steps.items():
        row, slot = divmod(key, search._slot_count)
        now = int(search.version[slot]) if slot in search._capped else 0
        if moved == search._topic_moved[search._topic_of[row]] and stamp == now:
            kept.append((row, slot, answer))
    assert len(kept) > 100 and any(answer for *_, answer in kept) and not all(answer for *_, answer in kept)
    for row, slot, answer in kept:
        i = int(search.part[row])
        fresh = search.may_go(row, slot) and search.may_enter(i, int(search.slot[row]), slot, search.replicas[i])
        assert answer == fresh == search.may_step(row, slot), (row, slot, answer)
    live = [set(r) for r in search.live.lists]
    for slot, broker in enumerate(search.brokers.tolist()):
        away = [
            row
            for row in range(len(search.part))
            if broker in live[search.part[row]] and int(search.brokers[search.slot[row]]) not in live[search.part[row]]
        ]
        assert search.moved_from(slot).tolist() == away


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("capped", 4), ("rf_gt_racks", 2)])
def test_the_searchs_bookkeeping_after_many_actions_is_a_fresh_search_of_the_layout_it_reached(kind, seed):
    # loads, counts, each broker's rows and their order per role, usage, the replicas moved in and the
    # topic rule's move counts are all kept step by step (a delete and an insert where a sort cost more);
    # after a search of many swaps and leadership changes each equals what a search built afresh finds
    brokers, parts = scenario(kind, 12, 1000, seed=seed)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    search = settled_search(kind, 12, 1000, seed)
    search.batch = searches.BATCH
    for resource in search.resources:
        balance_goal(search, resource)
    assert search.actions > 20
    fresh = GoalSearch([list(r) for r in search.replicas], prepared, view, search.resources, Constraints())

    def per_slot(s: GoalSearch, slot: int) -> list[tuple[int, bool, bool]]:
        return sorted((int(s.part[r]), bool(s.lead[r]), bool(s.moved_in[r])) for r in s.rows_on(slot).tolist())

    assert np.allclose(search.load, fresh.load)
    assert search.count.tolist() == fresh.count.tolist() and search.leaders.tolist() == fresh.leaders.tolist()
    assert search.usage.count == fresh.usage.count and search.usage.disk == fresh.usage.disk
    for slot in range(len(search.brokers)):
        assert per_slot(search, slot) == per_slot(fresh, slot)
    goal, kept_orders = search._by_role  # the orders kept up to date step by step, of the goal searched last
    current = [slot for slot in kept_orders if slot in search._still_ordered(slot)]
    assert current
    for slot in current:
        for kept, built in zip(kept_orders[slot][1], fresh.by_role(goal, slot)):
            assert kept[1].tolist() == built[1].tolist()  # amounts ascending, the same
            assert sorted(search.part[kept[0]].tolist()) == sorted(fresh.part[built[0]].tolist())
            assert search.row_amount[goal][kept[0]].tolist() == kept[1].tolist()
    positive = {key: n for key, n in search.moved.counts.items() if n}
    assert positive == {key: n for key, n in fresh.moved.counts.items() if n}


def giant_beside_frozen() -> tuple[pd.DataFrame, pd.DataFrame, Constraints]:
    """Six brokers, RF 1: a 13,000-byte partition (the disk bound) on broker 1 beside three frozen ones of 250
    bytes and 15 of 10; twelve of 1,000 and 85 of 10 on the other five. Every broker holds 19 or 20."""
    brokers = brokers_frame([1, 2, 3, 4, 5, 6])
    reps = [[1]] * 4 + [[2 + i % 5] for i in range(12)] + [[1]] * 15 + [[2 + i % 5] for i in range(85)]
    topics = ["giant"] + ["frozen"] * 3 + ["medium"] * 12 + [f"tiny{i // 20}" for i in range(100)]
    parts = partitions_frame(reps, topics, [0, 0, 1, 2, *range(12), *(i % 20 for i in range(100))])
    parts["size_bytes"] = [13_000] + [250] * 3 + [1_000] * 12 + [10] * 100
    return brokers, parts, Constraints(placement=(PlacementRule("frozen", frozen=True),))


def test_a_replica_its_broker_cannot_carry_beside_frozen_ones_is_relocated_whole():
    # broker 1 keeps 750 frozen bytes, 5.8 % of the bound, so it never carries the giant within 1.05x; any
    # other broker does (with its 18 lightest replicas). No step-by-step action takes the giant there (the
    # new home would jump far above the peak first): before dominant_home the disk goal stayed at 1.069x
    # and the layout was kept. The exact solver's fewest moves: 4.
    brokers, parts, constraints = giant_beside_frozen()
    result = plan(brokers, parts, constraints=constraints)
    assert met_every_goal(result), result.notes
    planned = dict(zip(zip(result.planned["topic"], result.planned["partition"]), result.planned["replicas"]))
    assert [list(planned[("frozen", n)]) for n in range(3)] == [[1]] * 3
    assert list(planned[("giant", 0)]) != [1]
    size = dict(zip(zip(parts["topic"], parts["partition"]), parts["size_bytes"]))
    disk = {b: 0 for b in range(1, 7)}
    for key, replicas in planned.items():
        for b in replicas:
            disk[b] += size[key]
    assert max(disk.values()) <= 1.05 * 13_000  # recomputed from the plan's lists: the bound is the giant
    assert result.metrics.moves <= 1.25 * fewest_moves(brokers, parts, constraints, seconds=10).moves


def test_the_giant_is_relocated_past_dedicated_brokers_that_may_not_take_it():
    # the cluster above with eight empty brokers whose taint no topic tolerates: each has the most room, so
    # the eight homes tried were all of them, every one refused, and the giant stayed on broker 1
    brokers, parts, constraints = giant_beside_frozen()
    dedicated = list(range(7, 15))
    brokers = pd.concat([brokers, brokers_frame(dedicated)], ignore_index=True)
    constraints = replace(constraints, broker_taints={b: ("dedicated=payments",) for b in dedicated})
    result = plan(brokers, parts, constraints=constraints)
    planned = dict(zip(zip(result.planned["topic"], result.planned["partition"]), result.planned["replicas"]))
    assert list(planned[("giant", 0)]) != [1] and not set(dedicated) & {b for r in planned.values() for b in r}
    size = dict(zip(zip(parts["topic"], parts["partition"]), parts["size_bytes"]))
    disk = dict.fromkeys(range(1, 7), 0)
    for key, replicas in planned.items():
        for b in replicas:
            disk[b] += size[key]
    assert max(disk.values()) <= 1.05 * 13_000


def test_a_trial_rolled_back_leaves_the_search_as_a_fresh_search_of_the_layout_it_started_from():
    # the journal behind goals.relocated: after a trial's actions (the pinned row never among them) are
    # taken back, the layout, the replica lists' order, the bookkeeping and the action count are as before
    search = settled_search("skewed", 12, 1000, 0)
    brokers, parts = scenario("skewed", 12, 1000, seed=0)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    before, actions = [list(r) for r in search.replicas], search.actions
    k = [r.name for r in search.resources].index("bytes_out")  # a goal leadership carries: leaders change too
    pinned = int(heaviest_row(search, k, int(np.argmax(search.load[k]))))
    search.keep_journal(pinned)
    for _ in range(30):
        improve(search, k, int(np.argmax(search.load[k])))
    assert search.replicas != before and [r[0] for r in search.replicas] != [r[0] for r in before]
    assert search.actions - actions >= 10 and search.slot[pinned] == settled_search("skewed", 12, 1000, 0).slot[pinned]
    search.roll_back()
    assert search.replicas == before and search.actions == actions and not search.journaling
    fresh = GoalSearch([list(r) for r in before], prepared, view, search.resources, Constraints())
    assert np.allclose(search.load, fresh.load)
    assert search.count.tolist() == fresh.count.tolist() and search.leaders.tolist() == fresh.leaders.tolist()
    assert search.usage.count == fresh.usage.count and search.usage.disk == fresh.usage.disk
    assert search.moved_in.tolist() == fresh.moved_in.tolist()
    positive = {key: n for key, n in search.moved.counts.items() if n}
    assert positive == {key: n for key, n in fresh.moved.counts.items() if n}


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["drifted", "skewed", "rf_gt_racks", "broker_removed", "racks_633", "hot"]),
    n_parts=st.integers(10, 60),
    seed=st.integers(0, 10_000),
    rounds=st.integers(1, 12),
)
@example(kind="hot", n_parts=38, seed=332, rounds=12)
@example(kind="racks_633", n_parts=20, seed=310, rounds=6)
def test_property_a_rolled_back_trial_leaves_the_layout_and_its_bookkeeping_as_they_were(kind, n_parts, seed, rounds):
    # any actions of any goal (moves, swaps, leadership changes) taken back last first give the layout the trial
    # started from, replica order and leaders included, with the counts, loads and topic pairs it had
    search = settled_search(kind, 6, n_parts, seed)
    improve(search, 0, int(np.argmax(search.load[0])))  # the replicas a pass placed before the trial stay placed
    before, actions, placed = [list(r) for r in search.replicas], search.actions, set(search.twice)
    loads, counts, leaders = search.load.copy(), search.count.tolist(), search.leaders.tolist()
    pairs, pinned_slot = {key: n for key, n in search.moved.counts.items() if n}, int(search.slot[0])
    search.keep_journal(0)
    for n in range(rounds):
        k = n % len(search.resources)
        improve(search, k, int(np.argmax(search.load[k])))
    assert search.slot[0] == pinned_slot  # the pinned row stays
    search.roll_back()
    assert search.replicas == before and search.actions == actions and search.twice == placed
    assert np.allclose(search.load, loads) and search.count.tolist() == counts and search.leaders.tolist() == leaders
    assert {key: n for key, n in search.moved.counts.items() if n} == pairs


def heaviest_row(search: GoalSearch, k: int, slot: int) -> int:
    rows = search.rows_on(slot)
    return int(rows[np.argmax(search.amount(k, rows))])


def test_a_kept_answer_that_a_full_broker_has_no_room_ends_when_a_replica_leaves_it():
    # capped/12/1000/4, its first broker held to the replicas it has: a step onto it that every other rule
    # allows is refused for want of room, and allowed once a replica of another topic leaves it
    loose = settled_search("capped", 12, 1000, 4)
    search = settled_search("capped", 12, 1000, 4)
    broker = int(search.brokers[0])
    search.view.max_replicas[broker] = search.usage.count[broker]
    rows = [row for row in range(len(search.part)) if search.slot[row] != 0 and loose.may_step(row, 0)]
    row = rows[0]
    assert not search.may_step(row, 0)
    leaving = next(
        r
        for r in search.rows_on(0).tolist()
        if not search.lead[r] and search.topic[search.part[r]] != search.topic[search.part[row]]
    )
    onto = next(
        d for d in range(1, len(search.brokers)) if search.brokers[d] not in search.replicas[search.part[leaving]]
    )
    search.apply(((leaving, onto, False, True),))
    assert search.may_step(row, 0)


def test_a_goal_on_the_leaders_load_the_search_stops_short_of_is_met_by_annealing_the_leaders():
    # skewed/6/46/156: after the goal search bytes out stays at 1.0544x on broker 6 (threshold 1.05); five
    # leadership changes reach it (CP-SAT on the leaders alone), which no transfer, pair or chain of three does
    brokers, parts = scenario("skewed", 6, 46, seed=156)
    result = plan(brokers, parts)
    assert met_every_goal(result), result.notes
    assert result.metrics.moves <= 4  # CP-SAT's fewest: leadership costs no move
    assert result.metrics.replica_spread_after <= 1 and result.metrics.leader_spread_after <= 1
    assert_valid(brokers, parts, result.planned, Constraints())


@settings(max_examples=10, deadline=None)
@given(
    kind=st.sampled_from(["drifted", "skewed", "rf_gt_racks", "racks_633"]),
    n_parts=st.integers(10, 60),
    seed=st.integers(0, 10_000),
    steps=st.integers(1, 3_000),
)
@example(kind="skewed", n_parts=46, seed=156, steps=2_000)
def test_property_the_walk_draws_each_steps_broker_among_its_partitions_replicas(kind, n_parts, seed, steps):
    # the walk draws every step's broker up front with numpy: the same brokers as the per-step formula it replaced
    brokers, parts = scenario(kind, 6, n_parts, seed=seed)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    resources = _resources(prepared, prepared_brokers, view)
    search = GoalSearch([list(r) for r in prepared["current"]], prepared, view, resources, Constraints())
    walk = _Walk(search, [k for k, r in enumerate(resources) if not np.array_equal(r.leader, r.follower)])
    assume(walk.parts)
    rng = np.random.default_rng(seed)
    picks, to = rng.integers(0, len(walk.parts), steps).tolist(), rng.random(steps)
    expected = [walk.row_slots[n][int(t * len(walk.row_slots[n]))] for n, t in zip(picks, to.tolist())]
    assert walk._drawn_brokers(picks, to) == expected


@settings(max_examples=20, deadline=None)
@given(
    kind=st.sampled_from(["drifted", "skewed", "rf_gt_racks", "broker_added", "racks_633"]),
    n_parts=st.integers(10, 60),
    seed=st.integers(0, 10_000),
)
@example(kind="skewed", n_parts=46, seed=156)
@example(kind="racks_633", n_parts=20, seed=5)  # racks of 4/1/1 force the goals: kept for a lower peak
def test_property_annealing_the_leaders_moves_no_data_and_never_meets_fewer_goals(kind, n_parts, seed):
    brokers, parts = scenario(kind, 6, n_parts, seed=seed)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    resources = _resources(prepared, prepared_brokers, view)
    replicas = [list(r) for r in prepared["current"]]
    search = GoalSearch(replicas, prepared, view, resources, Constraints())
    met, counts = search.goals_met(), search.leaders.copy()
    peaks = [float(search.load[k].max()) for k in range(len(resources))]
    in_band = [search.band(b, 1)[0] <= c <= search.band(b, 1)[1] for b, c in enumerate(counts)]
    changed = anneal_leaders(search)
    assert [sorted(r) for r in search.replicas] == [sorted(r) for r in prepared["current"]]
    # bytes out per broker from the replica lists alone, leaders first (independent of the search's bookkeeping)
    out = np.zeros(len(view.eligible))
    for r, amount in zip(search.replicas, prepared["bytes_out"]):
        out[view.eligible.index(r[0])] += amount
    k = next(k for k, r in enumerate(resources) if r.name == "bytes_out")
    assert np.allclose(out / resources[k].capacity, search.load[k])  # per unit of capacity
    leaders = np.bincount([view.eligible.index(r[0]) for r in search.replicas], minlength=len(view.eligible))
    assert np.array_equal(leaders, search.leaders)
    if not changed:
        assert search.goals_met() == met and (search.leaders == counts).all()
    elif search.goals_met() == met:  # only where the racks force a goal: the first goal whose peak moved is lower
        assert any(search.forced(k) for k in range(len(resources)))
        moved = [(k, peak) for k, peak in enumerate(peaks) if abs(float(search.load[k].max()) - peak) > 1e-9 * peak]
        assert moved and float(search.load[moved[0][0]].max()) < moved[0][1] and not met[moved[0][0]]
    else:
        assert search.goals_met() > met
    for b, was in enumerate(in_band):
        low, high = search.band(b, 1)
        assert not was or low <= search.leaders[b] <= high


def test_a_small_clusters_plan_is_rebuilt_around_parts_of_itself_while_that_moves_fewer():
    # rf_gt_racks/6/26/169: the best greedy start meets every goal with 7 moves (12 before the count orders
    # and the annealing); putting back one or two moved partitions and searching again finds 6 (CP-SAT: 5)
    brokers, parts = scenario("rf_gt_racks", 6, 26, seed=169)
    result = plan(brokers, parts)
    assert met_every_goal(result), result.notes
    assert result.metrics.moves <= 6
    assert result.metrics.replica_spread_after <= 1 and result.metrics.leader_spread_after <= 1
    assert_valid(brokers, parts, result.planned, Constraints())
    assert back_and_forth(parts, result.planned) == []


def test_donations_take_the_load_off_the_heaviest_old_broker_and_land_only_on_new_ones():
    # broker 1 carries a hot partition, broker 2 cold ones, broker 3 is new: each old broker gives one replica
    brokers = prepare_brokers(brokers_frame([1, 2, 3], ["a", "a", "a"]), Constraints())
    view = ClusterView.from_brokers(brokers, Constraints())
    live = [[1], [1], [1], [1], [2], [2], [2], [2]]
    load = np.array([10.0, 1, 1, 1, 1, 1, 1, 1])
    sizes = np.zeros(len(live), dtype=np.int64)
    resource = Resource("disk", load, load, np.ones(3))
    given = donate(live, view, frozenset({3}), (load, load), resource.capacity, Usage(live, sizes, view))
    assert given == [[3], [1], [1], [1], [3], [2], [2], [2]]  # the hot one, and one cold one from broker 2


@pytest.mark.parametrize(
    "racks, falls_short", [(["a", "b", "c", "a", "b", "c", "a"], True), (["a", "b", "c"] * 3, False)]
)
def test_a_scale_out_the_racks_cannot_take_is_given_up_before_donating_as_donating_would(
    racks, falls_short, monkeypatch
):
    # RF 3 over 3 racks pins each rack's total, so a donation stays in its rack. Old brokers 1-6, two per rack,
    # 15 replicas each: with one new broker, in rack a (the first case), racks b and c must give while nothing
    # there may take, and donate() answers None before donating; let run (the check stubbed out) it answers
    # None too. With a new broker in every rack (the second) it donates, the same either way
    ids = list(range(1, len(racks) + 1))
    view = ClusterView.from_brokers(prepare_brokers(brokers_frame(ids, racks), Constraints()), Constraints())
    live = [[1 + 3 * (i % 2), 2 + 3 * (i % 2), 3 + 3 * (i % 2)] for i in range(30)]
    sizes, load = np.zeros(len(live), dtype=np.int64), np.arange(1.0, 31.0)
    new = frozenset(b for b in ids if b > 6)
    answers = []
    checked = donate_module._racks_fall_short
    monkeypatch.setattr(donate_module, "_racks_fall_short", lambda *a: answers.append(checked(*a)) or answers[-1])
    given = donate(live, view, new, (load, load), np.ones(len(ids)), Usage(live, sizes, view))
    monkeypatch.setattr(donate_module, "_racks_fall_short", lambda *a: False)
    let_run = donate(live, view, new, (load, load), np.ones(len(ids)), Usage(live, sizes, view))
    assert answers == [falls_short]
    assert given == let_run
    assert (given is None) == falls_short
    if given is not None:
        assert all(set(now) - set(was) <= new for now, was in zip(given, live))


def test_a_rack_falls_short_when_its_old_brokers_give_more_than_its_new_ones_take_and_only_where_racks_are_pinned():
    # racks a (brokers 1, 4, 7), b (2, 5), c (3, 6): what rack a's old brokers give against what broker 7
    # takes, at the boundary; a broker below its share gives nothing (not a negative amount), and where a
    # partition does not span every rack (RF 2 of 3) a donation may change racks: never short
    view = ClusterView.from_brokers(
        prepare_brokers(brokers_frame(list(range(1, 8)), ["a", "b", "c", "a", "b", "c", "a"]), Constraints()),
        Constraints(),
    )
    spans = [[1, 2, 3], [4, 5, 6]]
    others = {2: 0, 3: 0, 5: 0, 6: 0}
    short = donate_module._racks_fall_short
    assert not short(spans, view, {1: 2, 4: 1, **others}, {7: 3})
    assert short(spans, view, {1: 2, 4: 2, **others}, {7: 3})
    assert short(spans, view, {1: 4, 4: -1, **others}, {7: 3})
    assert short(spans, view, {1: 1, 4: 0, 2: 1, 3: 0, 5: 0, 6: 0}, {7: 5})  # rack b gives, nothing there takes
    assert not short([[1, 2], [4, 5]], view, {1: 2, 4: 2, **others}, {7: 3})


def landed_on_old_brokers(kind: str, seed: int) -> list[str]:
    """Plan a 6-broker cluster, execute it, add 3 empty brokers (one per rack) and plan again: which partitions
    does the second plan move onto an old broker? (Its plan must be valid, and a goal it leaves unmet named.)"""
    brokers, parts = scenario(kind, 6, 50, seed=seed)
    first = plan(brokers, parts)
    live = executed(parts, first.planned)[parts.columns]
    grown = brokers_frame([*brokers["broker_id"], 7, 8, 9], [*brokers["rack"], "r0", "r1", "r2"])
    again = plan(grown, live)
    assert again.status == COMMITTED, again.error
    assert_valid(grown, live, again.planned, Constraints())
    assert again.metrics.replica_spread_after <= 1, again.metrics
    if not met_every_goal(again):
        assert any(n.startswith("scale-out: replicas move only onto the new brokers 7, 8, 9") for n in again.notes)
    before = {(t, p): set(r) for t, p, r in zip(live["topic"], live["partition"], live["replicas"])}
    return [
        f"{t}:{p}"
        for t, p, r in zip(*(again.planned[c] for c in ("topic", "partition", "replicas")))
        if set(r) - before[(t, p)] - {7, 8, 9}
    ]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["skewed", "drifted"]))
@example(seed=4, kind="skewed")  # examples earlier strict xfails pinned, and the last ones that traded
@example(seed=5, kind="drifted")
@example(seed=10, kind="skewed")
@example(seed=21, kind="drifted")
@example(seed=34, kind="skewed")
@example(seed=35, kind="drifted")
def test_property_adding_empty_brokers_moves_replicas_only_onto_them(seed, kind):
    """Issue 12's scale-out property (Cruise Control's add_broker): a cluster planned, executed and then given
    three empty brokers is planned with replicas moving only onto the new brokers (leaders may change), even
    where that leaves a load goal unmet (the notes say so)."""
    assert landed_on_old_brokers(kind, seed) == []


def test_issue_38_forced_racks_hold_disk_and_bytes_in_to_their_ratio_of_the_rack_floor():
    # racks of 5:4:4 and 6:3:3 brokers, and a dead broker leaving its rack short: the rack floor puts disk and
    # bytes in out of reach of 1.05x their bounds; each is held to 1.05x its floor instead, and met there
    # (the notes give the floor and the held threshold)
    for kind, n_brokers, n_parts, seed in [
        ("racks_544", 13, 20, 300),
        ("racks_633", 12, 26, 312),
        ("broker_removed", 9, 28, 321),
        ("racks_544", 7, 24, 351),  # disk 1.288x against 1.225x held, until rack mates could trade replicas
    ]:
        result = plan(*scenario(kind, n_brokers, n_parts, seed=seed))
        for goal in ("disk", "bytes_in"):
            note = next(n for n in result.notes if n.startswith(f"{goal} goal out of reach"))
            assert "; held to 1.05x that (" in note and "goal not met" not in note, note
            floor = float(note.split(" the lower bound per unit of capacity")[0].rsplit(", ", 1)[1].rstrip("x"))
            ratio = result.metrics.disk_ratio_after if goal == "disk" else result.metrics.bytes_in_ratio_after
            assert floor > 1.05 and ratio <= 1.05 * floor * (1 + 1e-3), (kind, goal, ratio, floor)


def test_a_rack_forced_above_the_bands_lets_its_brokers_trade_a_replica_up_to_the_held_ceiling():
    # racks of 3, 2 and 2 brokers, every partition over all three: each broker of a 2-broker rack holds 12 of
    # the 72 replicas (bands 10-11), as far above its band as the racks force; passing one replica to a rack
    # mate (13 and 11) leaves the counts as far outside their bands in all, so it may; a third rack's broker
    # is held to its band, and so is a broker of a rack the rule does not force
    search = settled_search("racks_544", 7, 24, 351)
    small = [b for b in range(len(search.brokers)) if search.racks[search.rack_of[b]] == "r1"]
    big = [b for b in range(len(search.brokers)) if search.racks[search.rack_of[b]] == "r0"]
    assert [int(search.count[b]) for b in small] == [12, 12] and search.band(small[0], 0) == (10, 11)
    assert [search.ceiling(b, 0) for b in small] == [13, 13]
    assert all(search.ceiling(b, 0) == search.band(b, 0)[1] for b in big)
    assert search.count_ok(search.count, 0, small[0], -1) and search.count_ok(search.count, 0, small[1], +1)
    assert not search.count_ok(search.count, 0, small[1], +2)
    assert all(search.ceiling(b, 1) == search.band(b, 1)[1] for b in range(len(search.brokers)))  # leaders
    even = settled_search("drifted", 9, 30, 340)
    assert all(even.ceiling(b, 0) == even.band(b, 0)[1] for b in range(len(even.brokers)))


def test_issue_38_hot_partitions_and_drifted_clusters_against_the_exact_solver():
    """Drifted clusters scaled down from 30 brokers: the solver proves every threshold reachable, and balanced
    meets them all with moves near the optimum. Hot partitions (2-5% at 20-50x the median rate): the solver
    proves the thresholds out of reach, and each load goal is within 5% of the best the solver reaches goal by
    goal in priority order under the same rules (:func:`oracle.best_loads`, 4 s a solve): hot/6/30/330, disk
    1.02x, the rest within 1.0x (1.07x on disk before plans missing the same goals were ranked by how far they
    miss them, :func:`searches._rank`). Measured by hand (17 s to solve, not run here): hot/6/42/333 disk 1.04x,
    the rest within 1.01x (disk 1.24x before: the rebuilds had traded disk 1.26x for 1.50x to save moves)."""
    for kind, n_brokers, n_parts, seed in [("drifted", 9, 30, 340), ("drifted", 9, 36, 342)]:
        brokers, parts = scenario(kind, n_brokers, n_parts, seed=seed)
        result, optimum = plan(brokers, parts), fewest_moves(brokers, parts, seconds=5)
        assert optimum.status == "optimal" and met_every_goal(result), (kind, seed, result.notes)
        assert optimum.moves <= result.metrics.moves <= 1.25 * optimum.moves
    brokers, parts = scenario("hot", 6, 30, seed=330)
    assert fewest_moves(brokers, parts, seconds=5).status == "infeasible"
    m, best = plan(brokers, parts).metrics, best_loads(brokers, parts, seconds=4)
    assert best is not None
    mine = [m.disk_ratio_after, m.bytes_in_ratio_after, m.bytes_out_ratio_after, m.max_load_after / m.load_lower_bound]
    gaps = {goal: have / solver for goal, have, solver in zip(("disk", "bytes_in", "bytes_out", "load"), mine, best)}
    print("\nhot/6/30/330, plan / solver's best per goal:", {k: round(float(v), 3) for k, v in gaps.items()})
    assert max(gaps.values()) <= 1.05


@pytest.mark.parametrize(
    "kind, n_brokers, seed",
    [("racks_544", 8, 304), ("broker_removed", 8, 300), ("broker_removed", 9, 300), ("uneven_racks", 8, 1)],
)
def test_the_racks_lead_what_bytes_out_held_on_the_others_leaves_them_and_the_load_is_held_to_that(
    kind, n_brokers, seed
):
    # with bytes out met and kept within its threshold, the large racks can lead only so much: the small ones
    # lead the rest, which puts the combined load's reachable bound above what the rack rule and the leader
    # counts alone force (GoalSearch.rack_floor's held goals). It is a lower bound: the linear relaxation of
    # what it assumes (oracle.relaxed_least_peak) reaches no lower, and here no higher either. The plan is
    # held to 1.05x it, and the note says why
    brokers, parts = scenario(kind, n_brokers, 30, seed=seed)
    result = plan(brokers, parts)
    c = Constraints()
    b, p = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(b, c)
    search = GoalSearch([list(r) for r in result.planned["replicas"]], p, view, _resources(p, b, view), c)
    load = search.resources[3]
    assert load.name == "load" and search.met(2)  # bytes out, the goal it is held by
    racks_alone = search.rack_floor(load.follower, load.capacity, load.leader).floor
    held = search.floors[3]
    assert held.held_by == "bytes_out" and held.floor > racks_alone * 1.02, (held, racks_alone)
    relaxed = relaxed_least_peak(brokers, parts, "load")
    assert held.floor / search.bounds[3] == pytest.approx(relaxed, rel=1e-6)
    assert search.met(3) and search.ratio(3) <= 1.05 * held.floor / search.bounds[3] * (1 + 1e-9)
    note = next(n for n in result.notes if n.startswith("load goal out of reach"))
    assert "cannot while keeping bytes_out within its threshold" in note and "; held to 1.05x that (" in note, note


def test_a_held_goal_with_followers_leaves_the_other_racks_only_the_room_above_their_forced_followers():
    # leader bytes in held by the combined load, which followers carry too: the racks outside the set hold a
    # replica of each partition whatever leads, so only the room above those followers' load is theirs to lead
    # with; the floor is again the linear relaxation's optimum (racks of 3, 2 and 2 brokers, RF 3)
    brokers, parts = scenario("racks_633", 7, 30, seed=300)
    result = plan(brokers, parts)
    c = Constraints()
    b, p = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(b, c)
    search = GoalSearch([list(r) for r in result.planned["replicas"]], p, view, _resources(p, b, view), c)
    assert search.met(2) and search.met(3) and search.floors[4].held_by == "load"
    floor = search.floors[4].floor / search.bounds[4]
    assert floor > 1.0 and floor == pytest.approx(relaxed_least_peak(brokers, parts, "leader_bytes_in"), rel=1e-6)


RULES_ON_7 = Constraints(
    broker_tags={b: {"tier": "ssd" if b % 2 else "hdd"} for b in range(1, 8)},
    broker_taints={7: ("dedicated=x",)},
    placement=(PlacementRule("t00[0-1]", require_tags={"tier": "ssd"}), PlacementRule("t00[2-3]", frozen=True)),
)


@pytest.mark.parametrize("c", [Constraints(), RULES_ON_7], ids=["held goals", "placement rules"])
def test_searches_of_one_plan_share_the_floors_and_get_those_a_search_of_their_own_would_find(c):
    # the floors the rules force are worked out once per plan's inputs and kept on the view
    # (ClusterView.derived): a later search of the same inputs, on another layout whose met goals hold others,
    # gets the floors and reachable bounds a search on a view of its own finds (racks of 3/2/2: the plan's
    # load held by bytes out; with placement rules, a broker set, a frozen topic and a taint confine load)
    brokers, parts = scenario("racks_633", 7, 30, seed=300)
    result = plan(brokers, parts, constraints=c)
    b, p = prepare_brokers(brokers, c), prepare_partitions(parts, c)

    def search_of(replicas: list[list[int]], view: ClusterView, resources: list[Resource]) -> GoalSearch:
        search = GoalSearch([list(r) for r in replicas], p, view, resources, c)
        for k in range(len(resources)):
            search.hold_earlier_goals(k)
        return search

    shared = ClusterView.from_brokers(b, c)
    resources = _resources(p, b, shared)
    planned = result.planned["replicas"].tolist()
    # first the plan with partition 2 led from its next replica (bytes out still met, the load not: the
    # leader goal held by fewer goals), then the plan, on the same view: what the first works out is kept
    search_of([*planned[:2], [*planned[2][1:], planned[2][0]], *planned[3:]], shared, resources)
    kept = search_of(planned, shared, resources)
    fresh_view = ClusterView.from_brokers(b, c)
    fresh = search_of(planned, fresh_view, _resources(p, b, fresh_view))
    assert len(shared.memo["floors"]) == 1 and kept.placement is shared.memo["placement"][0][1]
    if c.placement:
        assert max(f for _, f in fresh.placement_floors) > 0
    else:
        assert any(f.held_by for f in fresh.floors)
    assert kept.floors == fresh.floors and kept.placement_floors == fresh.placement_floors
    assert kept.reachable == fresh.reachable and kept.goals_met() == fresh.goals_met()


def test_a_small_clusters_search_repeated_from_the_same_start_is_the_first_ones_result():
    # a small cluster's plan searches some starts twice (two count orders that settle alike restart from the
    # same plan, as executed): reach_goals keeps each search on the view and a repeat, from an equal start with
    # the same goals and modes, gets the layout and notes the first reached, which a search on a view of its
    # own reaches too; another start or other goals are searched. hot/6/42/333: a goal stays unmet
    brokers, parts = scenario("hot", 6, 42, seed=333)
    c = Constraints()
    b, p = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(b, c)
    resources = _resources(p, b, view)
    start = keep_valid_each([list(r) for r in p["preferred"]], p["rf"].tolist(), view, True)
    settle(start, p, view, since=p["current"].tolist(), take_first=p["size_bytes"].to_numpy())

    def searched(on: ClusterView, goals: list[Resource], frame: pd.DataFrame = p) -> tuple:
        replicas = [list(r) for r in start]
        rows = replicas[:3]  # the lists the caller holds: a repeat changes them in place, as a search does
        reached = searches.reach_goals(replicas, frame, on, goals, c)
        assert all(a is b for a, b in zip(rows, replicas[:3]))
        return replicas, reached

    first = searched(view, resources)
    assert not all(first[1][1]) and first[0] != start  # a goal unmet, the layout changed
    assert searched(view, resources) == first and len(view.memo["searches"][0][1]) == 1
    fresh_view = ClusterView.from_brokers(b, c)
    assert searched(fresh_view, _resources(p, b, fresh_view)) == first
    searched(view, resources[1:])
    assert len(view.memo["searches"][0][1]) == 2  # other goals: searched, and kept apart
    # the plan as executed: one frame per layout, so its searches are found again too
    executed = searches._as_executed(p, first[0], view)
    assert searches._as_executed(p, [list(r) for r in first[0]], view) is executed
    assert executed["current"].tolist() == first[0] and p["current"].tolist() != first[0]


def test_a_small_rack_holding_a_hot_replica_splits_its_replicas_where_a_goal_stays_missed():
    # hot/8/38/332: racks of 3, 3 and 2 brokers, 38 partitions of 3 topics, one of 9.8 MB (the rest under
    # 0.8 MB). Each broker of the 2-broker rack holds 19 replicas whatever the plan (bands 14-15); held to one
    # above that, the one holding the hot replica could only swap with its rack mate, and the topic rule closed
    # most swaps: disk 1.573x the bound. Split apart as far as leaves its mate at the band's top (the exact
    # solver's count goal: 16 outside the bands in all either way, the racks' minimum: 38 - 2 x 15 above in
    # the small rack, 6 x 14 - 76 below in the others), it passes small replicas on: 1.425x (the solver, 2 s a
    # goal: 1.381x; docs/balanced.md)
    brokers, parts = scenario("hot", 8, 38, seed=332)
    result = plan(brokers, parts)
    c = Constraints()
    view = ClusterView.from_brokers(prepare_brokers(brokers, c), c)
    planned = [list(r) for r in result.planned["replicas"]]
    small_rack = [b for b in view.eligible if view.domain_of[b] == "r2"]
    held = [sum(b in r for r in planned) for b in small_rack]
    assert sum(held) == 38 and max(held) > 20, held  # beyond the held ceiling of one above the share
    assert counts_outside_bands(planned, view, c) == 16
    assert result.metrics.disk_ratio_after <= 1.45, result.metrics.disk_ratio_after


def test_issue_38_forced_racks_within_5_percent_of_the_solvers_best():
    """Racks of 4/2/2 brokers (6:3:3 scaled to 8): the rack rule puts every threshold out of reach (the solver
    proves it), and each load goal ends within 5% of the best the solver reaches goal by goal under the same
    rules (:func:`oracle.best_loads`, 2 s a solve; a time-limited solve can only flatter the plan, never wrong
    it). Today: disk 1.00x, bytes in 0.98x, bytes out 0.98x, load 1.02x.

    Measured by hand with 5 s a solve (20-50 s each, not run here; docs/balanced.md has the table): racks 3/2/2
    (seeds 350-353) within 1.010x (seed 351 disk 1.052x before rack mates could trade a replica); 5:4:4 at 13
    brokers, seed 302 within 1.0x (bytes out 1.07x before), seed 300 within 1.042x (load 1.079x before the peak
    rules of forced racks); 6:3:3 at 12 brokers (seed 310) load 1.059x: issue 38 stays open on it; broker removed
    from 9 within 1.013x."""
    brokers, parts = scenario("racks_633", 8, 20, seed=352)
    assert fewest_moves(brokers, parts, seconds=5).status == "infeasible"
    m, best = plan(brokers, parts).metrics, best_loads(brokers, parts, seconds=2)
    assert best is not None and len(best) >= 2
    mine = [m.disk_ratio_after, m.bytes_in_ratio_after, m.bytes_out_ratio_after, m.max_load_after / m.load_lower_bound]
    gaps = [have / solver for have, solver in zip(mine, best)]
    print("\nracks 4/2/2, plan / solver's best per goal:", [round(float(g), 3) for g in gaps])
    assert max(gaps) <= 1.05


def goals_passed(kind: str, n_brokers: int, seed: int, rules: bool):
    """A search of a 1,000-partition scenario after one pass of the goals (undos left to find), with its
    placement rules: with ``rules`` a broker set, a tainted broker and a frozen group (undos of forced repairs
    are many), else none and the load held to its floor itself (load_ratio 1.0)."""
    brokers, parts = scenario(kind, n_brokers, 1000, seed=seed)
    constraints = (
        Constraints(
            broker_tags={b: {"tier": "ssd" if b % 2 else "hdd"} for b in range(1, n_brokers + 1)},
            broker_taints={n_brokers: ("dedicated=payments",)},
            placement=(
                PlacementRule("t00[0-4]", require_tags={"tier": "ssd"}, tolerations=("dedicated",)),
                PlacementRule("t05[0-9]", frozen=True),
            ),
        )
        if rules
        else Constraints(balanced_load_ratio=1.0)
    )
    prepared_brokers, prepared = prepare_brokers(brokers, constraints), prepare_partitions(parts, constraints)
    view = ClusterView.from_brokers(prepared_brokers, constraints)
    placement = resolve_placement(constraints, prepared, view)
    replicas = keep_valid_each([list(r) for r in prepared["preferred"]], prepared["rf"].tolist(), view, True)
    if placement is not None:
        enforce_placement(replicas, prepared, view, placement)
    settle(replicas, prepared, view, since=prepared["current"].tolist(), placement=placement)
    search = GoalSearch(replicas, prepared, view, _resources(prepared, prepared_brokers, view), constraints)
    search.batch = searches.BATCH
    for resource in search.resources:
        balance_goal(search, resource)
    return search, placement


@pytest.mark.parametrize(
    "kind, n_brokers, seed, rules",
    # with rules: pairs whose leader counts alone refuse them, pairs that pass them with one leading; without
    # (uneven racks whose load is held to the floor itself, load_ratio 1.0: at 1.05x of what bytes out leaves
    # reachable the goal pass leaves no undo there)
    [("broker_added", 12, 7, True), ("skewed", 16, 6, True), ("uneven_racks", 16, 1, False)],
)
def test_the_pair_undos_prefilter_answers_as_harmless_checks_loads_rules_and_leader_counts(
    kind, n_brokers, seed, rules
):
    # undo.PairLoads answers for all pairs at once what GoalSearch.harmless refuses most pairs on, so the pair
    # undos ask harmless only of the rest: checked pair by pair against those checks stated one at a time
    # (every goal's load after both steps within its limit, both moves allowed by the placement rules, the
    # leader counts in their bands), after a goal pass on a cluster with placement rules (a broker set, a
    # tainted broker, a frozen group: undos of forced repairs are many) and on one without
    search, placement = goals_passed(kind, n_brokers, seed, rules)

    def passes(change) -> bool:
        limits = search.goal_limits()
        if any(v > limit for after, limit in zip(search.loads_after(change), limits) for v in after.values()):
            return False
        if placement is not None and not all(
            placement.may_move(int(search.part[row]), int(search.brokers[slot])) for row, slot, _, _ in change
        ):
            return False
        (u_row, u_slot, _, _), (o_row, _, _, _) = change
        if search.lead[u_row] == search.lead[o_row]:
            return True
        gives = int(search.slot[u_row]) if search.lead[u_row] else u_slot  # the slot that loses a leader
        takes = u_slot if search.lead[u_row] else int(search.slot[u_row])
        return search.count_ok(search.leaders, 1, gives, -1) and search.count_ok(search.leaders, 1, takes, +1)

    groups = pair_groups(search)
    loads = PairLoads(search, groups)
    answers = []
    for n, (_, undos, opposite) in enumerate(groups):
        for u, (_, undo) in enumerate(undos):
            fits = loads.fits(n, u)
            assert fits is not None  # nothing applied: every answer still known
            for o, (_, second) in enumerate(opposite):
                assert bool(fits[o]) == passes((undo, second)), (undo, second)
                answers.append(bool(fits[o]))
    assert len(answers) >= 20 and not all(answers), len(answers)


@pytest.mark.parametrize(
    "kind, n_brokers, seed, rules",
    # with rules (undos of forced repairs, refused by them) and without (drifted: ~1,500 refused on the racks and
    # the leader counts, and the two of a needless swap that pass them: their count bands refuse them alone)
    [("broker_added", 12, 7, True), ("skewed", 16, 6, True), ("drifted", 12, 3, False)],
)
def test_the_single_undos_prefilter_refuses_only_what_harmless_refuses(kind, n_brokers, seed, rules):
    # undo.undos_refused answers for all single undos at once the checks GoalSearch.harmless refuses most of
    # them on, so the single undos ask harmless only of the rest: checked undo by undo against those checks
    # stated one at a time (every goal's load on both brokers within its limit, the leader counts in their
    # bands, the rack rule on the replica list, the placement rules), and each one it refuses harmless refuses
    search, placement = goals_passed(kind, n_brokers, seed, rules)
    if not rules:
        needless_swap(search)
    rows = moved_rows(search)
    homes = home_slots(search, rows)
    rows, homes = rows[homes >= 0], homes[homes >= 0]
    refused = undos_refused(search, rows, homes)
    view, limits = search.view, search.goal_limits()

    def passes(step) -> bool:
        row, home, lead, _ = step
        if any(v > limit for after, limit in zip(search.loads_after((step,)), limits) for v in after.values()):
            return False
        there = int(search.slot[row])
        if lead and not (search.count_ok(search.leaders, 1, there, -1) and search.count_ok(search.leaders, 1, home, 1)):
            return False
        i, new = int(search.part[row]), int(search.brokers[home])
        after = [new if b == int(search.brokers[there]) else b for b in search.replicas[i]]
        if len({view.domain_of[b] for b in after}) < view.required_domains(len(after)):
            return False
        return placement is None or placement.may_move(i, new)

    answers = []
    for row, home, no in zip(rows.tolist(), homes.tolist(), refused.tolist()):
        step = undo_step(search, row)
        assert step is not None and step[1] == home  # home_slots names where undo_step sends it
        assert no == (not passes(step)), step
        if no:
            assert not search.harmless((step,))
        answers.append(no)
    assert len(answers) >= 20 and any(answers) and not all(answers), (len(answers), sum(answers))


def test_the_pair_undos_prefilter_keeps_the_pair_a_needless_swap_leaves():
    # the other side of undo.PairLoads: a swap nothing needs (test above) is a pair harmless() accepts, and
    # the prefilter keeps it
    search = search_at("drifted", 12, 1000, 3)
    p, q = needless_swap(search)
    groups = pair_groups(search)
    loads = PairLoads(search, groups)
    (n, (_, undos, opposite)) = next((n, g) for n, g in enumerate(groups) if p in dict(g[1]) or p in dict(g[2]))
    if p not in dict(undos):
        p, q = q, p
    u, o = [row for row, _ in undos].index(p), [row for row, _ in opposite].index(q)
    assert search.harmless((undos[u][1], opposite[o][1]))
    fits = loads.fits(n, u)
    assert fits is not None and fits[o]


@settings(max_examples=15, deadline=None)
@given(
    kind=st.sampled_from(["drifted", "skewed", "rf_gt_racks", "broker_removed", "racks_633", "hot"]),
    n_brokers=st.integers(6, 10),
    n_parts=st.integers(30, 70),
    seed=st.integers(0, 10_000),
)
@example(kind="skewed", n_brokers=9, n_parts=60, seed=3)  # a goal round raises a later goal's limit between passes
@example(kind="hot", n_brokers=9, n_parts=60, seed=3)  # later passes undo 2 each after the first's 4
def test_property_a_later_undo_pass_undoes_what_a_pass_asking_every_moved_replica_undoes(
    kind, n_brokers, n_parts, seed
):
    # an undo pass after the search's first asks again only what may pass now (undo._asked_again): with goal
    # rounds between the passes, the same undos as a copy of the search whose passes ask every moved replica
    kept, full = settled_search(kind, n_brokers, n_parts, seed), settled_search(kind, n_brokers, n_parts, seed)
    for search in (kept, full):
        search.batch = 1
        for resource in search.resources:
            balance_goal(search, resource)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        full.undo_marks.clear()  # no pass before this one: it asks everything
        assert undo_needless_moves(kept) == undo_needless_moves(full)
        assert kept.replicas == full.replicas
        k = int(rng.integers(len(kept.resources)))
        for search in (kept, full):
            search.new_pass()
            improve(search, k, int(np.argmax(search.load[k])))


def _mark(search: GoalSearch) -> UndoMark:
    """Where an undo pass would start now, as undo._started marks it, its pair groups included."""
    _, groups = undo_module._pair_groups(search, None)
    return UndoMark(search.version.copy(), search.steps, search.goal_limits(), groups)


def _row_on(search: GoalSearch, i: int, broker: int) -> int:
    rows = range(search.first_row[i], search.first_row[i + 1])
    return next(r for r in rows if search.brokers[search.slot[r]] == broker)


def _move(search: GoalSearch, i: int, old: int, new: int) -> int:
    """Partition ``i``'s replica on broker ``old`` onto ``new``, its role kept; its row."""
    row = _row_on(search, i, old)
    search.apply(((row, search.slot_of(new), bool(search.lead[row]), True),))
    return row


def test_an_undo_is_asked_again_where_its_broker_its_home_or_its_partition_changed_and_nowhere_else():
    # what GoalSearch.harmless reads of an undo: the loads and counts of the broker it leaves and of its home,
    # its partition's replicas (the rack rule, the rules), the goals' limits; a later pass asks again only
    # where one of those changed since the last pass began (a change elsewhere leaves its answer as it was)
    search = search_at("drifted", 12, 1000, 3)  # nothing moved yet
    reps, brokers = search.replicas, [int(b) for b in search.brokers]
    # a follower on its partition's lowest broker moves off: its way back is that broker (its home)
    i = next(i for i, r in enumerate(reps) if min(r) != r[0] and len(r) == 3)
    home = min(reps[i])
    there = next(b for b in brokers if b not in reps[i])
    row = _move(search, i, home, there)

    def asked(since: UndoMark) -> bool:
        rows = np.array([row])
        assert home_slots(search, rows).tolist() == [search.slot_of(home)]
        return bool(undo_module._asked_again(search, since, rows, home_slots(search, rows))[0])

    def apart(*avoid: int) -> int:
        return next(j for j in range(len(reps)) if j != i and not set(reps[j]) & set(avoid))

    since = _mark(search)
    assert not asked(since)
    j = apart(there, home)
    _move(search, j, reps[j][1], next(b for b in brokers if b not in reps[j] and b not in (there, home)))
    assert not asked(since)  # elsewhere
    since = _mark(search)
    other = next(b for b in reps[i] if b > home and b != there)  # above its home: the way back stays
    _move(search, i, other, next(b for b in brokers if b not in reps[i] and b not in (there, home, other)))
    assert asked(since)  # its partition
    since = _mark(search)
    k = next(j for j in range(len(reps)) if j != i and home in reps[j] and there not in reps[j])
    _move(search, k, home, next(b for b in brokers if b not in reps[k] and b != there))
    assert asked(since)  # its home
    since = _mark(search)
    m = apart(there, home)
    _move(search, m, reps[m][1], there)
    assert asked(since)  # its broker


def test_a_pair_group_a_changed_replica_left_is_asked_again():
    # brokers a and b, two undos from a to b and one from b to a: a group. A third undo from a to b leaves it
    # when its partition frees a lower live broker (its way back goes there): neither broker of the group nor
    # a partition in it changed, but its pairs, the first PAIR_TRIES each way, may be others, so it is asked
    search = search_at("drifted", 12, 1000, 3)
    reps = search.replicas
    b = int(search.brokers[len(search.brokers) // 2])
    j = next(j for j, r in enumerate(reps) if b in r[1:] and min(r) < b)  # w's partition: a lower live broker
    a = next(int(x) for x in search.brokers if int(x) not in reps[j])
    u = next(u for u, r in enumerate(reps) if u != j and b in r and a not in r)
    o = next(o for o, r in enumerate(reps) if o not in (j, u) and a in r and b not in r)
    low = min(reps[j])
    _move(search, j, b, a)
    _move(search, u, b, a)
    _move(search, o, a, b)
    key = (min(search.slot_of(a), search.slot_of(b)), max(search.slot_of(a), search.slot_of(b)))
    assert [g[0] for g in pair_groups(search)] == [key]
    since = _mark(search)
    _move(search, j, low, next(int(x) for x in search.brokers if int(x) not in reps[j] and int(x) not in (a, b)))
    groups, _ = undo_module._pair_groups(search, since)
    assert [g[0] for g in groups] == [key]  # asked again: u and o's pair
    assert {row for row, _ in groups[0][1] + groups[0][2]} == {_row_on(search, u, a), _row_on(search, o, b)}
