"""Every strategy: hypothesis invariants, balance, movement and hashing properties."""

from __future__ import annotations

import gc
import math
import weakref
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from assigners import COMMITTED, FAILED, SKIPPED, STRATEGIES, Constraints, PlanRequest, balance, model, plan_cluster
from assigners.balance import _ReplicaIndex, balance_replica_counts, settle, settles_as_it_is
from assigners.lpt import polish_load
from assigners.metrics import minimum_moves
from assigners.model import (
    ClusterView,
    PlacementRule,
    prepare_brokers,
    prepare_partitions,
    replica_matrix,
    topic_codes,
)
from assigners.placement import Usage, keep_valid_each, topic_move_counts
from assigners.policies import resolve_placement
from tests.unit.clusters import assert_valid, brokers_frame, executed, partitions_frame, random_clusters
from tests.unit.scenarios import scenario

ALL = sorted(STRATEGIES)


def plan(strategy, brokers, parts, constraints=None, seed=0, previous=False):
    request = PlanRequest(
        "c1", strategy, constraints or Constraints(), seed, has_previous_plan=previous, allow_worse=True
    )
    return plan_cluster(brokers, parts, request)


def with_caps_that_always_fit(brokers: pd.DataFrame, parts: pd.DataFrame) -> pd.DataFrame:
    """Caps every plan can meet (a broker holds at most one replica per partition, and every
    byte of a partition on one broker), so a failure here is a bug; the binding cases have
    their own tests below."""
    total_bytes = int(parts["size_bytes"].sum())
    return brokers.assign(max_partitions=[len(parts)] * len(brokers), disk_capacity_bytes=[total_bytes] * len(brokers))


@pytest.mark.parametrize("strategy", ALL)
@settings(max_examples=40, deadline=None)
@given(cluster=random_clusters(), rack_aware=st.booleans(), seed=st.integers(0, 3), caps=st.booleans())
def test_property_every_plan_valid_or_typed_failure_exactly_when_infeasible(strategy, cluster, rack_aware, seed, caps):
    brokers, parts = cluster
    if caps:
        brokers = with_caps_that_always_fit(brokers, parts)
    constraints = Constraints(rack_aware=rack_aware)
    eligible = int((brokers["state"] == "active").sum())
    max_rf = int(parts["replicas"].map(len).max())
    result = plan(strategy, brokers, parts, constraints, seed)
    if eligible == 0 or max_rf > eligible:
        assert result.status == FAILED
        assert ("no active brokers" if eligible == 0 else "not enough eligible brokers") in (result.error or "")
        return
    assert result.status in (COMMITTED, SKIPPED), result.error
    if result.status == COMMITTED:
        assert_valid(brokers, parts, result.planned, constraints)


@pytest.mark.parametrize("strategy", ALL)
@settings(max_examples=25, deadline=None)
@given(cluster=random_clusters(), seed=st.integers(0, 3), shuffle=st.integers(0, 1000))
def test_property_deterministic_and_independent_of_row_order(strategy, cluster, seed, shuffle):
    brokers, parts = cluster
    first = plan(strategy, brokers, parts, seed=seed)
    again = plan(strategy, brokers, parts, seed=seed)
    shuffled = plan(
        strategy,
        brokers.sample(frac=1.0, random_state=shuffle).reset_index(drop=True),
        parts.sample(frac=1.0, random_state=shuffle + 1).reset_index(drop=True),
        seed=seed,
    )
    for other in (again, shuffled):
        assert first.status == other.status and first.error == other.error
        pd.testing.assert_frame_equal(first.planned.reset_index(drop=True), other.planned.reset_index(drop=True))


def test_capacity_exhausted_names_the_cap_and_the_brokers():
    brokers = brokers_frame([1, 2, 3]).assign(max_partitions=[2, 2, 2])
    result = plan("sticky", brokers, partitions_frame([[1, 2]] * 4))  # 8 replicas, room for 6
    assert result.status == FAILED
    assert "capacity exhausted: max_partitions" in (result.error or "")
    assert "broker_id=1 max_partitions=2" in (result.error or "")


@pytest.mark.parametrize("strategy", ALL)
def test_disk_caps_are_honoured(strategy):
    brokers = brokers_frame(list(range(1, 7))).assign(disk_capacity_bytes=[300_000] * 5 + [1000])
    parts = partitions_frame([[1, 2, 6]] * 20)  # sizes 1000..20000; broker 6 can take only the smallest
    result = plan(strategy, brokers, parts)
    assert result.status == COMMITTED, result.error
    assert_valid(brokers, parts, result.planned, Constraints())


# -- balance ------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["range", "round_robin"])
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 80), st.integers(0, 5))
def test_property_spread_within_one_on_uniform_racks(strategy, n_racks, per_rack, rf, n_parts, seed):
    n = n_racks * per_rack
    if rf > n:
        return
    brokers = brokers_frame(list(range(1, n + 1)), racks=[f"r{i % n_racks}" for i in range(n)])
    topics = [f"t{i % 3}" for i in range(n_parts)]
    result = plan(
        strategy, brokers, partitions_frame([list(range(1, rf + 1))] * n_parts, topics, list(range(n_parts))), seed=seed
    )
    replicas = Counter(b for r in result.planned["replicas"] for b in r)
    leaders = Counter(int(r[0]) for r in result.planned["replicas"])
    for counter in (replicas, leaders):
        values = [counter.get(b, 0) for b in range(1, n + 1)]
        assert max(values) - min(values) <= 1, (strategy, values)


