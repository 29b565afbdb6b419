"""Rules applied on top of every strategy: leadership, move budget, per-core placement, load weights."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assigners import COMMITTED, FAILED, SKIPPED, STRATEGIES, Constraints, PlanRequest, plan_cluster
from assigners.balance import _TopicRule
from assigners.errors import CapacityExhaustedError, InsufficientBrokersError
from assigners.model import (
    CORE0_RESERVE,
    ClusterView,
    LoadWeights,
    argsort_small,
    prepare_brokers,
    prepare_partitions,
    replica_matrix,
)
from assigners.placement import (
    Usage,
    _fewest_choices_first,
    first_legal,
    keep_valid,
    keep_valid_each,
    may_replace,
    may_replace_with,
    pop_legal,
    topic_move_counts,
    topic_moves,
)
from tests.unit.clusters import assert_valid, brokers_frame, executed, partitions_frame, random_clusters

ALL = sorted(STRATEGIES)


def plan(strategy, brokers, parts, constraints):
    return plan_cluster(brokers, parts, PlanRequest("c1", strategy, constraints, allow_worse=True))


def spread_cluster(n_brokers=9, n_parts=60, seed=1):
    """Brokers over 3 racks; every partition's replicas on 3 distinct racks (a legal baseline)."""
    ids = list(range(1, n_brokers + 1))
    brokers = brokers_frame(ids)  # rack r{i % 3}
    by_rack = [[b for k, b in enumerate(ids) if k % 3 == r] for r in range(3)]
    rng = np.random.default_rng(seed)
    replicas = [[int(rng.choice(by_rack[(r + p) % 3])) for r in range(3)] for p in range(n_parts)]
    return brokers, partitions_frame(replicas)


def leaders(planned: pd.DataFrame) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(r[0]) for t, p, r in zip(planned["topic"], planned["partition"], planned["replicas"])}


# -- leadership rules ------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL)
def test_pinned_leaders_lead_even_where_they_held_no_replica(strategy):
    brokers, parts = spread_cluster()
    holders = set(parts.loc[(parts["topic"] == "t0") & (parts["partition"] == 0), "replicas"].iloc[0])
    outsider = min(set(range(1, 10)) - holders)
    constraints = Constraints(preferred_leaders={"t0:0": outsider, "t1:3": 2, "absent:0": 4})
    result = plan(strategy, brokers, parts, constraints)
    assert result.status in (COMMITTED, SKIPPED), result.error
    if result.status == SKIPPED:
        return
    assert_valid(brokers, parts, result.planned, constraints)
    led = leaders(result.planned)
    assert led[("t0", 0)] == outsider and led[("t1", 3)] == 2
    assert result.warnings == ["preferred_leaders absent:0"]
    assert any("config names what this cluster lacks: preferred_leaders absent:0" in n for n in result.notes)


def test_a_pin_on_a_dead_broker_fails_the_cluster_naming_the_partition():
    brokers, parts = spread_cluster()
    brokers.loc[brokers["broker_id"] == 5, "state"] = "dead"
    result = plan("sticky", brokers, parts, Constraints(preferred_leaders={"t2:1": 5}))
    assert result.status == FAILED
    assert "constraint violation" in result.error and "t2-1: pinned leader 5 is not an eligible broker" in result.error


@pytest.mark.parametrize("strategy", ALL)
def test_anti_affinity_spreads_leaders_even_when_replica_sets_coincide(strategy):
    brokers = brokers_frame(list(range(1, 7)))
    parts = partitions_frame([[1, 2, 3]] * 5 + [[4, 5, 6]] * 5)  # t0-0..4 share one replica set
    constraints = Constraints(anti_affinity_groups=(("t0:0", "t0:1", "t0:2", "t0:3", "t0:4"),))
    result = plan(strategy, brokers, parts, constraints)
    assert result.status == COMMITTED, result.error
    assert_valid(brokers, parts, result.planned, constraints)
    led = leaders(result.planned)
    assert len({led[("t0", p)] for p in range(5)}) == 5


def test_an_anti_affinity_group_larger_than_the_brokers_fails():
    brokers, parts = spread_cluster(n_brokers=6)
    result = plan("round_robin", brokers, parts, Constraints(anti_affinity_groups=(("t0",),)))  # 10 partitions
    assert result.status == FAILED
    assert "anti-affinity group of 10 partitions needs as many brokers, 6 are eligible" in result.error


