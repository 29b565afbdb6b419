"""Sticky, minimal-movement placement (StreamBus sticky, Kafka KIP-54 semantics).

Start from the preferred layout (the plan in force, else the live one) and change
only what must change or what evens out the brokers:

1. keep each partition's baseline replicas that may stay (eligible brokers,
   the first RF of them, racks still reachable);
2. drop replicas from brokers above a cap;
3. refill missing replicas on the emptiest legal brokers;
4. move replicas from the fullest to the emptiest brokers (per weight) while
   that strictly evens them out; never A->B and B->A for one topic;
5. balance leaders by reordering replicas (no data moves);
6. when throughput is given and the most loaded broker is more than 10%
   above the load lower bound (the balance score's load goal), swap
   replicas of the same role between brokers (counts stay even) while each
   swap lowers that maximum. The pass is kept only if it meets the goal,
   i.e. raises the balance score; otherwise it is reverted.

A cluster already balanced and legal is returned unchanged, so re-planning
moves nothing. Balanced means: replica counts per weight cannot be evened
further by one legal move (with equal weights: max - min <= 1, or no legal
move left).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from assigners.balance import settle
from assigners.lpt import polish_load, replica_loads
from assigners.metrics import BALANCE_TOLERANCE, load_lower_bound
from assigners.model import (
    PAD,
    ClusterView,
    Constraints,
    Strategy,
    assignment_frame,
    pad_to,
    replica_matrix,
    row_contains,
    row_sum,
    topic_codes,
)
from assigners.placement import Usage, keep_valid, replica_pressure


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """Keep the baseline where legal, fill the gaps, then even out with the fewest moves.

    Examples
    --------
    >>> from assigners.model import prepare_brokers, prepare_partitions
    >>> b = prepare_brokers(pd.DataFrame({"broker_id": [1, 2, 3, 4], "rack": ["a", "b", "c", "a"],
    ...     "state": ["active", "active", "dead", "active"]}), Constraints())
    >>> p = prepare_partitions(pd.DataFrame({"topic": ["t"] * 2, "partition": [0, 1],
    ...     "replicas": [[1, 2], [3, 2]]}), Constraints())
    >>> assign(b, p, Constraints())["replicas"].tolist()  # only dead broker 3's replica moves; 2 now leads
    [[1, 2], [2, 4]]
    """
    view = ClusterView.from_brokers(brokers, constraints)
    rf = partitions["rf"].to_numpy()
    baseline = partitions["preferred"].tolist()
    pressure = replica_pressure(baseline, view)
    replicas = [keep_valid(list(base), int(r), view, pressure) for base, r in zip(baseline, rf.tolist())]
    settle(replicas, partitions, view, since=partitions["current"].tolist())
    _even_out_load(replicas, partitions, brokers, view)
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


def _even_out_load(
    replicas: list[list[int]], partitions: pd.DataFrame, brokers: pd.DataFrame, view: ClusterView
) -> None:
    """Step 6: same-role swaps towards the load goal, kept only when they reach it."""
    leader_load = partitions["leader_load"].to_numpy(dtype=float)
    follower_load = partitions["follower_load"].to_numpy(dtype=float)
    bound = load_lower_bound(leader_load, follower_load, partitions["rf"].to_numpy(), brokers)
    goal = (1 + BALANCE_TOLERANCE) * bound
    settled = replica_matrix(replicas)
    if bound <= 0 or replica_loads(settled, leader_load, follower_load, view)[-1].max(initial=0.0) <= goal:
        return
    before = [list(r) for r in replicas]
    usage = Usage(replicas, partitions["size_bytes"].to_numpy(), view)
    topics = topic_codes(partitions)
    reached = polish_load(replicas, leader_load, follower_load, usage, swaps_only=True, good_enough=goal, topics=topics)
    if reached <= goal:
        baseline = replica_matrix(partitions["preferred"].tolist())
        if _back_and_forth(baseline, replica_matrix(replicas), topics) <= _back_and_forth(baseline, settled, topics):
            return
    replicas[:] = before  # no better by the score, or it added an A->B / B->A pair: it would only cost moves


def _back_and_forth(baseline: np.ndarray, plan: np.ndarray, topics: np.ndarray) -> int:
    """How many single-replica changes move a topic A->B while another partition of it goes B->A.

    Only partitions that change one replica name a single A->B pair; that is
    every partition a swap touches. (Forced moves may already pair up that
    way; the swaps must not add any.)
    """
    width = max(baseline.shape[1], plan.shape[1])
    baseline, plan = pad_to(baseline, width), pad_to(plan, width)
    gone = (baseline != PAD) & ~row_contains(baseline, plan)
    new = (plan != PAD) & ~row_contains(plan, baseline)
    single = (row_sum(gone) == 1) & (row_sum(new) == 1)
    a = baseline[single][gone[single]]
    b = plan[single][new[single]]
    t = topics[single]
    span = int(max(baseline.max(initial=0), plan.max(initial=0))) + 1
    forward = (t * span + a) * span + b
    backward = (t * span + b) * span + a
    return int(np.isin(forward, backward).sum())


STRATEGY = Strategy("sticky", assign)
