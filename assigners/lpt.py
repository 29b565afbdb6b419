"""Throughput-weighted longest-processing-time-first placement (SkyWalking's LPT rebalancer).

Replica load: a leader carries bytes_in + bytes_out, a follower bytes_in
(DESIGN.md; weights in :mod:`assigners.model`). Partitions go in order of
load, heaviest first; each replica goes to the legal broker with the least
load relative to its weight (leader first, then followers), under the rack
rule and the caps. Then leadership is handed, partition by partition from
the heaviest, to the replica whose broker carries the least leader load.

As in SkyWalking, a cluster whose brokers are already within
``LPT_SKIP_RATIO`` (max/min load per weight) is left as it is and reported
``skipped``; partitions with zero load keep their baseline placement when it
is legal.
"""

from __future__ import annotations

import heapq

import numpy as np
import pandas as pd

from assigners.metrics import broker_table, replica_loads
from assigners.model import SKIP_REASON, ClusterView, Constraints, assignment_frame
from assigners.placement import Usage, keep_valid, pop_legal

LPT_SKIP_RATIO = 1.5


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """LPT over replica loads; skips a cluster already within the ratio."""
    view = ClusterView.from_brokers(brokers, constraints)
    bytes_in = partitions["bytes_in"].to_numpy(dtype=float)
    bytes_out = partitions["bytes_out"].to_numpy(dtype=float)
    baseline = [list(b) for b in partitions["baseline"]]
    ratio = _load_ratio(baseline, bytes_in, bytes_out, brokers)
    legal = all(keep_valid(b, int(r), view) == b for b, r in zip(baseline, partitions["rf"].tolist()))
    if legal and ratio < LPT_SKIP_RATIO and not view.has_caps:
        frame = assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), baseline)
        frame.attrs[SKIP_REASON] = f"broker load max/min {ratio:.2f} < {LPT_SKIP_RATIO}: already balanced enough"
        return frame
    leader_load, follower_load = replica_loads(bytes_in, bytes_out)
    rf = partitions["rf"].to_numpy()
    usage = Usage([], partitions["size_bytes"].to_numpy(), view)
    load = dict.fromkeys(view.eligible, 0.0)
    replicas: list[list[int]] = [[] for _ in range(len(partitions))]
    total = leader_load + (rf - 1) * follower_load
    # zero-load partitions keep their (legal) baseline and are placed first, so they count as load 0
    for i in np.flatnonzero(total == 0).tolist():
        kept = keep_valid(baseline[i], int(rf[i]), view)
        if len(kept) == rf[i] and all(usage.room_for(i, b) for b in kept):
            replicas[i] = kept
            for b in kept:
                usage.add(i, b)
    heap = [(0.0, b) for b in view.eligible]
    heapq.heapify(heap)
    for i in np.lexsort((np.arange(len(total)), -total)).tolist():
        while len(replicas[i]) < rf[i]:
            amount = leader_load[i] if not replicas[i] else follower_load[i]
            b = pop_legal(heap, load.__getitem__, i, replicas[i], int(rf[i]), usage)
            replicas[i].append(b)
            usage.add(i, b)
            load[b] += amount / view.weight_of[b]
            heapq.heappush(heap, (load[b], b))
    _balance_leader_load(replicas, leader_load, follower_load, view)
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


def _load_ratio(
    assignment: list[list[int]], bytes_in: np.ndarray, bytes_out: np.ndarray, brokers: pd.DataFrame
) -> float:
    table = broker_table(assignment, bytes_in, bytes_out, brokers)
    loads = table.loc[table["eligible"], "load"]
    if not len(loads) or loads.max() == 0:
        return 1.0
    return float("inf") if loads.min() == 0 else float(loads.max() / loads.min())


def _balance_leader_load(
    replicas: list[list[int]], leader_load: np.ndarray, follower_load: np.ndarray, view: ClusterView
) -> None:
    """Heaviest partitions first, lead from the replica whose broker ends up least loaded."""
    load = dict.fromkeys(view.eligible, 0.0)
    for i, reps in enumerate(replicas):
        for b in reps:
            load[b] += follower_load[i] / view.weight_of[b]
    for i in np.argsort(-leader_load, kind="stable").tolist():
        reps = replicas[i]
        extra = leader_load[i] - follower_load[i]
        if not reps or extra <= 0:
            continue
        best = min(reps, key=lambda b: (load[b] + extra / view.weight_of[b], b))
        load[best] += extra / view.weight_of[best]
        reps.remove(best)
        reps.insert(0, best)