def test_affinity_hints_co_locate_leaders_partition_by_partition():
    brokers, parts = spread_cluster()
    constraints = Constraints(affinity_hints=(("t1", "t2"),))  # t1-i with t2-i for every i
    result = plan("sticky", brokers, parts, constraints)
    assert result.status == COMMITTED, result.error
    assert_valid(brokers, parts, result.planned, constraints)
    led = leaders(result.planned)
    assert all(led[("t1", p)] == led[("t2", p)] for p in range(10))
    assert result.metrics.affinity_hints_unmet == 0


def test_a_hint_against_hard_rules_is_reported_not_forced():
    brokers, parts = spread_cluster()
    constraints = Constraints(preferred_leaders={"t0:0": 1, "t0:1": 2}, affinity_hints=(("t0:0", "t0:1"),))
    result = plan("sticky", brokers, parts, constraints)
    assert result.status == COMMITTED, result.error
    led = leaders(result.planned)
    assert (led[("t0", 0)], led[("t0", 1)]) == (1, 2)
    assert result.metrics.affinity_hints_unmet == 1
    assert any("1 affinity hints not met: t0:0 t0:1" in n for n in result.notes)


def test_a_hint_of_strength_one_is_hard_and_one_of_strength_zero_is_ignored():
    brokers, parts = spread_cluster()
    pinned = {"t0:0": 1, "t0:1": 2}
    hard = Constraints(preferred_leaders=pinned, affinity_hints=(("t0:0", "t0:1"),), affinity_hint_strengths=(1.0,))
    result = plan("sticky", brokers, parts, hard)
    assert result.status == FAILED
    assert result.error.endswith(
        "1 affinity hints of strength 1.0 cannot be met (leaders on one broker: racks or caps) (table config); "
        "offending row: t0:0 t0:1"
    )
    ignored = Constraints(preferred_leaders=pinned, affinity_hints=(("t0:0", "t0:1"),), affinity_hint_strengths=(0.0,))
    result = plan("sticky", brokers, parts, ignored)
    assert result.status == COMMITTED and result.metrics.affinity_hints_unmet == 0
    # met where nothing stands in the way, for every strategy, and its leaders stay together
    for strategy in ALL:
        together = Constraints(affinity_hints=(("t1", "t2"),), affinity_hint_strengths=(1.0,))
        result = plan(strategy, brokers, parts, together)
        assert result.status == COMMITTED, (strategy, result.error)
        led = leaders(result.planned)
        assert all(led[("t1", p)] == led[("t2", p)] for p in range(10)), strategy


def test_the_stronger_of_two_conflicting_hints_wins():
    # t0:0 may share a leader with t0:1 or with t0:2, not both (anti-affinity keeps t0:1 and t0:2 apart)
    brokers, parts = spread_cluster()
    base = dict(anti_affinity_groups=(("t0:1", "t0:2"),), affinity_hints=(("t0:0", "t0:1"), ("t0:0", "t0:2")))
    for strengths, together in (((0.9, 0.4), ("t0", 1)), ((0.4, 0.9), ("t0", 2))):
        result = plan("sticky", brokers, parts, Constraints(**base, affinity_hint_strengths=strengths))
        assert result.status == COMMITTED, result.error
        led = leaders(result.planned)
        assert led[("t0", 0)] == led[together], strengths


@pytest.mark.parametrize("strategy", ALL)
@settings(max_examples=15, deadline=None)
@given(cluster=random_clusters(), data=st.data())
def test_property_leadership_rules_hold_or_the_cluster_fails_typed(strategy, cluster, data):
    brokers, parts = cluster
    eligible = sorted(int(b) for b, s in zip(brokers["broker_id"], brokers["state"]) if s == "active")
    names = [f"{t}:{p}" for t, p in zip(parts["topic"], parts["partition"])]
    pins = {}
    if eligible:
        for name in data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
            pins[name] = data.draw(st.sampled_from(eligible))
    group = data.draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
    hint = data.draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    constraints = Constraints(
        preferred_leaders=pins, anti_affinity_groups=(tuple(group),) if group else (), affinity_hints=(tuple(hint),)
    )
    result = plan(strategy, brokers, parts, constraints)
    again = plan(strategy, brokers, parts, constraints)
    pd.testing.assert_frame_equal(result.planned, again.planned)
    if result.status == FAILED:
        assert any(kind in result.error for kind in ("constraint violation", "not enough", "no active", "capacity"))
        return
    if result.status == SKIPPED:
        return
    assert_valid(brokers, parts, result.planned, constraints)
    led = {f"{t}:{p}": v for (t, p), v in leaders(result.planned).items()}
    assert all(led[name] == broker for name, broker in pins.items())
    assert len({led[name] for name in group}) == len(group)