def _single_legal_improving_move(brokers, parts, planned, constraints) -> tuple | None:
    """A replica that could legally move from a heavier broker to one 2+ lighter (per weight), if any.

    Legally includes the topic rule: the move adds no (topic, a, b) pair whose
    reverse the plan makes. A partition's pairs are every broker it leaves
    against the live layout with every broker it joins (the plan does not say
    which replica replaced which), so moving a replica of a partition the plan
    already moved changes its pairs: [1, 5] planned as [6, 1] makes 5 -> 6, and
    its 1 going to 5 would make 1 -> 6 instead.
    """
    pb = prepare_brokers(brokers, constraints)
    view = ClusterView.from_brokers(pb, constraints)
    count = Counter({b: 0 for b in view.eligible})
    for reps in planned["replicas"]:
        count.update(int(b) for b in reps)
    before = {(t, p): {int(b) for b in r} for t, p, r in zip(parts["topic"], parts["partition"], parts["replicas"])}
    moved = set()
    for t, p, reps in zip(planned["topic"], planned["partition"], planned["replicas"]):
        after = {int(b) for b in reps}
        moved |= {(t, a, b) for a in before[(t, p)] - after for b in after - before[(t, p)]}
    w = view.weight_of
    for topic, p, reps in zip(planned["topic"], planned["partition"], planned["replicas"]):
        reps, live = [int(b) for b in reps], before[(topic, p)]
        pairs = {(topic, a, b) for a in live - set(reps) for b in set(reps) - live}
        for d in reps:
            for r in view.eligible:
                if r in reps or not (2 * count[r] + 1) / w[r] < (2 * count[d] - 1) / w[d]:
                    continue
                after = [r if b == d else b for b in reps]
                added = {(topic, a, b) for a in live - set(after) for b in set(after) - live} - pairs
                if any((t, b, a) in moved for t, a, b in added):
                    continue
                if len({view.domain_of[b] for b in after}) >= min(
                    view.required_domains(len(after)), len({view.domain_of[b] for b in reps})
                ):
                    return (reps, d, r)
    return None


# Weighted brokers where the one legal improving move would send a replica of topic0
# back 1 -> 5 after the bulk pass moved one 5 -> 1: the topic rule rightly forbids it.
_TOPIC_RULE_BINDS = (
    brokers_frame(
        list(range(1, 12)),
        ["rack0"] * 7 + ["rack1"] + ["rack0"] * 3,
        ["active"] * 10 + ["draining"],
        [None, None, None, 1.0, 2.0, 1.0, 0.5, None, 1.0, 1.0, None],
    ),
    partitions_frame(
        [[6, 5, 9], [9, 11, 2], [5, 8, 4], [7, 11, 4], [8, 11, 10], [5, 9, 3]]
        + [[5, 11, 2], [3, 4, 10], [8, 11, 1], [5, 2, 11], [1, 4, 8], [2, 8, 3]],
        ["topic0"] * 12,
        list(range(12)),
    ),
)


@settings(max_examples=40, deadline=None)
@given(cluster=random_clusters())
@example(cluster=_TOPIC_RULE_BINDS)
def test_property_sticky_reaches_the_balance_rule(cluster):
    brokers, parts = cluster
    result = plan("sticky", brokers, parts)
    if result.status != COMMITTED:
        return
    assert _single_legal_improving_move(brokers, parts, result.planned, Constraints()) is None


def test_sticky_reaches_the_balance_rule_with_a_heavy_weight_broker_and_a_draining_one():
    # Was a strict xfail, found by hypothesis: the checker took partition 1 (live [1, 5], planned [6, 1]) as
    # free to move 1 -> 5, judging only the pair 1 -> 5; against the live layout that move makes 1 -> 6,
    # the reverse of partition 7's 6 -> 1 ([4, 6] planned as [4, 1]), which the topic rule forbids. Sticky
    # was right: brokers 1 and 5 stay at 5 and 3 replicas, and the checker now judges pairs as the plan does.
    brokers = brokers_frame(
        [1, 2, 3, 4, 5, 6],
        ["rack0", "rack0", "rack0", "rack1", "rack0", "rack1"],
        ["active", "active", "draining", "active", "active", "active"],
        [None, None, None, 1.0, None, None],
    )
    reps = [[3, 4], [1, 5], [6, 5], [6, 2], [5, 2], [3, 4], [1, 6], [4, 6], [2, 5], [1, 4], [1, 3], [3, 1]]
    loads = [1.0, 16.0, 4.0, 1.0, 4.0, 1.0, 3.0, 6.0, 39.0, 1.0, 1.0, 1.0]
    parts = partitions_frame(reps, ["topic0"] * 12, list(range(12)), loads)
    result = plan("sticky", brokers, parts)
    assert result.status == COMMITTED
    assert _single_legal_improving_move(brokers, parts, result.planned, Constraints()) is None


