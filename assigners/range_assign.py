"""Per-topic range placement (StreamBus range, Kafka RangeAssignor).

Each topic's partitions are cut into contiguous ranges over the
rack-alternated broker list: floor(N/M) partitions per broker, the first
N mod M brokers one more. Unlike Kafka's RangeAssignor the starting broker
rotates per topic (a seeded stable hash of the topic), so the "+1" extras do
not always land on the lowest broker ids. Followers are the next brokers of
the list after the leader, skipping racks already used. Caps are then
honoured and the counts evened out like every strategy does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from assigners.balance import settle
from assigners.model import ClusterView, Constraints, Strategy, assignment_frame, stable_hash


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """Contiguous per-topic ranges, rotated per topic.

    Examples
    --------
    >>> from assigners.model import prepare_brokers, prepare_partitions
    >>> b = prepare_brokers(pd.DataFrame({"broker_id": [1, 2, 3], "rack": ["a", "b", "c"],
    ...     "state": ["active"] * 3}), Constraints())
    >>> p = prepare_partitions(pd.DataFrame({"topic": ["t"] * 4, "partition": [0, 1, 2, 3],
    ...     "replicas": [[1]] * 4}), Constraints())
    >>> [r[0] for r in assign(b, p, Constraints())["replicas"]]  # ranges of 2, 1, 1 from a rotated start
    [2, 2, 3, 1]
    """
    view = ClusterView.from_brokers(brokers, constraints)
    order = view.rack_alternated()
    if not order:
        return assignment_frame([], [], [])
    m = len(order)
    topics = partitions["topic"].to_numpy()
    rf = partitions["rf"].to_numpy()
    replicas: list[list[int]] = []
    for topic, rows in _topic_slices(topics):
        n = rows.stop - rows.start
        start = stable_hash("range.start", topic, seed) % m
        for j in range(n):
            first = (start + _range_index(j, n, m)) % m
            replicas.append(_followers(first, int(rf[rows.start + j]), order, view))
    settle(replicas, partitions, view)
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


def _topic_slices(topics: np.ndarray) -> list[tuple[str, slice]]:
    """(topic, rows) of each run of one topic (partitions are sorted by topic)."""
    if not len(topics):
        return []
    bounds = np.flatnonzero(topics[1:] != topics[:-1]) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(topics)]
    return [(str(topics[s]), slice(s, e)) for s, e in zip(starts, ends)]


def _range_index(j: int, n: int, m: int) -> int:
    """Which of ``m`` ranges partition ``j`` of ``n`` falls in (the first n mod m ranges are one longer)."""
    size, extra = divmod(n, m)
    cut = extra * (size + 1)
    return j // (size + 1) if j < cut else extra + (j - cut) // max(size, 1)


def _followers(first: int, rf: int, order: list[int], view: ClusterView) -> list[int]:
    """Leader ``order[first]``, then the next brokers of the list in unused racks (any rack once all are used)."""
    chosen = [order[first]]
    used = {view.domain_of[order[first]]}
    m = len(order)
    for relax in (False, True):
        for k in range(1, m):
            if len(chosen) >= rf:
                return chosen
            b = order[(first + k) % m]
            if b in chosen or (not relax and view.domain_of[b] in used and len(used) < view.n_domains):
                continue
            chosen.append(b)
            used.add(view.domain_of[b])
    return chosen


STRATEGY = Strategy("range", assign)