# -- move budget ----------------------------------------------------------------------


def grown_cluster():
    """Six full brokers and one new, empty broker 7 (rack r0): balancing wants ~25 moves onto it."""
    brokers = brokers_frame(list(range(1, 8)), racks=["r0", "r1", "r2", "r0", "r1", "r2", "r0"])
    parts = partitions_frame([[1, 2, 3] if p % 2 else [4, 5, 6] for p in range(60)])
    return brokers, parts


def test_the_budget_keeps_the_most_valuable_moves_within_max_moves():
    brokers, parts = grown_cluster()
    full = plan("sticky", brokers, parts, Constraints())
    budgeted = plan("sticky", brokers, parts, Constraints(max_moves=10))
    assert full.metrics.moves > 10
    assert budgeted.status == COMMITTED and budgeted.metrics.moves == 10
    assert budgeted.metrics.moves_deferred == full.metrics.moves - 10
    counts = Counter(b for r in budgeted.planned["replicas"] for b in r)
    assert counts[7] == 10  # every kept move relieves the full brokers onto the empty one
    assert budgeted.metrics.replica_spread_after < budgeted.metrics.replica_spread_before
    assert_valid(brokers, parts, budgeted.planned, Constraints())
    assert any("kept 10 of" in n for n in budgeted.notes)


@pytest.mark.parametrize("strategy", ALL)
def test_the_bytes_budget_holds_for_every_strategy(strategy):
    brokers, parts = grown_cluster()
    constraints = Constraints(max_bytes_to_move=100_000)
    result = plan(strategy, brokers, parts, constraints)
    assert result.status in (COMMITTED, SKIPPED), result.error
    if result.status == COMMITTED:
        assert result.metrics.bytes_to_move <= 100_000
        assert_valid(brokers, parts, result.planned, constraints)


@pytest.mark.parametrize("strategy", ALL)
@settings(max_examples=15, deadline=None)
@given(cluster=random_clusters(), budget=st.integers(0, 12), cores=st.booleans())
def test_property_the_budget_holds_unless_forced_and_plans_stay_valid(strategy, cluster, budget, cores):
    brokers, parts = cluster
    constraints = Constraints(max_moves=budget, assign_cores=cores)
    result = plan(strategy, brokers, parts, constraints)
    if result.status != COMMITTED:
        return
    assert_valid(brokers, parts, result.planned, constraints)
    forced = any("forced moves alone" in n for n in result.notes)
    assert result.metrics.moves <= budget or forced
    if cores:
        assert all(len(c) == len(r) for c, r in zip(result.planned["cores"], result.planned["replicas"]))


def test_forced_moves_are_made_beyond_the_budget_and_said_so():
    brokers, parts = grown_cluster()
    brokers.loc[brokers["broker_id"] == 1, "state"] = "dead"  # 30 replicas must leave
    result = plan("sticky", brokers, parts, Constraints(max_moves=5))
    assert result.status == COMMITTED
    assert result.metrics.moves >= 30
    assert all(1 not in r for r in result.planned["replicas"])
    assert any("forced moves alone" in n for n in result.notes)


# -- per-core placement -----------------------------------------------------------------


@pytest.mark.parametrize("strategy", ALL)
def test_cores_are_aligned_even_and_within_capacity(strategy):
    brokers, parts = spread_cluster(n_parts=200)
    brokers = brokers.assign(cores=[2, 4, 1, 2, 4, 1, 2, 4, 3])
    constraints = Constraints(assign_cores=True, core_capacity=60)
    result = plan(strategy, brokers, parts, constraints)
    assert result.status == COMMITTED, result.error
    per_core: Counter[tuple[int, int]] = Counter()
    for reps, cores in zip(result.planned["replicas"], result.planned["cores"]):
        assert len(cores) == len(reps)
        per_core.update(zip(reps, cores))
    n_cores = dict(zip(brokers["broker_id"], brokers["cores"]))
    for b, n in n_cores.items():
        load = [per_core[(b, c)] + (CORE0_RESERVE if c == 0 else 0) for c in range(n)]
        assert set(per_core) >= {(b, c) for c in range(n) if load[c]} and all(c < n for bb, c in per_core if bb == b)
        assert max(load) <= 60 and max(load) - min(load) <= 1, (b, load)


