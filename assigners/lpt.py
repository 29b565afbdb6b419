"""Throughput-weighted longest-processing-time-first placement (SkyWalking's LPT rebalancer).

Replica load: a leader carries bytes_in + bytes_out, a follower bytes_in
(DESIGN.md; weights in :mod:`assigners.model`). Partitions go in order of
load, heaviest first; each replica goes to the legal broker with the least
load relative to its weight (leader first, then followers), under the rack
rule and the caps. Then leadership is handed, partition by partition from
the heaviest, to the replica whose broker carries the least leader load.
Last, a local search works on the most loaded broker: move one of its
heaviest replicas, or swap it for a lighter replica of another broker,
whichever lowers the larger of the two loads most (LPT alone leaves one
broker a big item above the rest when a few partitions weigh about as much
as a whole broker).

LPT from scratch ignores where the data is. Brokers of one rack with the
same weight and caps are interchangeable, so their labels are permuted to
keep as many replicas as possible where the baseline has them (a maximum
weight assignment per class, :func:`relabel_towards`): loads, racks and
caps stay exactly as planned, and far fewer replicas move.

As in SkyWalking, a cluster whose brokers are already within
``Constraints.lpt_skip_ratio`` (max/min load per weight, default 1.5) is left as it is and reported
``skipped``; partitions with zero load keep their baseline placement when it
is legal.
"""

from __future__ import annotations

import heapq

import numpy as np
import pandas as pd

from assigners.errors import CapacityExhaustedError
from assigners.metrics import broker_table
from assigners.model import (
    PAD,
    SKIP_REASON,
    ClusterView,
    Constraints,
    Strategy,
    StrategyOption,
    assignment_frame,
    positions,
    replica_matrix,
)
from assigners.placement import Usage, keep_valid, may_replace, pop_legal, refill


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """LPT over replica loads; skips a cluster already within the ratio."""
    view = ClusterView.from_brokers(brokers, constraints)
    leader_load = partitions["leader_load"].to_numpy(dtype=float)
    follower_load = partitions["follower_load"].to_numpy(dtype=float)
    baseline = [list(b) for b in partitions["preferred"]]
    ratio = _load_ratio(baseline, leader_load, follower_load, brokers)
    legal = all(keep_valid(b, int(r), view) == b for b, r in zip(baseline, partitions["rf"].tolist()))
    skip_ratio = constraints.lpt_skip_ratio
    if legal and ratio < skip_ratio and not view.has_caps:
        frame = assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), baseline)
        frame.attrs[SKIP_REASON] = f"broker load max/min {ratio:.2f} < {skip_ratio}: already balanced enough"
        return frame
    rf = partitions["rf"].to_numpy()
    total = leader_load + (rf - 1) * follower_load
    sizes = partitions["size_bytes"].to_numpy()
    replicas, usage = _keep_zero_load(baseline, total, rf, sizes, view)
    try:
        load = dict.fromkeys(view.eligible, 0.0)
        _place_heaviest_first(replicas, total, leader_load.tolist(), follower_load.tolist(), rf.tolist(), usage, load)
    except CapacityExhaustedError:
        # Filling by load first can leave the last, lightest partitions no broker with room in the
        # racks they need when caps are tight. Place by count instead; the leader pass and the
        # polish below still even out the load.
        replicas, usage = _keep_zero_load(baseline, total, rf, sizes, view)
        refill(replicas, rf, usage)
    _balance_leader_load(replicas, leader_load, follower_load, view)
    polish_load(replicas, leader_load, follower_load, usage)
    relabel_towards(replicas, baseline, view)
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


def _keep_zero_load(
    baseline: list[list[int]], total: np.ndarray, rf: np.ndarray, sizes: np.ndarray, view: ClusterView
) -> tuple[list[list[int]], Usage]:
    """Zero-load partitions keep their legal baseline (placed first, they count as load 0); others start empty."""
    usage = Usage([], sizes, view)
    replicas: list[list[int]] = [[] for _ in range(len(baseline))]
    for i in np.flatnonzero(total == 0).tolist():
        kept = keep_valid(baseline[i], int(rf[i]), view)
        if len(kept) == rf[i] and all(usage.room_for(i, b) for b in kept):
            replicas[i] = kept
            for b in kept:
                usage.add(i, b)
    return replicas, usage