def test_sticky_leaves_no_improving_count_move_on_a_draining_fleet():
    # Was a strict xfail: sticky's load swaps, run after count balancing, opened a count move the balancer
    # never saw (topic1 [7, 9] could move 7 -> 1). Since the refill and the count balancing judge the topic
    # rule against the live layout, sticky's plan here differs and leaves none; the property test above
    # still looks for the general case.
    brokers = brokers_frame(
        list(range(1, 12)),
        ["rack0"] * 8 + ["rack3"] * 3,
        ["active", "draining", "draining", "draining"] + ["active"] * 7,
        [None, None, None, None, 1.0, 1.0, 2.0, 0.5, None, None, None],
    )
    topic0 = [[6], [6], [9], [11], [1], [2], [10], [11], [3], [4], [10]]
    topic1 = [[5, 4], [3, 5], [1, 6], [9, 11], [9, 6], [9, 5], [2, 4], [2, 10], [10, 5], [3, 6], [1, 8]]
    topic1 += [[6, 5], [10, 9], [8, 1], [11, 6]]
    loads = [1, 4, 1, 3, 6, 39, 1, 1, 1, 65, 1, 36, 1, 1, 90, 5, 8, 18, 35, 32, 2, 10, 2, 1, 1, 2]
    parts = partitions_frame(
        topic0 + topic1, ["topic0"] * 11 + ["topic1"] * 15, list(range(11)) + list(range(15)), [float(x) for x in loads]
    )
    result = plan("sticky", brokers, parts)
    assert result.status == COMMITTED
    assert _single_legal_improving_move(brokers, parts, result.planned, Constraints()) is None


@settings(max_examples=60, deadline=None)
@given(cluster=random_clusters(), with_strangers=st.booleans())
def test_property_the_bulk_built_replica_index_is_the_one_by_one_index(cluster, with_strangers):
    # the index's group and member order decide which replica moves, so both must match exactly
    brokers, parts = cluster
    view = ClusterView.from_brokers(prepare_brokers(brokers, Constraints()), Constraints())
    assignment = [
        list(map(int, r)) + ([9999] if with_strangers and i % 3 == 0 else []) for i, r in enumerate(parts["replicas"])
    ]
    bulk = _ReplicaIndex(assignment, view)
    one_by_one = _ReplicaIndex([], view)
    one_by_one.assignment = assignment
    for i in range(len(assignment)):
        one_by_one._update(i, add=True)

    def layout(index):
        return {b: [[(k, list(m)) for k, m in g.items()] for g in groups] for b, groups in index.groups.items()}

    assert layout(bulk) == layout(one_by_one)


def test_bulk_count_moves_keep_the_topic_rule_for_fresh_and_changed_partitions():
    # partition 6 of topic t was taken 3 -> 1 before the balancing, so no other partition of t may go 1 -> 3
    # while it stays; it may go home. Broker 1 holds 7 (share 2.33): it gives two to broker 2, then to broker 3
    # only partition 6, home (the bulk phase judges the fresh partitions in bulk, the changed one alone);
    # with the pair gone, the exact loop sends partition 2 to broker 3
    view = ClusterView.from_brokers(prepare_brokers(brokers_frame([1, 2, 3], ["a"] * 3), Constraints()), Constraints())
    live = [[1] for _ in range(6)] + [[3]]
    plan = [[1] for _ in range(7)]
    moves = balance_replica_counts(plan, view, topics=np.zeros(7, dtype=np.int64), live=live)
    assert plan == [[2], [2], [3], [1], [1], [1], [3]] and moves == 4


def test_where_racks_pin_their_totals_each_rack_is_evened_to_its_own_share_with_the_fewest_moves():
    # racks a: 1, 2, 3; b: 4, 5. RF 2 spans both racks, so rack a holds one replica of each of the 30
    # partitions whatever a plan does: 10 a broker, where the cluster's share is 12. Broker 1 holds 20, 2 and
    # 3 five each: 10 moves even them. Held to the cluster's share, 2 took 7 and gave 2 back (12 moves)
    view = ClusterView.from_brokers(
        prepare_brokers(brokers_frame([1, 2, 3, 4, 5], ["a", "a", "a", "b", "b"]), Constraints()), Constraints()
    )
    plan = [[1 if i < 20 else 2 if i < 25 else 3, 4 + i % 2] for i in range(30)]
    assert balance_replica_counts(plan, view) == 10
    assert Counter(b for replicas in plan for b in replicas) == {1: 10, 2: 10, 3: 10, 4: 15, 5: 15}


def test_where_racks_pin_their_totals_the_bulk_phase_moves_a_partition_in_each_rack(monkeypatch):
    # drifted/11/300/1, racks of 4, 4 and 3: the brokers piled high in one rack hold the same partitions as
    # those piled high in the others, so a partition has a replica to give in each rack. Every move stays in
    # its rack, so the bulk phase may move a partition again: it makes all 421 moves, the minimum (moving a
    # partition once left 127 of them to the exact loop, one at a time)
    brokers, parts = scenario("drifted", 11, 300, seed=1)
    prepared_b, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_b, Constraints())
    live = prepared["current"].tolist()
    plan = [list(r) for r in live]
    bulk_moves = []
    bulk = balance._bulk_count_moves

    def counted_bulk(*args, **kwargs):  # the real bulk phase, its moves noted
        bulk_moves.append(bulk(*args, **kwargs))
        return bulk_moves[-1]

    monkeypatch.setattr(balance, "_bulk_count_moves", counted_bulk)
    sizes, topics = prepared["size_bytes"].to_numpy(), topic_codes(prepared)
    moves = balance_replica_counts(plan, view, sizes, topics, Usage(plan, sizes, view), live=live)
    assert bulk_moves == [moves] == [minimum_moves(live, prepared["rf"].to_numpy(), view)] == [421]
    counts = Counter(b for replicas in plan for b in replicas)
    for rack in {view.domain_of[b] for b in view.eligible}:
        held = [counts[b] for b in view.eligible if view.domain_of[b] == rack]
        assert max(held) - min(held) <= 1
    assert all(len({view.domain_of[b] for b in replicas}) == 3 for replicas in plan)  # the rack rule kept