def test_replanning_keeps_every_replica_on_its_core():
    brokers, parts = spread_cluster(n_parts=120)
    constraints = Constraints(assign_cores=True)
    first = plan("sticky", brokers, parts, constraints).planned
    again_input = executed(parts, first[["topic", "partition", "replicas", "cores"]])
    again = plan_cluster(brokers, again_input, PlanRequest("c1", "sticky", constraints, has_previous_plan=True))
    assert again.metrics.moves == 0
    assert again.planned["cores"].tolist() == first["cores"].tolist()


def test_a_cluster_whose_cores_cannot_take_its_replicas_fails_whole():
    brokers, parts = spread_cluster(n_parts=60)  # 180 replicas, 9 brokers of 8 cores
    result = plan("round_robin", brokers, parts, Constraints(assign_cores=True, core_capacity=2))  # 8*2-2 = 14 each
    assert result.status == FAILED and "capacity exhausted: max_partitions/core_capacity" in result.error
    assert result.planned.empty


# -- load weights -----------------------------------------------------------------------


def test_load_weights_shape_replica_loads_and_lpt():
    parts = partitions_frame([[1, 2, 3]] * 4, bytes_in=[1.0, 2.0, 3.0, 4.0])  # bytes_out = 2 x bytes_in
    egress = Constraints(load_weights=LoadWeights(leader_in=1.0, leader_out=3.0, follower_in=0.5))
    prepared = prepare_partitions(parts, egress)
    assert prepared["leader_load"].tolist() == [7.0, 14.0, 21.0, 28.0]
    assert prepared["follower_load"].tolist() == [0.5, 1.0, 1.5, 2.0]
    brokers, parts = spread_cluster(n_parts=90)
    default = plan("lpt", brokers, parts, Constraints(lpt_skip_ratio=1.0))
    weighted = plan("lpt", brokers, parts, Constraints(lpt_skip_ratio=1.0, load_weights=egress.load_weights))
    assert default.metrics.load_lower_bound != weighted.metrics.load_lower_bound
    assert weighted.metrics.max_load_after <= 1.1 * weighted.metrics.load_lower_bound
    assert not default.planned["replicas"].map(tuple).equals(weighted.planned["replicas"].map(tuple))


@settings(max_examples=60, deadline=None)
@given(cluster=random_clusters(), rack_aware=st.booleans(), failure_domains=st.integers(0, 3), rf=st.integers(1, 4))
def test_property_keep_valid_each_is_keep_valid_of_every_partition(cluster, rack_aware, failure_domains, rf):
    brokers, parts = cluster
    constraints = Constraints(rack_aware=rack_aware, min_failure_domains=failure_domains)
    view = ClusterView.from_brokers(prepare_brokers(brokers, constraints), constraints)
    baselines = [list(r) + list(r)[:1] if i % 7 == 3 else list(r) for i, r in enumerate(parts["replicas"])]
    wanted = [rf if i % 2 else len(b) for i, b in enumerate(baselines)]  # duplicates, RF changes, the rest as is
    assert keep_valid_each(baselines, wanted, view) == [keep_valid(b, r, view) for b, r in zip(baselines, wanted)]
    # even_out: keep_valid of each in turn, the leader's replica competing, against replicas per weight as
    # they stand after the partitions before it (the replicas each leaves behind counted off)
    pressure = Counter(b for baseline in baselines for b in baseline if b in view.eligible_set)
    pressure = {b: pressure[b] / view.weight_of[b] for b in view.eligible}
    expected = []
    for baseline, r in zip(baselines, wanted):
        expected.append(keep_valid(baseline, r, view, pressure, leader_may_go=True))
        for gone in (set(baseline) - set(expected[-1])) & view.eligible_set:
            pressure[gone] -= 1 / view.weight_of[gone]
    assert keep_valid_each(baselines, wanted, view, even_out=True) == expected