def _place_heaviest_first(
    replicas: list[list[int]],
    total: np.ndarray,
    leader_load: list[float],
    follower_load: list[float],
    rf: list[int],
    usage: Usage,
    load: dict[int, float],
) -> None:
    """The LPT loop: each missing replica, heaviest partition first, onto the least-loaded legal broker.

    The common case is inlined: while the partition still wants a new rack,
    the first fresh heap entry that is not yet a replica, has room and sits
    in an unused rack is what :func:`pop_legal` would take too. Everything
    else (old racks, nothing found) goes through :func:`pop_legal`. A
    million partitions make this loop the hot spot.
    """
    view = usage.view
    domain_of, weight_of, capped = view.domain_of, view.weight_of, view.has_caps
    count, disk, sizes = usage.count, usage.disk, usage.sizes
    required, rack_aware, n_domains = view.required_domains, view.rack_aware, view.n_domains
    heap = [(0.0, b) for b in view.eligible]
    heapq.heapify(heap)
    for i in np.lexsort((np.arange(len(total)), -total)).tolist():
        reps, target = replicas[i], rf[i]
        while len(reps) < target:
            used = {domain_of[r] for r in reps}
            b = -1
            if len(used) < required(target) or (rack_aware and len(used) < n_domains):
                # pop_legal would take the first fresh entry in a new rack with room: find it inline
                skipped = []
                while heap:
                    key, c = heapq.heappop(heap)
                    if key != load[c]:
                        continue  # stale; the fresh entry is in the heap
                    if c not in reps and domain_of[c] not in used and (not capped or usage.room_for(i, c)):
                        b = c
                        break
                    skipped.append((key, c))
                for entry in skipped:
                    heapq.heappush(heap, entry)
            if b < 0:
                b = pop_legal(heap, load.__getitem__, i, reps, target, usage)
            amount = follower_load[i] if reps else leader_load[i]
            reps.append(b)
            count[b] += 1  # usage.add, inlined
            disk[b] += sizes[i]
            load[b] += amount / weight_of[b]
            heapq.heappush(heap, (load[b], b))


def _load_ratio(
    assignment: list[list[int]], leader_load: np.ndarray, follower_load: np.ndarray, brokers: pd.DataFrame
) -> float:
    table = broker_table(assignment, leader_load, follower_load, brokers)
    loads = table.loc[table["eligible"], "load"]
    if not len(loads) or loads.max() == 0:
        return 1.0
    return float("inf") if loads.min() == 0 else float(loads.max() / loads.min())


def _balance_leader_load(
    replicas: list[list[int]], leader_load: np.ndarray, follower_load: np.ndarray, view: ClusterView
) -> None:
    """Heaviest partitions first, lead from the replica whose broker ends up least loaded (ties: lower id)."""
    weight = view.weight_of
    lead, follow = leader_load.tolist(), follower_load.tolist()
    load = dict.fromkeys(view.eligible, 0.0)
    for i, reps in enumerate(replicas):
        for b in reps:
            load[b] += follow[i] / weight[b]
    for i in np.argsort(-leader_load, kind="stable").tolist():
        reps = replicas[i]
        extra = lead[i] - follow[i]
        if not reps or extra <= 0:
            continue
        best, best_key = reps[0], load[reps[0]] + extra / weight[reps[0]]
        for b in reps[1:]:
            key = load[b] + extra / weight[b]
            if key < best_key or (key == best_key and b < best):
                best, best_key = b, key
        load[best] = best_key
        reps.remove(best)
        reps.insert(0, best)


POLISH_ROUNDS = 400
POLISH_CANDIDATES = 4  # heaviest replicas of the top broker tried per round