@pytest.mark.parametrize(
    "kind, n_brokers, rules", [("drifted", 9, False), ("broker_removed", 9, False), ("drifted", 12, True)]
)
def test_the_exact_loops_index_starts_from_the_replica_matrix_the_bulk_phase_kept_up_to_date(
    monkeypatch, kind, n_brokers, rules
):
    # the count balancing builds its exact loop's index from the matrix its bulk phase moved replicas on (not a
    # second listing of the lists): every move there changed both, so the index is the one the lists give,
    # under placement rules too, whose receivers borrow replicas (a chain of two moves each)
    brokers, parts = scenario(kind, n_brokers, 400, seed=3)
    c = (
        Constraints(
            broker_tags={b: {"tier": "ssd" if b % 3 else "hdd"} for b in range(1, n_brokers + 1)},
            placement=(PlacementRule("t00[0-9]", require_tags={"tier": "hdd"}), PlacementRule("t01[0-4]", frozen=True)),
        )
        if rules
        else Constraints()
    )
    prepared_b, prepared = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(prepared_b, c)
    built = []

    def index_checked(assignment, view, placement=None, matrix=None):
        built.append(matrix is not None and np.array_equal(matrix, replica_matrix(assignment)))
        return _ReplicaIndex(assignment, view, placement, matrix)

    monkeypatch.setattr(balance, "_ReplicaIndex", index_checked)
    live = prepared["current"].tolist()
    plan = keep_valid_each([list(r) for r in prepared["preferred"]], prepared["rf"].tolist(), view, even_out=True)
    placement = resolve_placement(c, prepared, view)
    settle(plan, prepared, view, since=live, take_first=prepared["size_bytes"].to_numpy(), placement=placement)
    assert built and all(built), built


@pytest.mark.parametrize(
    "kind, brokers_n, parts_n, seed",
    [("drifted", 12, 60, 1), ("racks_633", 10, 200, 1), ("broker_removed", 10, 200, 2), ("skewed", 10, 200, 3)],
)
def test_a_matrix_given_to_the_count_and_leader_balancing_follows_every_move(
    kind, brokers_n, parts_n, seed, monkeypatch
):
    # settle hands its matrix on (the count balancing, then the leaders); each move, of the bulk phase and of
    # the exact loop's index alike, must be made in it too, or the leaders are balanced on a stale layout
    brokers, parts = scenario(kind, brokers_n, parts_n, seed=seed)
    prepared_b, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_b, Constraints())
    plan = keep_valid_each(prepared["current"].tolist(), prepared["rf"].tolist(), view, even_out=True)
    matrix = replica_matrix(plan)
    index_moves = []
    move = _ReplicaIndex.move

    def counted_move(self, i, old, new):  # the real index move, noted
        index_moves.append(i)
        move(self, i, old, new)

    monkeypatch.setattr(_ReplicaIndex, "move", counted_move)
    sizes, topics = prepared["size_bytes"].to_numpy(), topic_codes(prepared)
    moves = balance_replica_counts(
        plan, view, sizes, topics, Usage(plan, sizes, view), live=prepared["current"].tolist(), matrix=matrix
    )
    assert moves > len(index_moves) > 0  # both the bulk phase and the exact loop moved replicas
    assert matrix.tolist() == replica_matrix(plan).tolist()
    assert balance.balance_leaders(plan, view, matrix=matrix) > 0
    assert matrix.tolist() == replica_matrix(plan).tolist()


def test_the_live_layout_is_listed_as_a_matrix_once_per_frame_and_only_for_its_own_rows():
    _, parts = scenario("drifted", 6, 40, seed=1)
    prepared = prepare_partitions(parts, Constraints())
    live = model.live_matrix(prepared)
    assert live.tolist() == replica_matrix(prepared["current"].tolist()).tolist()
    assert model.live_matrix(prepared) is live and not live.flags.writeable  # shared, so never changed in place
    # the frame's own rows (and, with no plan pending, its preferred ones, the same rows) get it; equal copies
    # and other frames get their own listing
    assert model.layout_matrix(prepared["current"].tolist(), prepared) is live
    assert model.layout_matrix(prepared["preferred"].tolist(), prepared) is live
    copies = [list(r) for r in prepared["current"]]
    assert model.layout_matrix(copies, prepared) is not live
    assert model.layout_matrix(copies, prepared).tolist() == live.tolist()
    other = prepared.assign(current=[r[::-1] for r in copies])  # a search's own layout as if executed
    assert model.live_matrix(other).tolist() == replica_matrix(other["current"].tolist()).tolist()
    # kept only while its frame lives
    key, alive = id(other), weakref.ref(other)
    assert key in model._FRAME_DERIVED
    del other
    gc.collect()
    assert alive() is None and key not in model._FRAME_DERIVED


def test_the_topic_rules_move_counts_of_a_layout_against_itself_are_none_and_span_as_listed():
    # a search judging the live layout as it stands gets the frame's shared live matrix on both sides: counted
    # at once as nothing, with the span the listing gives (the brokers the counts may be asked about)
    _, parts = scenario("drifted", 6, 40, seed=1)
    prepared = prepare_partitions(parts, Constraints())
    live, topics = model.live_matrix(prepared), topic_codes(prepared)
    shared, listed = topic_move_counts(live, live, topics, 3), topic_move_counts(live, live.copy(), topics, 3)
    assert (shared.span, shared.counts) == (listed.span, listed.counts) == (7, {})