@settings(max_examples=40, deadline=None)
@given(cluster=random_clusters(), rack_aware=st.booleans(), failure_domains=st.integers(1, 3))
def test_property_may_replace_with_is_may_replace_of_each_candidate(cluster, rack_aware, failure_domains):
    brokers, parts = cluster
    constraints = Constraints(rack_aware=rack_aware, min_failure_domains=failure_domains)
    view = ClusterView.from_brokers(prepare_brokers(brokers, constraints), constraints)
    candidates = sorted(view.domain_of)
    for reps in parts["replicas"]:
        reps = list(reps)
        for old in reps:
            expected = [b for b in candidates if may_replace(reps, old, b, view)]
            assert may_replace_with(reps, old, candidates, view) == expected


def test_keep_valid_each_even_out_drops_from_the_fullest_broker_at_that_point():
    # racks a: 1, 2; b: 3. RF 2 needs both racks, so each partition on 1 and 2 keeps one of them.
    view = ClusterView.from_brokers(
        prepare_brokers(brokers_frame([1, 2, 3], ["a", "a", "b"]), Constraints()), Constraints()
    )
    baselines = [[3, 1, 2], [3, 1, 2], [3, 2, 1], [1, 3], [1, 3]]  # RF 3 -> 2 on the first three
    rf = [2, 2, 2, 2, 2]
    # broker 1 holds 5 replicas, 2 holds 3: the first drop takes 1 (5 vs 3), so does the second (4 vs 3);
    # the third is a tie (3 vs 3), where the later replica goes, here broker 1 again
    assert keep_valid_each(baselines, rf, view, even_out=True) == [[3, 2], [3, 2], [3, 2], [1, 3], [1, 3]]
    # without it, the later follower goes wherever it is
    assert keep_valid_each(baselines, rf, view) == [[3, 1], [3, 1], [3, 2], [1, 3], [1, 3]]


def test_keep_valid_each_takes_a_crowded_pair_from_the_fuller_broker_and_the_later_one_on_a_tie():
    # racks a: 1, 2; b: 3. RF 2 must span both racks, so [1, 2] keeps one. Broker 1 holds 4 replicas, 2 holds 3:
    # the first pair drops 1 (4 vs 3; the leader's replica competes), the second is a tie (3 vs 3) where the
    # later one goes, the third drops 1 again (2 vs 3)
    view = ClusterView.from_brokers(
        prepare_brokers(brokers_frame([1, 2, 3], ["a", "a", "b"]), Constraints()), Constraints()
    )
    baselines = [[1, 2], [1, 2], [2, 1], [3, 1]]
    assert keep_valid_each(baselines, [2] * 4, view, even_out=True) == [[2], [1], [2], [3, 1]]
    assert keep_valid_each(baselines, [2] * 4, view) == [[1], [1], [2], [3, 1]]  # without: the later one


def test_keep_valid_each_even_out_lets_a_crowded_racks_leader_go_from_the_fullest_broker():
    # racks a: 1, 2; b: 3. [1, 2] crowds rack a, so one of its replicas must go; broker 1 (its leader) holds four
    # replicas, broker 2 one: broker 1's goes and leadership passes to broker 2, where keeping the leader would
    # leave broker 1 three above its share for the count balancing to move
    view = ClusterView.from_brokers(
        prepare_brokers(brokers_frame([1, 2, 3], ["a", "a", "b"]), Constraints()), Constraints()
    )
    baselines = [[1, 2], [1, 3], [1, 3], [1, 3]]
    assert keep_valid_each(baselines, [2] * 4, view, even_out=True) == [[2], [1, 3], [1, 3], [1, 3]]
    assert keep_valid_each(baselines, [2] * 4, view) == [[1], [1, 3], [1, 3], [1, 3]]  # without: the follower


@settings(max_examples=40, deadline=None)
@given(cluster=random_clusters(), drop=st.integers(0, 2))
def test_property_refill_order_is_fewest_free_brokers_in_unused_racks_first(cluster, drop):
    brokers, parts = cluster
    view = ClusterView.from_brokers(prepare_brokers(brokers, Constraints()), Constraints())
    assignment = [
        list(r)[: max(0, len(r) - (i + drop) % 3)] + ([9999] if i % 5 == 0 else [])
        for i, r in enumerate(parts["replicas"])
    ]
    targets = [len(r) + 1 for r in parts["replicas"]]

    def free_brokers(i: int) -> int:  # eligible brokers in racks the partition does not use yet
        used = {view.domain_of.get(b) for b in assignment[i]}
        return sum(1 for b in view.eligible if view.domain_of[b] not in used)

    short = [i for i, (r, t) in enumerate(zip(assignment, targets)) if len(r) < t]
    assert _fewest_choices_first(assignment, targets, view) == sorted(short, key=lambda i: (free_brokers(i), i))