def polish_load(
    replicas: list[list[int]],
    leader_load: np.ndarray,
    follower_load: np.ndarray,
    usage: Usage,
    swaps_only: bool = False,
    good_enough: float = 0.0,
    topics: np.ndarray | None = None,
) -> float:
    """Lower the maximum broker load by single moves and swaps while each one lowers it; in place.

    ``swaps_only`` keeps every broker's replica and leader counts (a swap
    exchanges two replicas of the same role), for count-balanced plans.
    Stops once the maximum load per weight is at most ``good_enough``.
    With ``topics`` (a code per partition) two replicas of one topic are never
    swapped, which would move that topic A->B and B->A at once.
    Returns the maximum load per weight reached.
    """
    if len(usage.view.eligible) < 2:
        return 0.0
    search = _TopBrokerSearch(replicas, leader_load, follower_load, usage, swaps_only, topics)
    for _ in range(POLISH_ROUNDS):
        if float(search.load.max()) <= good_enough or not search.improve_top():
            break
    return float(search.load.max())


def replica_loads(
    matrix: np.ndarray, leader_load: np.ndarray, follower_load: np.ndarray, view: ClusterView
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per replica of a plan on eligible brokers: partition, broker slot (position in
    ``view.eligible``), leads?, load in its role; and per eligible broker its load per weight."""
    brokers = np.asarray(view.eligible, dtype=np.int64)
    weight = np.array([view.weight_of[b] for b in view.eligible], dtype=float)
    part, position = np.nonzero(matrix != PAD)  # row by row: partition order, then replica order
    where = positions(brokers, matrix[part, position])  # eligible ids are sorted
    leads = position == 0
    amount = np.where(leads, leader_load[part], follower_load[part])
    load = np.bincount(where, weights=amount, minlength=len(brokers)) / weight
    return part, where, leads, amount, load


class _TopBrokerSearch:
    """One row per replica (partition, broker slot, load in its role) and the loads per weight."""

    def __init__(
        self,
        replicas: list[list[int]],
        leader_load: np.ndarray,
        follower_load: np.ndarray,
        usage: Usage,
        swaps_only: bool = False,
        topics: np.ndarray | None = None,
    ) -> None:
        view = usage.view
        self.replicas, self.usage, self.swaps_only, self.topics = replicas, usage, swaps_only, topics
        self.brokers = np.asarray(view.eligible, dtype=np.int64)
        self.weight = np.array([view.weight_of[b] for b in self.brokers.tolist()], dtype=float)
        self.part, self.where, self.leads, self.amount, self.load = replica_loads(
            replica_matrix(replicas), leader_load, follower_load, view
        )

    def improve_top(self) -> bool:
        """Make the best legal move or swap of one of the top broker's heaviest replicas that lowers its load."""
        load, weight, where, amount = self.load, self.weight, self.where, self.amount
        top = int(np.argmax(load))
        mine = np.flatnonzero(where == top)
        mine = mine[np.argsort(-amount[mine], kind="stable")]
        if self.swaps_only:  # a swap needs a partner of the same role: try the heaviest of each role
            candidates = [*mine[self.leads[mine]][:POLISH_CANDIDATES], *mine[~self.leads[mine]][:POLISH_CANDIDATES]]
        else:
            candidates = mine[:POLISH_CANDIDATES].tolist()
        for r in candidates:
            x = amount[r]
            # a move to broker c, or a swap with replica s on c: the larger of the two new loads
            move_peak = np.maximum(load[top] - x / weight[top], load + x / weight)
            move_peak[top] = np.inf
            swap_peak = np.maximum(load[top] + (amount - x) / weight[top], load[where] + (x - amount) / weight[where])
            swap_peak[where == top] = np.inf
            if self.swaps_only:  # same role only, so leader counts stay where they are too
                swap_peak[self.leads != self.leads[r]] = np.inf
                move_peak[:] = np.inf
            options = [(float(move_peak[c]), 0, c, -1) for c in np.argsort(move_peak, kind="stable")[:8].tolist()]
            options += [
                (float(swap_peak[s]), 1, int(where[s]), s) for s in np.argsort(swap_peak, kind="stable")[:16].tolist()
            ]
            for peak, _, c, s in sorted(options):
                if peak >= load[top] * (1 - 1e-9):
                    break
                if self._apply(r, s, top, c):
                    return True
        return False

    def _apply(self, r: int, s: int, top: int, c: int) -> bool:
        """Move replica row ``r`` from ``top`` to ``c`` (and row ``s`` back, for a swap) when every rule allows."""
        usage, view = self.usage, self.usage.view
        i, b_top, b_c = int(self.part[r]), int(self.brokers[top]), int(self.brokers[c])
        if not may_replace(self.replicas[i], b_top, b_c, view) or not usage.room_for(i, b_c):
            return False
        if s >= 0:
            k = int(self.part[s])
            if k == i or not may_replace(self.replicas[k], b_c, b_top, view):
                return False
            if self.topics is not None and self.topics[k] == self.topics[i]:
                return False
            usage.remove(k, b_c)
            if not usage.room_for(k, b_top):
                usage.add(k, b_c)
                return False
            usage.add(k, b_top)
            self._relocate(s, k, c, top)
        usage.remove(i, b_top)
        usage.add(i, b_c)
        self._relocate(r, i, top, c)
        return True

    def _relocate(self, row: int, i: int, old: int, new: int) -> None:
        _swap_in(self.replicas[i], int(self.brokers[old]), int(self.brokers[new]))
        self.where[row] = new
        self.load[old] -= self.amount[row] / self.weight[old]
        self.load[new] += self.amount[row] / self.weight[new]


def _swap_in(reps: list[int], old: int, new: int) -> None:
    reps[reps.index(old)] = new


def relabel_towards(replicas: list[list[int]], baseline: list[list[int]], view: ClusterView) -> None:
    """Permute interchangeable brokers (same rack, weight and caps) to maximise overlap with ``baseline``."""
    classes: dict[tuple[object, ...], list[int]] = {}
    for b in view.eligible:
        key = (view.domain_of[b], view.weight_of[b], view.max_replicas.get(b), view.max_disk.get(b))
        classes.setdefault(key, []).append(b)
    members = [sorted(c) for c in classes.values() if len(c) > 1]
    if not members or not replicas:
        return
    slot = {b: k for k, b in enumerate(view.eligible)}
    code = np.full(len(view.eligible), -1, dtype=np.int64)
    for number, group in enumerate(members):
        code[[slot[b] for b in group]] = number
    target = _slots(replica_matrix(replicas), slot)
    before = _slots(replica_matrix(baseline), slot)
    overlap = np.zeros((len(slot), len(slot)), dtype=np.int64)
    for new in target.T:
        for old in before.T:
            both = (new >= 0) & (old >= 0)
            both[both] = code[new[both]] == code[old[both]]
            both &= code[np.maximum(new, 0)] >= 0
            np.add.at(overlap, (new[both], old[both]), 1)
    mapping: dict[int, int] = {}
    for group in members:
        idx = [slot[b] for b in group]
        from scipy.optimize import linear_sum_assignment  # here: a read-only command need not import scipy

        rows, cols = linear_sum_assignment(overlap[np.ix_(idx, idx)], maximize=True)
        mapping.update({group[r]: group[c] for r, c in zip(rows.tolist(), cols.tolist()) if r != c})
    if mapping:
        for reps in replicas:
            reps[:] = [mapping.get(b, b) for b in reps]


def _slots(matrix: np.ndarray, slot: dict[int, int]) -> np.ndarray:
    """Broker ids to eligible-broker slots (-1 for padding and other brokers)."""
    out = np.full(matrix.shape, -1, dtype=np.int64)
    for b, k in slot.items():
        out[matrix == b] = k
    out[matrix == PAD] = -1
    return out


STRATEGY = Strategy(
    "lpt",
    assign,
    balances_leader_counts=False,  # leaders placed for load
    options=(StrategyOption("skip_ratio", "lpt_skip_ratio", float, 1, legacy="lpt_skip_ratio"),),
)