def test_bulk_count_moves_take_each_donors_replicas_by_the_given_key_lowest_first():
    # broker 1 holds 5 (share 2.5), broker 2 none: it gives 2, the lowest keys first (partition order without)
    view = ClusterView.from_brokers(prepare_brokers(brokers_frame([1, 2], ["a", "a"]), Constraints()), Constraints())
    key = np.array([3.0, 1.0, 5.0, 2.0, 4.0])
    for take_first, moved in ((None, {0, 1}), (key, {1, 3}), (-key, {2, 4})):
        plan = [[1] for _ in range(5)]
        assert balance_replica_counts(plan, view, take_first=take_first) == 2
        assert {i for i, r in enumerate(plan) if r == [2]} == moved


@settings(max_examples=40, deadline=None)
@given(cluster=random_clusters(max_brokers=9, max_rf=4))
def test_property_settle_probed_for_any_change_answers_as_the_full_settle(cluster):
    # the probe stops at the first replica the count balancing moves; asked of a legal layout and of the
    # layout settled once more (which a second settle leaves as it is, or moves again), it must agree with
    # comparing a full settle's result to the layout
    brokers, parts = cluster
    prepared_b, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_b, Constraints())
    assume(len(view.eligible) >= int(prepared["rf"].max()))
    since = prepared["current"].tolist()
    layout = keep_valid_each([list(r) for r in since], prepared["rf"].tolist(), view)
    for _ in range(2):
        settled = [list(r) for r in layout]
        settle(settled, prepared, view, since)
        assert settles_as_it_is(layout, prepared, view, since) == (settled == layout)
        layout = settled


def test_settle_probed_on_a_drifted_and_a_settled_layout():
    # drifted/12/1000/0: the count balancing moves hundreds of replicas; once settled, nothing
    brokers, parts = scenario("drifted", 12, 1000, seed=0)
    prepared_b, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_b, Constraints())
    since = prepared["current"].tolist()
    settled = [list(r) for r in since]
    settle(settled, prepared, view, since)
    assert sum(a != b for a, b in zip(settled, since)) > 100
    assert not settles_as_it_is(since, prepared, view, since)
    assert settles_as_it_is(settled, prepared, view, since)