@st.composite
def next_replica_cases(draw: st.DrawFn):
    """A partition missing replicas, its cluster's view and usage (some brokers capped), the eligible brokers in
    a drawn order of preference, and brokers to avoid."""
    brokers, parts = draw(random_clusters())
    capped = [draw(st.sampled_from([None, None, 0, 1, 3])) for _ in range(len(brokers))]
    brokers = brokers.assign(max_partitions=pd.array(capped, dtype="Int64"))
    constraints = Constraints(rack_aware=draw(st.booleans()), min_failure_domains=draw(st.integers(1, 3)))
    view = ClusterView.from_brokers(prepare_brokers(brokers, constraints), constraints)
    assignment = [list(r) for r in parts["replicas"]]
    usage = Usage(assignment, np.zeros(len(assignment), dtype=np.int64), view)
    i = draw(st.integers(0, len(assignment) - 1))
    target = len(assignment[i])
    replicas = assignment[i][: draw(st.integers(0, target - 1))] if target else []
    ranked = [(float(k), b) for k, b in enumerate(draw(st.permutations(view.eligible)))]
    avoid = draw(st.sets(st.sampled_from(view.eligible))) if view.eligible else set()
    return view, usage, i, replicas, max(target, 1), ranked, avoid


@settings(max_examples=80, deadline=None)
@given(case=next_replica_cases())
def test_property_the_next_replica_goes_to_a_new_rack_first_then_an_old_one_the_rule_allows_then_an_avoided_one(
    case,
):
    view, usage, i, replicas, target, ranked, avoid = case
    used = {view.domain_of.get(b) for b in replicas}
    need = view.required_domains(target)
    wants_new = len(used) < need or (view.rack_aware and len(used) < view.n_domains)
    old_rack_ok = len(used) + (target - len(replicas) - 1) >= need

    def new_rack(b: int) -> bool:
        return not wants_new or view.domain_of[b] not in used

    legal = [b for _, b in ranked if b not in replicas and usage.room_for(i, b) and (new_rack(b) or old_rack_ok)]
    tiers = (
        [b for b in legal if new_rack(b) and b not in avoid],
        [b for b in legal if not new_rack(b) and b not in avoid],
        [b for b in legal if b in avoid],
    )
    expected = next((tier[0] for tier in tiers if tier), None)
    assert first_legal(ranked, i, replicas, target, usage, avoid.__contains__) == expected

    # from a heap with stale entries among the fresh ones: the same broker, every other fresh entry kept
    key = {b: k for k, b in ranked}
    heap = sorted([*ranked, *((k + 0.5, b) for k, b in ranked[::2])])  # (k + 0.5, b): stale, never taken
    if expected is None:
        with pytest.raises((CapacityExhaustedError, InsufficientBrokersError)):
            pop_legal(heap, key.__getitem__, i, replicas, target, usage, avoid.__contains__)
        return
    assert pop_legal(heap, key.__getitem__, i, replicas, target, usage, avoid.__contains__) == expected
    assert sorted(e for e in heap if e[0] == key[e[1]]) == sorted(e for e in ranked if e[1] != expected)


def test_the_next_replica_of_a_partition_on_one_rack_of_two():
    # racks a: 1, 2; b: 3, 4. RF 3 over two racks must span both; the partition holds broker 1 (rack a) and
    # still misses two replicas, so rack a may take one more while b takes the other
    view = ClusterView.from_brokers(
        prepare_brokers(brokers_frame([1, 2, 3, 4], ["a", "a", "b", "b"]), Constraints()), Constraints()
    )
    usage = Usage([[1]], np.zeros(1, dtype=np.int64), view)
    ranked = [(0.0, 2), (1.0, 3), (2.0, 4)]

    def nxt(avoid=frozenset(), replicas=(1,)):
        return first_legal(ranked, 0, list(replicas), 3, usage, avoid.__contains__)

    assert nxt() == 3  # a new rack is preferred to broker 2, ranked first
    assert nxt(frozenset({3})) == 4
    assert nxt(frozenset({3, 4})) == 2  # rack b avoided: the old rack the rule still allows
    assert nxt(frozenset({2, 3, 4})) == 2  # everything avoided: the first legal one all the same
    assert nxt(replicas=(1, 2)) == 3  # rack a full for the rule: only b
    assert nxt(frozenset({3, 4}), replicas=(1, 2)) == 3  # ... even where every broker there is avoided


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.integers(-3, 40_000), max_size=200))
def test_property_argsort_small_is_a_stable_argsort(values):
    array = np.asarray(values, dtype=np.int64)
    assert argsort_small(array).tolist() == np.argsort(array, kind="stable").tolist()


