"""The move budget: keep only the most valuable moves (``max_moves``, ``max_bytes_to_move``).

A plan's data moves are grouped per partition: a partition either takes its
planned replica set or keeps its live one (the baseline every move is
counted against). Both are legal on their own
(exact RF, distinct eligible brokers, the rack rule), so any mix is legal
once the broker caps hold. Some changes are forced and always made: the
baseline row breaks a rule (a dead, draining or excluded broker, an RF
change, a crowded rack), a leadership rule fixed the partition, or a broker
would stay above a cap without it. Forced moves count against the budget
but are never deferred; the notes say when they alone exceed it.

Optional changes that the plan in force (the previous committed plan)
already makes go first, in partition order, so a plan being executed under
a budget is not swapped for another one. The rest are then taken greedily
by value per budget spent,
value being how much the change lowers

    sum over brokers of count^2 / weight + lambda * load^2 / weight

(the spread of replicas and of load per weight; lambda puts load in replica
units). Values change as changes land, so they are re-evaluated lazily when
they reach the top of the heap. A change that no longer lowers the sum is
dropped: it only made sense together with others left out.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from assigners.model import ClusterView, Constraints
from assigners.placement import Usage, keep_valid


@dataclass(frozen=True)
class BudgetOutcome:
    moves_deferred: int
    bytes_deferred: int
    notes: tuple[str, ...]


class _Objective:
    """sum(count^2 / w) + lam * sum(load^2 / w) over eligible brokers, updated per row change."""

    def __init__(self, rows: list[list[int]], partitions: pd.DataFrame, view: ClusterView) -> None:
        self.view = view
        self.leader = partitions["leader_load"].to_numpy(dtype=float).tolist()
        self.follower = partitions["follower_load"].to_numpy(dtype=float).tolist()
        self.count: Counter[int] = Counter()
        self.load: defaultdict[int, float] = defaultdict(float)
        for i, row in enumerate(rows):
            self._add(i, row, 1)
        total_load = sum(self.load.values())
        self.lam = (sum(self.count.values()) / total_load) ** 2 if total_load > 0 else 0.0

    def _contributions(self, i: int, row: list[int]) -> list[tuple[int, float]]:
        return [(b, self.leader[i] if k == 0 else self.follower[i]) for k, b in enumerate(row)]

    def _add(self, i: int, row: list[int], sign: int) -> None:
        for b, load in self._contributions(i, row):
            self.count[b] += sign
            self.load[b] += sign * load

    def gain(self, i: int, old: list[int], new: list[int]) -> float:
        """How much replacing row ``old`` by ``new`` lowers the objective."""
        dc: Counter[int] = Counter()
        dl: defaultdict[int, float] = defaultdict(float)
        for sign, row in ((-1, old), (1, new)):
            for b, load in self._contributions(i, row):
                dc[b] += sign
                dl[b] += sign * load
        gain = 0.0
        for b in dc.keys() | dl.keys():
            w = self.view.weight_of.get(b, 1.0)
            c, load = self.count[b], self.load[b]
            gain += (c * c - (c + dc[b]) ** 2) / w + self.lam * (load * load - (load + dl[b]) ** 2) / w
        return gain

    def apply(self, i: int, old: list[int], new: list[int]) -> None:
        self._add(i, old, -1)
        self._add(i, new, 1)


def apply_move_budget(
    assignment: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    constraints: Constraints,
    fixed: frozenset[int] = frozenset(),
) -> BudgetOutcome:
    """Revert the least valuable optional reassignments to the live layout, in place."""
    max_moves, max_bytes = constraints.max_moves, constraints.max_bytes_to_move
    if max_moves is None and max_bytes is None:
        return BudgetOutcome(0, 0, ())
    baseline = [list(b) for b in partitions["current"]]
    sizes = partitions["size_bytes"].to_numpy(dtype=np.int64).tolist()
    rf = partitions["rf"].tolist()
    target = [list(r) for r in assignment]
    added = [len(set(t) - set(b)) for t, b in zip(target, baseline)]
    forced = [
        a > 0 and (i in fixed or len(baseline[i]) != rf[i] or keep_valid(baseline[i], rf[i], view) != baseline[i])
        for i, a in enumerate(added)
    ]
    optional = [i for i, a in enumerate(added) if a > 0 and not forced[i]]
    for i in optional:
        assignment[i] = list(baseline[i])
    usage = Usage(assignment, partitions["size_bytes"].to_numpy(dtype=np.int64), view)
    objective = _Objective(assignment, partitions, view)

    pending = set(optional)
    forced_rows = [i for i, a in enumerate(added) if a and i not in pending]
    spent = [sum(added[i] for i in forced_rows), sum(added[i] * sizes[i] for i in forced_rows)]  # moves, bytes

    def take(i: int) -> None:
        objective.apply(i, assignment[i], target[i])
        for b in set(assignment[i]) - set(target[i]):
            usage.remove(i, b)
        for b in set(target[i]) - set(assignment[i]):
            usage.add(i, b)
        assignment[i] = list(target[i])
        pending.discard(i)
        spent[0] += added[i]
        spent[1] += added[i] * sizes[i]

    def affordable(i: int) -> bool:
        within = (max_moves is None or spent[0] + added[i] <= max_moves) and (
            max_bytes is None or spent[1] + added[i] * sizes[i] <= max_bytes
        )
        return within and all(usage.room_for(i, b) for b in set(target[i]) - set(assignment[i]))

    _relieve_caps(assignment, target, pending, usage, objective, take)
    notes = []
    if (max_moves is not None and spent[0] > max_moves) or (max_bytes is not None and spent[1] > max_bytes):
        notes.append(
            f"move budget: the forced moves alone ({spent[0]} moves, {spent[1]} bytes) exceed it; "
            "they are made, nothing optional is"
        )

    def cost(i: int) -> float:
        return max(
            (added[i] / max_moves if max_moves else 0.0) + (added[i] * sizes[i] / max_bytes if max_bytes else 0.0),
            1e-12,
        )

    previous: list[list[int] | None] = partitions["previous"].tolist() if "previous" in partitions else []
    for i in sorted(pending):
        planned = previous[i] if previous else None
        if planned is not None and set(planned) == set(target[i]) and affordable(i):
            take(i)

    heap = [(-objective.gain(i, assignment[i], target[i]) / cost(i), i) for i in sorted(pending)]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        gain = objective.gain(i, assignment[i], target[i])
        if gain <= 0:
            continue
        if heap and -gain / cost(i) > heap[0][0]:
            heapq.heappush(heap, (-gain / cost(i), i))  # worth less than it was; look again later
            continue
        if affordable(i):
            take(i)
    deferred = sum(added[i] for i in pending)
    deferred_bytes = sum(added[i] * sizes[i] for i in pending)
    notes.append(
        f"move budget: kept {spent[0]} of {spent[0] + deferred} moves ({spent[1]} bytes); "
        f"{deferred} moves ({deferred_bytes} bytes) deferred to a later plan"
    )
    return BudgetOutcome(deferred, deferred_bytes, tuple(notes))


def _relieve_caps(
    assignment: list[list[int]],
    target: list[list[int]],
    pending: set[int],
    usage: Usage,
    objective: _Objective,
    take: Callable[[int], None],
) -> None:
    """Take the best changes that move replicas off brokers above a cap until none is."""
    view = usage.view
    for b in view.eligible:
        while usage.over_capacity(b):
            relieving = [i for i in sorted(pending) if b in assignment[i] and b not in target[i]]
            if not relieving:
                break  # the full plan relieves b through forced changes only; they are all in place
            take(max(relieving, key=lambda i: (objective.gain(i, assignment[i], target[i]), -i)))