def zipf_cluster(n_brokers: int, n_racks: int, n_parts: int, a: float, seed: int = 7, ranked: bool = False):
    rng = np.random.default_rng(seed)
    brokers = brokers_frame(list(range(1, n_brokers + 1)), racks=[f"r{i % n_racks}" for i in range(n_brokers)])
    current = [rng.choice(np.arange(1, n_brokers + 1), 3, replace=False).tolist() for _ in range(n_parts)]
    if ranked:
        loads = rng.permutation(1e6 / np.arange(1, n_parts + 1) ** a)
    else:
        loads = rng.zipf(a, n_parts).astype(float)
        loads = np.minimum(loads, np.quantile(loads, 0.999))  # Zipf(1.1) has no mean: clip the 0.1% monster tail
    return brokers, partitions_frame(
        current, [f"t{i % 100}" for i in range(n_parts)], [i // 100 for i in range(n_parts)], bytes_in=loads.tolist()
    )


@pytest.mark.parametrize("ranked", [False, True], ids=["sampled-heavy-tail", "rank-popularity"])
def test_lpt_reaches_the_load_bound_within_2_percent_on_a_zipf_cluster(ranked):
    # Sampled Zipf(1.1) clipped at its 99.9% quantile is the hard case: the biggest leaders weigh
    # about as much as a whole broker's share. Rank popularity (load ~ 1/rank^1.1) is the usual reading.
    brokers, parts = zipf_cluster(50, 5, 10_000, 1.1, ranked=ranked)
    result = plan("lpt", brokers, parts)
    assert result.status == COMMITTED and result.metrics is not None
    before = result.metrics.max_load_before / result.metrics.load_lower_bound
    after = result.metrics.max_load_after / result.metrics.load_lower_bound
    assert after <= 1.02 < before, (before, after)
    assert_valid(brokers, parts, result.planned, Constraints())


def test_lpt_skips_a_cluster_already_within_the_ratio():
    brokers = brokers_frame([1, 2, 3], racks=["a", "b", "c"])
    parts = partitions_frame([[1, 2, 3], [2, 3, 1], [3, 1, 2]], bytes_in=[5.0, 5.0, 5.0])
    result = plan("lpt", brokers, parts)
    assert result.status == SKIPPED and "already balanced enough" in result.notes[-1]


# -- movement ------------------------------------------------------------------------


def replan(strategy, brokers, parts, planned):
    """Plan again once ``planned`` was executed (it is the live layout and the plan in force)."""
    request = PlanRequest("c1", strategy, has_previous_plan=True, previous_partitions=len(parts))
    return plan_cluster(brokers, executed(parts, planned), request)


def moved(before, after) -> list[tuple[int, set[int], set[int]]]:
    """(row, removed, added) of every partition whose replica set changed (frames in planned order)."""
    return [(i, set(b) - set(a), set(a) - set(b)) for i, (b, a) in enumerate(zip(before, after)) if set(a) != set(b)]


@pytest.mark.parametrize("strategy", ["sticky", "consistent_hash", "rendezvous"])
def test_replanning_an_unchanged_cluster_moves_nothing(strategy):
    brokers, parts = zipf_cluster(12, 3, 600, 1.5)
    first = plan(strategy, brokers, parts)
    again = replan(strategy, brokers, parts, first.planned)
    assert again.status == SKIPPED and again.metrics.moves == 0 and again.metrics.leader_moves == 0


def test_sticky_after_adding_empty_brokers_moves_only_onto_them():
    brokers, parts = zipf_cluster(9, 3, 900, 1.5)
    base = plan("sticky", brokers, parts).planned
    grown = brokers_frame(list(range(1, 13)), racks=[f"r{i % 3}" for i in range(12)])
    after = replan("sticky", grown, parts, base).planned
    changes = moved(base["replicas"], after["replicas"])
    assert changes and all(added <= {10, 11, 12} for _, _, added in changes)
    counts = Counter(b for r in after["replicas"] for b in r)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_sticky_after_a_broker_dies_moves_its_replicas_plus_balancing_only():
    brokers, parts = zipf_cluster(12, 3, 900, 1.5)
    base = plan("sticky", brokers, parts)
    dead = brokers.assign(state=["dead" if b == 5 else "active" for b in brokers["broker_id"]])
    after = replan("sticky", dead, parts, base.planned)
    held = sum(5 in r for r in base.planned["replicas"])
    assert after.metrics.moves <= held * 1.05 + 2
    for _, removed, _ in moved(base.planned["replicas"], after.planned["replicas"]):
        assert removed == {5} or 5 not in removed  # partitions that lost 5 lost only 5


def test_sticky_moves_within_5_percent_of_the_bound_and_keeps_a_replica_everywhere():
    rng = np.random.default_rng(3)
    brokers = brokers_frame(list(range(1, 16)), racks=[f"r{i % 3}" for i in range(15)])
    hot = [1, 2, 3, 4, 5, 6]  # an imbalanced but rack-valid start: most replicas on 6 brokers
    current = []
    for _ in range(1500):
        pool = hot if rng.random() < 0.8 else list(range(1, 16))
        by_rack = {r: [b for b in pool if (b - 1) % 3 == r] or [r + 1] for r in range(3)}
        current.append([int(rng.choice(by_rack[r])) for r in rng.permutation(3)])
    parts = partitions_frame(current, [f"t{i % 40}" for i in range(1500)], [i // 40 for i in range(1500)])
    result = plan("sticky", brokers, parts)
    bound = minimum_moves(
        current, np.full(1500, 3), ClusterView.from_brokers(prepare_brokers(brokers, Constraints()), Constraints())
    )
    assert result.metrics.min_moves == bound > 0
    assert result.metrics.moves <= 1.05 * bound, (result.metrics.moves, bound)
    before = dict(zip(zip(parts["topic"], parts["partition"]), current))
    after = zip(result.planned["topic"], result.planned["partition"], result.planned["replicas"])
    assert all(set(before[(t, p)]) & set(reps) for t, p, reps in after)
    assert result.metrics.replica_spread_after <= 1


# -- hashing -------------------------------------------------------------------------


def test_consistent_hash_shares_within_ten_percent_of_weight():
    weights = [1.0] * 10 + [2.0] * 10
    brokers = brokers_frame(list(range(1, 21)), racks=[None] * 20, weights=weights)
    parts = partitions_frame([[1, 2, 3]] * 6000, [f"t{i % 60}" for i in range(6000)], [i // 60 for i in range(6000)])
    result = plan("consistent_hash", brokers, parts, Constraints(rack_aware=False))
    counts = Counter(b for r in result.planned["replicas"] for b in r)
    total = 6000 * 3
    for b, w in zip(range(1, 21), weights):
        share = total * w / sum(weights)
        assert abs(counts[b] - share) <= 0.10 * share, (b, counts[b], share)


@pytest.mark.parametrize("strategy", ["consistent_hash", "rendezvous"])
def test_one_broker_join_or_leave_moves_about_one_nth(strategy):
    n = 20
    brokers = brokers_frame(list(range(1, n + 1)), racks=[f"r{i % 4}" for i in range(n)])
    parts = partitions_frame([[1, 2, 3]] * 4000, [f"t{i % 50}" for i in range(4000)], [i // 50 for i in range(4000)])
    base = plan(strategy, brokers, parts).planned
    joined = brokers_frame(list(range(1, n + 2)), racks=[f"r{i % 4}" for i in range(n + 1)])
    left = brokers.assign(state=["dead" if b == 7 else "active" for b in brokers["broker_id"]])
    for cluster, size in ((joined, n + 1), (left, n)):
        after = replan(strategy, cluster, parts, base)
        assert after.metrics.moves <= 1.2 / size * 4000 * 3, (after.metrics.moves, size)


def test_lpt_relabels_interchangeable_brokers_back_onto_the_baseline():
    from assigners.lpt import relabel_towards

    brokers = prepare_brokers(brokers_frame([1, 2, 3, 4, 5, 6], racks=["a", "a", "b", "b", "c", "c"]), Constraints())
    view = ClusterView.from_brokers(brokers, Constraints())
    baseline = [[1, 3, 5], [2, 4, 6], [1, 4, 5], [2, 3, 6]]
    swap = {1: 2, 2: 1, 3: 4, 4: 3}  # same racks and weights: the plan is as good either way
    target = [[swap.get(b, b) for b in reps] for reps in baseline]
    relabel_towards(target, baseline, view)
    assert target == baseline
    # brokers of different racks are never exchanged
    cross = [[3, 1, 5], [4, 2, 6]]
    relabel_towards(cross, [[1, 3, 5], [2, 4, 6]], view)
    assert [sorted(view.domain_of[b] for b in reps) for reps in cross] == [["a", "b", "c"]] * 2


def test_strategy_options_change_what_lpt_skips_and_how_far_the_ring_walks():
    brokers = brokers_frame([1, 2, 3], racks=["a", "b", "c"])
    parts = partitions_frame([[1, 2, 3], [1, 2, 3], [2, 3, 1]], bytes_in=[5.0, 5.0, 5.0])
    assert plan("lpt", brokers, parts).status == COMMITTED  # broker 1 leads twice: max/min load 2 > 1.5
    lenient = plan_cluster(brokers, parts, PlanRequest("c1", "lpt", Constraints(lpt_skip_ratio=3.0)))
    assert lenient.status == SKIPPED
    brokers, parts = zipf_cluster(20, 4, 2_000, 1.5)
    counts = {}
    for eps in (None, 0.02):
        result = plan_cluster(
            brokers, parts, PlanRequest("c1", "consistent_hash", Constraints(bounded_load_epsilon=eps))
        )
        count = Counter(int(b) for reps in result.planned["replicas"] for b in reps)
        counts[eps] = max(count.values()) / (sum(count.values()) / len(count))
    assert counts[0.02] <= 1.03 < counts[None], counts


@pytest.mark.parametrize("strategy", ALL)
def test_tight_but_feasible_replica_caps_never_fail(strategy):
    # 30 brokers over 10 racks, 3000 partitions x RF 3: 300 replicas each, cap 303 (1% headroom)
    rng = np.random.default_rng(5)
    ids = list(range(1, 31))
    brokers = brokers_frame(ids, racks=[f"r{i % 10}" for i in range(30)]).assign(max_partitions=[303] * 30)
    current = [rng.choice(ids, 3, replace=False).tolist() for _ in range(3000)]
    loads = rng.permutation(1e6 / np.arange(1, 3001) ** 1.1).tolist()  # heavy head, long light tail
    parts = partitions_frame(current, [f"t{i % 60}" for i in range(3000)], [i // 60 for i in range(3000)], loads)
    result = plan(strategy, brokers, parts, Constraints(lpt_skip_ratio=1.0))
    assert result.status == COMMITTED, result.error
    assert_valid(brokers, parts, result.planned, Constraints())


def test_sticky_evens_out_load_by_same_role_swaps_keeping_counts():
    # counts already even (3 leaders + 3 followers per broker), but every heavy partition sits on brokers 1 and 2
    brokers = brokers_frame(list(range(1, 9)), racks=[f"r{i % 4}" for i in range(8)])
    pairs = [[1, 2], [2, 1], [3, 4], [4, 3], [5, 6], [6, 5], [7, 8], [8, 7]] * 3
    loads = [40.0 if set(p) == {1, 2} else 1.0 for p in pairs]
    parts = partitions_frame(pairs, [f"t{i}" for i in range(24)], [0] * 24, loads)
    result = plan("sticky", brokers, parts)
    assert result.status == COMMITTED, result.error
    m = result.metrics
    assert m.max_load_before > 1.1 * m.load_lower_bound >= m.max_load_after
    assert m.replica_spread_after == 0 and m.leader_spread_after == 0
    assert_valid(brokers, parts, result.planned, Constraints())
    again = plan_cluster(brokers, executed(parts, result.planned), PlanRequest("c1", "sticky", has_previous_plan=True))
    assert again.metrics.moves == 0  # the balanced result is stable


def test_sticky_reverts_a_load_pass_that_cannot_reach_the_goal():
    # RF 3 over 3 racks pins every partition to one broker per rack, and broker 1 leads all heavy
    # partitions: swaps can spread them inside rack r0 but never the rack's load, so the goal
    # (max load within 10% of the bound) stays out of reach and the swaps are not worth their moves
    brokers = brokers_frame(list(range(1, 10)))
    layout = [[1 + (p % 3) * 3, 2 + ((p // 3) % 3) * 3, 3 + ((p // 9) % 3) * 3] for p in range(27)] * 4
    loads = [50.0 if 1 in r else 1.0 for r in layout]
    parts = partitions_frame(layout, [f"t{i}" for i in range(108)], [0] * 108, loads)
    result = plan("sticky", brokers, parts)
    m = result.metrics
    assert m.max_load_after > 1.1 * m.load_lower_bound
    assert m.moves == 0 and m.replica_spread_after == 0


def test_load_swaps_never_exchange_two_replicas_of_one_topic():
    # the swap that evens the load would move topic "t" 1->5 in one partition and 5->1 in another
    brokers = brokers_frame(list(range(1, 9)), racks=[f"r{i % 4}" for i in range(8)])
    pairs = [[1, 2], [2, 1], [3, 4], [4, 3], [5, 6], [6, 5], [7, 8], [8, 7]] * 3
    loads = [40.0 if set(p) == {1, 2} else 1.0 for p in pairs]
    constraints = Constraints()
    prepared = prepare_partitions(partitions_frame(pairs, ["t"] * 24, list(range(24)), loads), constraints)
    view = ClusterView.from_brokers(prepare_brokers(brokers, constraints), constraints)

    def polished(topics):
        replicas = [list(r) for r in prepared["preferred"]]
        usage = Usage(replicas, prepared["size_bytes"].to_numpy(), view)
        lead, follow = prepared["leader_load"].to_numpy(), prepared["follower_load"].to_numpy()
        return polish_load(replicas, lead, follow, usage, swaps_only=True, topics=topics)

    one_topic = np.zeros(24, dtype=np.int64)
    assert polished(None) < polished(one_topic) == 60.0  # only cross-topic swaps would help; there are none


def _leaders_evened_one_search_per_source(assignment, view, frozen):
    """The leader balancing as it searched before the failed searches were shared (the spec the shared ones
    must answer as): after the bulk and flow passes, each top broker in turn searched on its own."""
    led = {b: {} for b in view.eligible}
    for i, replicas in enumerate(assignment):
        if replicas and replicas[0] in led:
            led[replicas[0]][i] = None
    matrix = replica_matrix(assignment)
    changes = balance._bulk_leader_changes(assignment, led, frozen, matrix) + balance._flow_leader_changes(
        assignment, led, frozen, matrix
    )
    assert matrix.tolist() == replica_matrix(assignment).tolist()  # the passes keep their matrix in step
    while True:
        ordered = sorted(led, key=lambda b: (-len(led[b]), b))
        top = len(led[ordered[0]])
        if top - len(led[ordered[-1]]) <= 1:
            return changes
        path = next(
            (p for b in ordered if len(led[b]) == top if (p := balance._leader_path(assignment, led, b, top, frozen))),
            None,
        )
        if not path:
            return changes
        for i, new_leader in path:
            del led[assignment[i][0]][i]
            assignment[i].remove(new_leader)
            assignment[i].insert(0, new_leader)
            led[new_leader][i] = None
            changes += 1


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 100_000), brokers=st.integers(4, 12), pinned=st.floats(0.0, 0.6))
@example(seed=3, brokers=10, pinned=0.3)
def test_leader_balancing_shares_its_failed_searches_and_hands_over_as_one_search_per_broker_did(seed, brokers, pinned):
    # brokers a failed search reached cannot reach a light broker either, so the next top broker among them is
    # not searched again and the others' searches skip them, and a top broker's single hand-overs are read past
    # the partitions it leads that had no light follower before (balance._handed_on): the same hand-overs,
    # from a pinned layout (a share of the partitions' leaders fixed, many tops with no way down) as from a
    # loose one
    rng = np.random.default_rng(seed)
    ids = list(range(1, brokers + 1))
    view = ClusterView.from_brokers(prepare_brokers(brokers_frame(ids, ["a"] * brokers), Constraints()), Constraints())
    heavy = rng.permutation(ids)[: max(1, brokers // 3)]  # leaders crowd on a few brokers
    assignment = []
    for _ in range(int(rng.integers(20, 300))):
        rf = int(rng.integers(1, min(4, brokers) + 1))
        lead = int(rng.choice(heavy)) if rng.random() < 0.7 else int(rng.choice(ids))
        followers = [int(b) for b in rng.permutation([b for b in ids if b != lead])[: rf - 1]]
        assignment.append([lead, *followers])
    frozen = {i for i in range(len(assignment)) if rng.random() < pinned}
    expected = [list(r) for r in assignment]
    changes = balance.balance_leaders(assignment, view, frozenset(frozen))
    assert changes == _leaders_evened_one_search_per_source(expected, view, frozenset(frozen))
    assert assignment == expected


def _handed_over_in_one_pass(assignment, eligible, frozen):
    """The bulk hand-over as a plain loop (the spec): every partition in order whose leader sits above the
    ceiling of the average passes its leadership to its first follower below the floor."""
    led = {b: sum(1 for r in assignment if r and r[0] == b) for b in eligible}
    average = sum(led.values()) / len(led)
    high, low = math.ceil(average), math.floor(average)
    changes = 0
    for i, replicas in enumerate(assignment):
        leader = replicas[0] if replicas else None
        if leader not in led or i in frozen or led[leader] <= high:
            continue
        taker = next((b for b in replicas[1:] if b in led and led[b] < low), None)
        if taker is not None:
            replicas.remove(taker)
            replicas.insert(0, taker)
            led[leader], led[taker], changes = led[leader] - 1, led[taker] + 1, changes + 1
    return changes


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), brokers=st.integers(3, 12), pinned=st.floats(0.0, 0.6))
@example(seed=7, brokers=9, pinned=0.2)
def test_the_bulk_leader_hand_over_asks_only_partitions_that_can_hand_over_and_hands_over_as_the_loop(
    seed, brokers, pinned
):
    # the pass asks only partitions led from above the ceiling with a follower below the floor, and keeps the
    # brokers still giving and taking as sets: the same hand-overs as the loop over every partition
    rng = np.random.default_rng(seed)
    ids = list(range(1, brokers + 1))
    heavy = rng.permutation(ids)[: max(1, brokers // 3)]
    assignment = []
    for _ in range(int(rng.integers(5, 400))):
        rf = int(rng.integers(1, min(4, brokers) + 1))
        lead = int(rng.choice(heavy)) if rng.random() < 0.8 else int(rng.choice(ids))
        assignment.append([lead, *[int(b) for b in rng.permutation([b for b in ids if b != lead])[: rf - 1]]])
    frozen = frozenset(i for i in range(len(assignment)) if rng.random() < pinned)
    expected = [list(r) for r in assignment]
    spec_changes = _handed_over_in_one_pass(expected, ids, frozen)
    matrix = replica_matrix(assignment)
    led = balance._led_by_broker(matrix[:, 0], ids)
    assert balance._bulk_leader_changes(assignment, led, frozen, matrix) == spec_changes
    assert assignment == expected
    assert matrix.tolist() == replica_matrix(expected).tolist()