def layouts(brokers: int, topics: int, replicas: int, partitions: int):
    """Partitions as (their brokers among 1..``brokers``, their topic among 0..``topics`` - 1)."""
    one = st.tuples(
        st.lists(st.integers(1, brokers), min_size=1, max_size=replicas, unique=True), st.integers(0, topics - 1)
    )
    return st.lists(one, min_size=1, max_size=partitions)


@settings(max_examples=60, deadline=None)
@given(layouts=layouts(brokers=9, topics=3, replicas=4, partitions=12), shift=st.integers(0, 5))
def test_property_topic_move_counts_name_the_pairs_topic_moves_names(layouts, shift):
    # each partition's later layout: its brokers shifted by ``shift`` (mod 9, some land on brokers it held)
    before = [brokers for brokers, _ in layouts]
    after = [[(b + shift * (i % 2) - 1) % 9 + 1 for b in brokers] for i, brokers in enumerate(before)]
    topics = np.asarray([topic for _, topic in layouts], dtype=np.int64)
    counts = topic_move_counts(replica_matrix(after), replica_matrix(before), topics, span=10)
    named = {tuple(row) for row in counts.named().tolist()}
    assert named == topic_moves(before, after, topics)
    expected = Counter(
        (int(t), a, b)
        for t, was, now in zip(topics, before, after)
        for a in set(was) - set(now)
        for b in set(now) - set(was)
    )
    assert all(counts[pair] == n for pair, n in expected.items())
    assert topic_moves(before, after, topics) == set(expected)  # the set, against the plain definition
    assert counts[(0, 9, 9)] == 0  # a pair no move names


PINNED_REVERSAL = [(0, 0, 4), (1, 1, 7), (1, 0, 1)]  # partition 1, moved once, then 4 -> 1 reverses 0's 1 -> 4


@pytest.mark.parametrize("at_once", [False, True])
@settings(max_examples=80, deadline=None)
@given(
    live=layouts(brokers=7, topics=2, replicas=3, partitions=8),
    steps=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2), st.integers(1, 7)), max_size=25),
)
@example(live=[([1, 2, 3], 0), ([4, 5, 6], 0)], steps=PINNED_REVERSAL)
def test_property_the_topic_rule_judges_and_counts_each_move_as_a_fresh_count_of_the_plans_pairs(at_once, live, steps):
    # (topic, from, to): each live broker a partition left with each broker it joined, counted over the plan.
    # allows() then record() of every move (as the chains call them), or record_if_allowed() (the count
    # balancing's bulk moves), which asks and counts in one call and moves only what reverses no pair
    topics = [topic for _, topic in live]
    was = [brokers for brokers, _ in live]
    assignment = [list(brokers) for brokers in was]
    rule = _TopicRule(topics, set(), assignment, was, replica_matrix(assignment), span=8)

    def pairs(i: int, replicas: list[int]) -> set[tuple[int, int, int]]:
        return {(topics[i], a, b) for a in was[i] if a not in replicas for b in replicas if b not in was[i]}

    def fresh() -> Counter:
        return Counter(pair for i, replicas in enumerate(assignment) for pair in pairs(i, replicas))

    refused = 0
    for i, position, new in steps:
        i %= len(assignment)
        old = assignment[i][position % len(assignment[i])]
        if new in assignment[i]:
            continue
        after = [new if b == old else b for b in assignment[i]]
        counted = fresh()
        reversing = [p for p in pairs(i, after) - pairs(i, assignment[i]) if counted[(p[0], p[2], p[1])] > 0]
        if at_once:
            moved = rule.record_if_allowed(i, old, new)
            assert moved == (not reversing)
        else:
            assert rule.allows(i, old, new) == (not reversing)
            rule.record(i, old, new)  # before the move is applied, as the balancing calls it
            moved = True
        if moved:
            assignment[i][:] = after
        refused += not moved
        assert {tuple(p) for p in rule.pairs().tolist()} == set(fresh())
        assert all(rule.count[p] == n for p, n in fresh().items())
    if at_once and steps == PINNED_REVERSAL:
        assert refused == 1
