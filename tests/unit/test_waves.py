"""Execution waves, as the spec: caps hold, urgent partitions first, leader-only changes last, and no more
waves than the caps force plus one (``assigners.waves``).

The checks read the planner's move rows and recompute every figure themselves: the brokers a move touches,
its urgency (a replica taken off a dead / draining / excluded broker; fewer live replicas than the target),
and the waves the caps force.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assigners import COMMITTED, Constraints, PlanRequest, plan_cluster
from assigners.waves import ORDINARY, WaveCaps, assign_waves
from tests.unit.clusters import brokers_frame, partitions_frame, random_clusters
from tests.unit.scenarios import scenario

caps_strategy = st.builds(
    WaveCaps,
    max_moves_per_broker=st.integers(2, 8),
    max_moves_per_wave=st.none() | st.integers(1, 40),
    max_leader_moves_per_wave=st.integers(1, 20),
    max_bytes_per_wave=st.none() | st.integers(1_000, 60_000),
    move_order=st.sampled_from(["small_first", "large_first"]),
)


def moves_of(planned: pd.DataFrame, brokers: pd.DataFrame, constraints: Constraints) -> pd.DataFrame:
    """The move rows with what the checks need: touched brokers, data or leader-only, urgency phase."""
    moves = planned[planned["kind"].notna()].copy()
    emptied = {
        int(b)
        for b, s in zip(brokers["broker_id"], brokers["state"])
        if s != "active" or int(b) in constraints.excluded_brokers
    }
    moves["touched"] = [set(a) | set(r) for a, r in zip(moves["added_brokers"], moves["removed_brokers"])]
    moves["data"] = moves["touched"].map(bool)
    moves["phase"] = [
        0 if set(r) & emptied else 1 if len(f) < len(t) else 2
        for r, f, t in zip(moves["removed_brokers"], moves["from_replicas"], moves["replicas"])
    ]
    return moves


def forced_waves(moves: pd.DataFrame, caps: WaveCaps) -> int:
    """What the caps force on these data moves: busiest broker / cap, moves / wave cap, bytes / byte cap."""
    if moves.empty:
        return 0
    per_broker = Counter(b for touched in moves["touched"] for b in touched)
    forced = -(-max(per_broker.values()) // caps.max_moves_per_broker)
    if caps.max_moves_per_wave:
        forced = max(forced, -(-len(moves) // caps.max_moves_per_wave))
    if caps.max_bytes_per_wave:
        sizes = moves["bytes_to_move"]
        big = int((sizes > caps.max_bytes_per_wave / 2).sum())  # no two of them fit one wave
        forced = max(forced, -(-int(sizes.sum()) // caps.max_bytes_per_wave), big)
    return forced


def check_waves(moves: pd.DataFrame, caps: WaveCaps) -> None:
    data, leader_only = moves[moves["data"]], moves[~moves["data"]]
    waves = sorted(set(moves["wave"]))
    assert waves == list(range(1, len(waves) + 1)), "waves are numbered 1, 2, ... without gaps"
    for wave, rows in data.groupby("wave") if len(data) else ():
        per_broker = Counter(b for touched in rows["touched"] for b in touched)
        assert max(per_broker.values()) <= caps.max_moves_per_broker, (wave, per_broker)
        assert caps.max_moves_per_wave is None or len(rows) <= caps.max_moves_per_wave
        assert (
            caps.max_bytes_per_wave is None or len(rows) == 1 or rows["bytes_to_move"].sum() <= caps.max_bytes_per_wave
        )
    assert (
        leader_only["wave"].value_counts().max(skipna=True) <= caps.max_leader_moves_per_wave
        if len(leader_only)
        else True
    )
    last_data = int(data["wave"].max()) if len(data) else 1
    assert leader_only.empty or leader_only["wave"].min() == last_data, "leader-only changes go into the last data wave"
    assert len(leader_only) == 0 or leader_only["wave"].max() - last_data + 1 == -(
        -len(leader_only) // caps.max_leader_moves_per_wave
    )
    phases = sorted(set(data["phase"]))
    for earlier, later in pairwise(phases):
        assert data.loc[data["phase"] == earlier, "wave"].max() <= data.loc[data["phase"] == later, "wave"].min()
    for phase in phases:
        rows = data[data["phase"] == phase]
        span = int(rows["wave"].max() - rows["wave"].min() + 1)
        assert span <= forced_waves(rows, caps) + 1, (phase, span, forced_waves(rows, caps))


@settings(max_examples=60, deadline=None)
@given(
    cluster=random_clusters(max_brokers=10, max_rf=4),
    caps=caps_strategy,
    strategy=st.sampled_from(["balanced", "sticky"]),
)
@example(cluster=scenario("broker_removed", 12, 200, seed=1), caps=WaveCaps(), strategy="balanced")
@example(cluster=scenario("broker_added", 9, 120, seed=2), caps=WaveCaps(max_moves_per_broker=2), strategy="balanced")
def test_waves_respect_caps_urgency_and_count(cluster, caps, strategy):
    brokers, parts = cluster
    constraints = Constraints()
    result = plan_cluster(brokers, parts, PlanRequest("c", strategy=strategy, constraints=constraints, wave_caps=caps))
    if result.status != COMMITTED:
        return
    moves = moves_of(result.planned, brokers, constraints)
    if moves.empty:
        assert result.metrics.waves == 0
        return
    check_waves(moves, caps)
    assert result.metrics.waves == (int(moves["wave"].max()) if len(moves) else 0)


def test_a_dead_broker_is_emptied_first_and_leader_changes_come_last():
    brokers = brokers_frame([1, 2, 3, 4], racks=[None] * 4, states=["active", "active", "active", "dead"])
    replicas = [[4, 1], [1, 2], [1, 3], [2, 1], [1, 2], [1, 3]] * 3
    parts = partitions_frame(replicas, topics=[f"t{i}" for i in range(18)], numbers=[0] * 18)
    result = plan_cluster(
        brokers, parts, PlanRequest("c", strategy="balanced", wave_caps=WaveCaps(max_moves_per_broker=1))
    )
    moves = moves_of(result.planned, brokers, Constraints())
    urgent = moves[moves["phase"] == 0]
    assert len(urgent) == 3 and (moves["phase"] == 2).any()
    check_waves(moves, WaveCaps(max_moves_per_broker=1))
    assert urgent["wave"].max() <= moves.loc[moves["phase"] == 2, "wave"].min()


def test_the_wave_caps_reach_the_plan_from_config_and_change_its_run():
    from jobs.config import parse_config

    config = parse_config({"planner": {"execution": {"max_moves_per_broker": 2, "max_bytes_per_wave": 10**9}}})
    assert config.execution.waves == WaveCaps(max_moves_per_broker=2, max_bytes_per_wave=10**9)
    legacy = parse_config({"planner": {"wave_broker_limit": 3}})
    assert legacy.execution.waves.max_moves_per_broker == 3
    assert parse_config({}).cluster_hash("c") != legacy.cluster_hash("c")


def test_ordinary_moves_go_smallest_first_or_largest_first_as_configured():
    touched = np.array([[1, 2], [1, 3], [1, 4], [1, 5], [1, 6], [1, 7]])
    sizes = np.array([50, 10, 60, 20, 40, 30])
    has_move, phase = np.ones(6, bool), np.full(6, ORDINARY)
    small = assign_waves(touched, has_move, sizes, phase, WaveCaps(max_moves_per_broker=2))
    large = assign_waves(touched, has_move, sizes, phase, WaveCaps(max_moves_per_broker=2, move_order="large_first"))
    assert small.tolist() == [3, 1, 3, 1, 2, 2]
    assert large.tolist() == [1, 3, 1, 3, 2, 2]


def test_a_byte_cap_splits_waves_and_a_move_bigger_than_it_goes_alone():
    touched = np.array([[1, 2], [3, 4], [5, 6], [7, 8]])
    sizes = np.array([70, 40, 30, 500])
    waves = assign_waves(touched, np.ones(4, bool), sizes, np.full(4, ORDINARY), WaveCaps(max_bytes_per_wave=100))
    assert waves.tolist() == [2, 1, 1, 3]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    per_broker=st.integers(1, 6),
    move_order=st.sampled_from(["small_first", "large_first"]),
)
@example(seed=0, per_broker=5, move_order="small_first")  # the default caps
def test_the_broker_cap_alone_packs_as_every_cap_does_when_the_others_never_bind(seed, per_broker, move_order):
    # under the default caps (a per-broker cap alone) first fit takes a path without the per-wave counts and
    # bytes: it packs each phase as the general path does with a wave cap and a byte cap too large to bind
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    touched = np.sort(rng.choice(np.arange(1, 13), size=(n, 4)), axis=1)
    touched[rng.random((n, 4)) < 0.3] = -1  # one to four brokers a move; all padding: a leader-only change
    has_move = rng.random(n) < 0.9
    sizes = rng.integers(1, 1_000, n)
    phase = rng.choice([0, 1, ORDINARY], size=n, p=[0.1, 0.1, 0.8])
    alone = WaveCaps(max_moves_per_broker=per_broker, move_order=move_order)
    loose = WaveCaps(per_broker, max_moves_per_wave=10**9, max_bytes_per_wave=10**15, move_order=move_order)
    assert assign_waves(touched, has_move, sizes, phase, alone).tolist() == (
        assign_waves(touched, has_move, sizes, phase, loose).tolist()
    )
