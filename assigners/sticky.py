"""Sticky, minimal-movement placement (StreamBus sticky, Kafka KIP-54 semantics).

Start from the baseline (the plan in force, else the live layout) and change
only what must change or what evens out the brokers:

1. keep each partition's baseline replicas that may stay (eligible brokers,
   the first RF of them, racks still reachable);
2. drop replicas from brokers above a cap;
3. refill missing replicas on the emptiest legal brokers;
4. move replicas from the fullest to the emptiest brokers (per weight) while
   that strictly evens them out; never A->B and B->A for one topic;
5. balance leaders by reordering replicas (no data moves).

A cluster already balanced and legal is returned unchanged, so re-planning
moves nothing. Balanced means: replica counts per weight cannot be evened
further by one legal move (with equal weights: max - min <= 1, or no legal
move left).
"""

from __future__ import annotations

import pandas as pd

from assigners.balance import settle
from assigners.model import ClusterView, Constraints, assignment_frame
from assigners.placement import keep_valid, replica_pressure


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
    baseline = partitions["baseline"].tolist()
    pressure = replica_pressure(baseline, view)
    replicas = [keep_valid(list(base), int(r), view, pressure) for base, r in zip(baseline, rf.tolist())]
    settle(replicas, partitions, view)
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)
