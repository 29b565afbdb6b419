"""Goal-based balancing: even replicas, leaders and every load resource with few moves (``balanced``).

Cruise Control's goal optimizer (``GoalOptimizer``, ``AbstractGoal``), offline
and deterministic. Goals run one after another in priority order, and an
action a later goal takes must be accepted by every earlier one (Cruise
Control's ``ActionAcceptance``), so a later goal never pushes an earlier one
past its threshold:

1. replicas per broker, per weight, within ``count_slack`` of the share
   (where racks allow), and leaders the same: :func:`assigners.balance.settle`
   after keeping every legal replica of the preferred layout, as ``sticky``;
2. disk: ``size_bytes`` per broker against ``disk_capacity_bytes`` (per
   weight when capacities are unknown);
3. network in: ``bytes_in`` of every replica per broker;
4. network out: ``bytes_out`` of the leaders per broker;
5. leader ``bytes_in`` per broker.

Each load goal is met when its most loaded broker (per capacity) is at most
``load_ratio`` times the resource's lower bound, max(total / total capacity,
largest replica / largest capacity) (:func:`assigners.metrics.resource_ratios`).
It works off the most loaded broker with Cruise Control's three actions:
leadership transfer (moves no data), single replica move (only while the
replica counts stay within the slack) and replica swap between two brokers
(counts unchanged). Among the actions that bring the broker under the
threshold, the one moving the fewest bytes wins (small or cold partitions
first, a leadership transfer above all); otherwise the best gain per byte.
A replica moves at most once in a plan, and never A->B and B->A in one topic.

A legal cluster already within every threshold is left as it is (``skipped``).
Goals that cannot be met are named in the notes with the broker and the
partition that stands in the way.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from assigners.balance import settle
from assigners.metrics import load_lower_bound
from assigners.model import (
    NOTES,
    SKIP_REASON,
    ClusterView,
    Constraints,
    assignment_frame,
    replica_matrix,
    topic_codes,
)
from assigners.placement import Usage, keep_valid, may_replace

# One action: its steps, each (replica row, new broker slot, leads after, the replica changes broker).
Change = tuple[tuple[int, int, bool, bool], ...]
# An action with its sort key: (not fixing the goal, bytes moved (per gain when not fixing), kind, tie-break)
Option = tuple[float, float, int, int, Change]
# A partner broker of one round: its slot, its replica rows, which of them lead, their amounts of the goal
Held = tuple[int, np.ndarray, np.ndarray, np.ndarray]

ROUNDS_PER_GOAL = 2000
FIXPOINT_ROUNDS = 4  # goal passes over again, each from a fresh search, until one changes nothing
CANDIDATES = 6  # replicas of the top broker tried per round: the heaviest, then the lightest that could fix it
PARTNER_BROKERS = 6  # least loaded brokers whose replicas are tried as swap partners


@dataclass(frozen=True)
class Resource:
    """One load goal: a partition's amount on its leader and on each follower, and the brokers' capacities."""

    name: str
    leader: np.ndarray
    follower: np.ndarray
    capacity: np.ndarray  # per eligible broker slot


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """Keep the preferred layout where legal, even out the counts, then each load goal in turn.

    Examples
    --------
    >>> from assigners.model import prepare_brokers, prepare_partitions
    >>> b = prepare_brokers(pd.DataFrame({"broker_id": [1, 2, 3, 4], "rack": ["a", "b", "a", "b"],
    ...     "state": ["active"] * 4}), Constraints())
    >>> p = prepare_partitions(pd.DataFrame({"topic": ["t"] * 4, "partition": [0, 1, 2, 3],
    ...     "replicas": [[1, 2], [1, 2], [1, 2], [3, 4]], "bytes_in": [5.0, 5.0, 1.0, 1.0],
    ...     "bytes_out": [0.0] * 4}), Constraints())
    >>> assign(b, p, Constraints())["replicas"].tolist()  # 2 moves even the counts; the hot partitions sit apart
    [[2, 3], [4, 1], [1, 2], [3, 4]]
    """
    view = ClusterView.from_brokers(brokers, constraints)
    topics = partitions["topic"].tolist()
    numbers = partitions["partition"].tolist()
    preferred = [list(r) for r in partitions["preferred"]]
    rf = partitions["rf"].tolist()
    resources = _resources(partitions, brokers, view)
    options = constraints
    # judge the preferred layout first, then let its search go: at 1M partitions each holds ~1 GiB
    kept = _GoalSearch(preferred, partitions, view, resources, options) if view.eligible else None
    preferred_even = kept is not None and _legal_and_even(kept, rf, view)
    preferred_met = kept.goals_met() if kept is not None else []
    del kept
    if preferred_even and all(preferred_met):
        frame = assignment_frame(topics, numbers, preferred)
        frame.attrs[SKIP_REASON] = (
            f"within every balance threshold (counts within {options.balanced_count_slack}, "
            f"loads within {options.balanced_load_ratio}x their bounds): nothing to change"
        )
        return frame
    replicas = [keep_valid(list(base), int(r), view) for base, r in zip(preferred, rf)]
    settle(replicas, partitions, view, since=partitions["current"].tolist())
    notes, met = _reach_goals(replicas, partitions, view, resources, options)
    if preferred_even and not any(now and not before for before, now in zip(preferred_met, met)):
        # what is out of reach stays so: moving replicas for a partial gain would only cost moves, and
        # re-planning the plan in force must move nothing (sticky keeps its load pass on the same rule)
        frame = assignment_frame(topics, numbers, preferred)
        frame.attrs[NOTES] = [*notes, "no goal the layout misses can be met: it stays as it is"]
        return frame
    frame = assignment_frame(topics, numbers, replicas)
    frame.attrs[NOTES] = notes
    return frame


def _reach_goals(
    replicas: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
) -> tuple[list[str], list[bool]]:
    """The load goals in turn, over again from a fresh search until a round changes nothing; in place.

    Returns the notes of the goals left unmet and which goals are met.
    """
    for _ in range(FIXPOINT_ROUNDS):
        search = _GoalSearch(replicas, partitions, view, resources, options)
        notes = [note for resource in resources if (note := search.balance(resource))]
        changed = search.actions + search.undo_needless_moves()
        met = search.goals_met()
        del search  # one search alive at a time
        if not changed:
            break
    return notes, met


def _resources(partitions: pd.DataFrame, brokers: pd.DataFrame, view: ClusterView) -> list[Resource]:
    """The load goals in priority order, with each broker's capacity for them."""
    weight = np.array([view.weight_of[b] for b in view.eligible], dtype=float)
    disk = pd.to_numeric(brokers.set_index("broker_id")["disk_capacity_bytes"], errors="coerce")
    disk_of = disk.reindex(view.eligible).to_numpy(dtype=float)
    disk_capacity = disk_of if len(disk_of) and not np.isnan(disk_of).any() else weight
    sizes = partitions["size_bytes"].to_numpy(dtype=float)
    bytes_in = partitions["bytes_in"].to_numpy(dtype=float)
    zero = np.zeros(len(partitions))
    return [
        Resource("disk", sizes, sizes, disk_capacity),
        Resource("bytes_in", bytes_in, bytes_in, weight),
        Resource("bytes_out", partitions["bytes_out"].to_numpy(dtype=float), zero, weight),
        Resource("leader_bytes_in", bytes_in, zero, weight),
    ]


def _bound(resource: Resource, rf: np.ndarray) -> float:
    """The resource's lower bound per unit of capacity (see :func:`assigners.metrics.load_lower_bound`)."""
    frame = pd.DataFrame({"weight": resource.capacity, "eligible": True})
    return load_lower_bound(resource.leader, resource.follower, rf, frame)


def _legal_and_even(search: _GoalSearch, rf: list[int], view: ClusterView) -> bool:
    """In the search's layout nothing is forced (every replica may stay, no cap broken), and replica and
    leader counts are in their bands."""
    if any(keep_valid(list(r), n, view) != list(r) for r, n in zip(search.replicas, rf)):
        return False
    if any(search.usage.over_capacity(b) for b in view.eligible):
        return False
    return all(search.count_band(b, leaders) == (0, 0) for b in range(len(view.eligible)) for leaders in (0, 1))


class _GoalSearch:
    """Replica rows (partition, broker slot, leads?) and per-goal broker loads, under every rule."""

    def __init__(
        self,
        replicas: list[list[int]],
        partitions: pd.DataFrame,
        view: ClusterView,
        resources: list[Resource],
        options: Constraints,
    ) -> None:
        self.replicas, self.view, self.resources, self.options = replicas, view, resources, options
        self.brokers = np.asarray(view.eligible, dtype=np.int64)
        self.live = [set(r) for r in partitions["current"]]
        self.topic = topic_codes(partitions)
        self.sizes = partitions["size_bytes"].to_numpy(dtype=np.int64)
        self.usage = Usage(replicas, self.sizes, view)
        rf = partitions["rf"].to_numpy(dtype=np.int64)
        self.bounds = [_bound(r, rf) for r in resources]
        matrix = replica_matrix(replicas)
        part, position = np.nonzero(np.isin(matrix, self.brokers))
        self.part, self.slot = part, np.searchsorted(self.brokers, matrix[part, position])
        self.lead = position == 0
        # per goal: each partition's amount as leader / as follower (lists for scalar lookups), each row's amount
        self.as_leader = [r.leader.tolist() for r in resources]
        self.as_follower = [r.follower.tolist() for r in resources]
        self.capacity = [r.capacity.tolist() for r in resources]
        self.row_amount = [np.where(self.lead, r.leader[part], r.follower[part]) for r in resources]
        self.load = np.zeros((len(resources), len(self.brokers)))
        for k, r in enumerate(resources):
            np.add.at(self.load[k], self.slot, self.row_amount[k] / r.capacity[self.slot])
        self.first_row = np.searchsorted(self.part, np.arange(len(replicas) + 1))  # a partition's rows are contiguous
        self.on: list[set[int]] = [set() for _ in self.brokers]  # rows per broker slot
        for row, slot in enumerate(self.slot.tolist()):
            self.on[slot].add(row)
        self._rows: dict[int, np.ndarray] = {}  # sorted rows per slot, dropped when the slot changes
        self.count = np.bincount(self.slot, minlength=len(self.brokers)).astype(np.int64)
        self.leaders = np.bincount(self.slot[self.lead], minlength=len(self.brokers)).astype(np.int64)
        weight = np.array([view.weight_of[b] for b in view.eligible], dtype=float)
        self.share = [self.count.sum() * weight / weight.sum(), self.leaders.sum() * weight / weight.sum()]
        # (topic, from, to) of the plan's moves as they stand, against the live layout (a partition's
        # moves are every pair of a broker it leaves and one it joins): never the reverse as well
        self.moved: Counter[tuple[int, int, int]] = Counter()
        for i, reps in enumerate(replicas):
            self.moved.update(self._moves_of(i, reps))
        self.twice: set[tuple[int, int]] = set()  # (partition, broker) replicas this pass placed
        self.actions = 0

    # -- measures ----------------------------------------------------------------------
    def amount(self, k: int, rows: np.ndarray) -> np.ndarray:
        """Goal ``k``'s amount of each replica row in its current role."""
        out: np.ndarray = self.row_amount[k][rows]
        return out

    def amount_as(self, k: int, row: int, lead: bool) -> float:
        i = int(self.part[row])
        return float(self.as_leader[k][i] if lead else self.as_follower[k][i])

    def goals_met(self) -> list[bool]:
        """Per load goal: within its threshold?"""
        limit = self.options.balanced_load_ratio * (1 + 1e-9)
        return [self.ratio(k) <= limit for k in range(len(self.resources))]

    def ratio(self, k: int) -> float:
        return float(self.load[k].max(initial=0.0)) / self.bounds[k] if self.bounds[k] > 0 else 0.0

    def target(self, k: int) -> float:
        return self.options.balanced_load_ratio * self.bounds[k]

    def band(self, b: int, leaders: int) -> tuple[int, int]:
        """Counts strictly within the slack of broker slot ``b``'s weighted share (of replicas, or leaders).

        With slack 1: the floor and ceiling of the share, so equal brokers end within 1 of each other.
        """
        share, slack = self.share[leaders][b], self.options.balanced_count_slack
        return math.floor(share - slack + 1e-9) + 1, math.ceil(share + slack - 1e-9) - 1

    def count_band(self, b: int, leaders: int) -> tuple[int, int]:
        """How far broker slot ``b`` is below / above its band (replicas, or leaders if ``leaders``)."""
        have = int((self.leaders if leaders else self.count)[b])
        low, high = self.band(b, leaders)
        return max(0, low - have), max(0, have - high)

    def _count_ok(self, counts: np.ndarray, leaders: int, b: int, delta: int) -> bool:
        """May broker ``b``'s count change by ``delta`` without leaving (or leaving further) its band?"""
        after = int(counts[b]) + delta
        low, high = self.band(b, leaders)
        return (low <= after <= high) or (delta < 0 and after >= low) or (delta > 0 and after <= high)

    # -- the goal loop -------------------------------------------------------------------
    def balance(self, resource: Resource) -> str | None:
        """Work goal ``resource`` off its most loaded broker; a note when its threshold stays out of reach."""
        k = self.resources.index(resource)
        if self.bounds[k] <= 0:
            return None
        for _ in range(ROUNDS_PER_GOAL):
            top = int(np.argmax(self.load[k]))
            if self.load[k][top] <= self.target(k) * (1 + 1e-9) or not self._improve(k, top):
                break
        if self.ratio(k) <= self.options.balanced_load_ratio * (1 + 1e-9):
            return None
        top = int(np.argmax(self.load[k]))
        mine = np.flatnonzero(self.slot == top)
        heaviest = mine[np.argmax(self.amount(k, mine))] if len(mine) else None
        hot = "" if heaviest is None else f"; its heaviest replica is partition #{int(self.part[heaviest])}"
        return (
            f"{resource.name} goal not met: broker {int(self.brokers[top])} at {self.ratio(k):.2f}x the lower bound "
            f"(threshold {self.options.balanced_load_ratio}){hot}; no legal action lowers it without breaking "
            "an earlier goal"
        )

    def _improve(self, k: int, top: int) -> bool:
        """Apply the best accepted action that lowers broker ``top``'s load of goal ``k``.

        Options are scored on goal ``k``'s loads alone, in bulk; the rules
        (racks, caps, counts, earlier goals) are checked down the sorted list
        until one passes, which is far cheaper than checking every option.
        """
        mine = self.rows_on(top)
        mine = mine[self.amount(k, mine) > 0]
        if not len(mine):
            return False
        order = mine[np.argsort(-self.amount(k, mine), kind="stable")]
        excess = (self.load[k][top] - self.target(k)) * self.capacity[k][top]
        fixing = order[self.amount(k, order) >= excess]
        picks = list(dict.fromkeys([*order[:CANDIDATES].tolist(), *fixing[-CANDIDATES:].tolist()]))
        partners = [c for c in np.argsort(self.load[k], kind="stable")[: PARTNER_BROKERS + 1].tolist() if c != top]
        held: list[Held] = [(c, *self._rows_and_amounts(k, c)) for c in partners[:PARTNER_BROKERS]]
        options: list[Option] = []
        for r in picks:
            options += self._transfers(k, r, top)
            if self._may_leave(r):
                options += self._moves_and_swaps(k, r, top, held)
        options.sort(key=lambda o: o[:4])
        for *_, change in options:
            if self._legal(change) and self._accepted(k, self._loads_after(change)):
                self._apply(change)
                return True
        return False

    def _key(self, k: int, top: int, c: int, new_top: float, new_c: float, moved: int) -> tuple[float, float] | None:
        """(not fixing, cost) of an option leaving ``top`` at ``new_top`` and ``c`` at ``new_c``; None: no gain."""
        peak, new_peak = self.load[k][top], max(new_top, new_c)
        if new_peak >= peak * (1 - 1e-9):
            return None
        fixes = new_peak <= self.target(k) * (1 + 1e-9)
        return (0.0, float(moved)) if fixes else (1.0, moved / (peak - new_peak))

    def _transfers(self, k: int, r: int, top: int) -> list[Option]:
        """Leadership of ``r``'s partition from ``top`` to one of its followers, alone (kind 0) or
        paired with a partition led there that ``top`` follows (kind 0 too: leader counts stay, no data moves).
        """
        if not self.lead[r]:
            return []
        i, out = int(self.part[r]), list[Option]()
        load, cap = self.load[k], self.capacity[k]
        delta = self.as_leader[k][i] - self.as_follower[k][i]
        if delta <= 0:
            return []
        followed_by_top = None
        for row in range(int(self.first_row[i]), int(self.first_row[i + 1])):
            c = int(self.slot[row])
            if row == r:
                continue
            key = self._key(k, top, c, load[top] - delta / cap[top], load[c] + delta / cap[c], 0)
            if key is not None:
                out.append((*key, 0, row, ((r, top, False, False), (row, c, True, False))))
            if followed_by_top is None:
                followed_by_top = self.part[self.rows_on(top)]
            led = self.rows_on(c)
            led = led[self.lead[led] & np.isin(self.part[led], followed_by_top)]
            back = self.row_amount[k][led] - self._follower_amount(k, led)
            led, back = led[back < delta], back[back < delta]
            if not len(led):
                continue
            new_top, new_c = load[top] - (delta - back) / cap[top], load[c] + (delta - back) / cap[c]
            for n in np.argsort(np.maximum(new_top, new_c), kind="stable")[:CANDIDATES].tolist():
                j_lead = int(led[n])
                key = self._key(k, top, c, float(new_top[n]), float(new_c[n]), 0)
                if key is not None:
                    j_top = self._row_of(int(self.part[j_lead]), top)
                    steps = (
                        (r, top, False, False),
                        (row, c, True, False),
                        (j_lead, c, False, False),
                        (j_top, top, True, False),
                    )
                    out.append((*key, 0, j_lead, steps))
        return out

    def _follower_amount(self, k: int, rows: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.resources[k].follower[self.part[rows]]
        return out

    def _row_of(self, i: int, slot: int) -> int:
        """The replica row of partition ``i`` on broker slot ``slot``."""
        rows = range(int(self.first_row[i]), int(self.first_row[i + 1]))
        return next(row for row in rows if int(self.slot[row]) == slot)

    def _rows_and_amounts(self, k: int, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A partner broker's rows, which of them lead, and their amounts of goal ``k``."""
        rows = self.rows_on(c)
        return rows, self.lead[rows], self.amount(k, rows)

    def _moves_and_swaps(self, k: int, r: int, top: int, held: list[Held]) -> list[Option]:
        """Replica ``r`` to a partner broker (kind 1), or for a lighter one of the same role there (kind 2)."""
        lead, mine, size = bool(self.lead[r]), float(self.row_amount[k][r]), int(self.sizes[self.part[r]])
        cap, load, out = self.capacity[k], self.load[k], list[Option]()
        for c, all_rows, leads, amounts in held:
            key = self._key(k, top, c, load[top] - mine / cap[top], load[c] + mine / cap[c], size)
            if key is not None:
                out.append((*key, 1, c, ((r, c, lead, True),)))
            same = (leads == lead) & (amounts < mine)
            rows = all_rows[same]
            if not len(rows):
                continue
            delta = mine - amounts[same]
            new_top, new_c = load[top] - delta / cap[top], load[c] + delta / cap[c]
            best = np.argsort(np.maximum(new_top, new_c), kind="stable")[:CANDIDATES]
            for n in best.tolist():
                s_row = int(rows[n])
                moved = size + int(self.sizes[self.part[s_row]])
                key = self._key(k, top, c, float(new_top[n]), float(new_c[n]), moved)
                if key is not None:
                    out.append((*key, 2, s_row, ((r, c, lead, True), (s_row, top, lead, True))))
        return out

    def _legal(self, change: Change) -> bool:
        """Counts, racks, caps, one move per replica and the topic rule for an option's steps."""
        if not any(step[3] for step in change):  # leadership only: no data moves, only leader counts change
            deltas: dict[int, int] = {}
            for row, slot, lead, _ in change:
                deltas[slot] = deltas.get(slot, 0) + int(lead) - int(self.lead[row])
            return all(self._count_ok(self.leaders, 1, b, d) for b, d in deltas.items() if d)
        if len(change) == 1:  # a move: the counts change
            r, c, lead, _ = change[0]
            top = int(self.slot[r])
            counts_ok = self._count_ok(self.count, 0, top, -1) and self._count_ok(self.count, 0, c, +1)
            if not counts_ok or (
                lead and not (self._count_ok(self.leaders, 1, top, -1) and self._count_ok(self.leaders, 1, c, +1))
            ):
                return False
        elif self.topic[self.part[change[0][0]]] == self.topic[self.part[change[1][0]]]:
            return False  # a swap of two replicas of one topic would move it A->B and B->A
        for row, slot, _, _ in change:
            i = int(self.part[row])
            if not self._may_leave(row) or not self._may_enter(i, int(self.slot[row]), slot, self.replicas[i]):
                return False
        return True

    def rows_on(self, slot: int) -> np.ndarray:
        """Replica rows on a broker slot, in row order (deterministic)."""
        rows = self._rows.get(slot)
        if rows is None:
            rows = self._rows[slot] = np.sort(np.fromiter(self.on[slot], dtype=np.int64, count=len(self.on[slot])))
        return rows

    def undo_needless_moves(self) -> int:
        """Put replicas the plan moved back on a live broker of their partition wherever nothing gets worse.

        Nothing worse: the rules hold, counts stay in (or closer to) their band,
        and no goal's load rises above its threshold (or above its current
        maximum when it is not met). Each undo saves a move. Returns how many.
        """
        undone = 0
        for row in np.flatnonzero(self.slot >= 0).tolist():
            i, slot = int(self.part[row]), int(self.slot[row])
            if int(self.brokers[slot]) in self.live[i]:
                continue
            for home in sorted(self.live[i] - set(self.replicas[i])):
                back = int(np.searchsorted(self.brokers, home))
                if back < len(self.brokers) and self.brokers[back] == home and self._undo_ok(row, slot, back):
                    self._set(row, back, bool(self.lead[row]), relocate=True)
                    undone += 1
                    break
        return undone

    def _undo_ok(self, row: int, slot: int, back: int) -> bool:
        i, lead = int(self.part[row]), bool(self.lead[row])
        if not (self._count_ok(self.count, 0, slot, -1) and self._count_ok(self.count, 0, back, +1)):
            return False
        if lead and not (self._count_ok(self.leaders, 1, slot, -1) and self._count_ok(self.leaders, 1, back, +1)):
            return False
        old, home = int(self.brokers[slot]), int(self.brokers[back])
        if not may_replace(self.replicas[i], old, home, self.view) or not self.usage.room_for(i, home):
            return False
        after = self._loads_after(((row, back, lead, True),))
        return all(
            after[k][back] <= max(self.target(k), float(self.load[k].max())) * (1 + 1e-9)
            for k in range(len(self.resources))
            if self.bounds[k] > 0
        )

    def _may_leave(self, row: int) -> bool:
        """A replica moves at most once: one this pass placed stays."""
        return (int(self.part[row]), int(self.brokers[self.slot[row]])) not in self.twice

    def _moves_of(self, i: int, reps: list[int]) -> list[tuple[int, int, int]]:
        """(topic, from, to) of partition ``i`` going from its live layout to ``reps``."""
        live, now, topic = self.live[i], set(reps), int(self.topic[i])
        return [(topic, a, b) for a in live - now for b in now - live]

    def _may_enter(self, i: int, old_slot: int, new_slot: int, reps: list[int]) -> bool:
        """May partition ``i``'s replica on ``old_slot`` move to ``new_slot``: racks, room, and no topic pair?"""
        old, new = int(self.brokers[old_slot]), int(self.brokers[new_slot])
        if not may_replace(reps, old, new, self.view) or not self.usage.room_for(i, new):
            return False
        after = [new if b == old else b for b in reps]
        return not any(self.moved[(t, b, a)] for t, a, b in self._moves_of(i, after))

    def _loads_after(self, change: Change) -> list[dict[int, float]]:
        """Every goal's load on the brokers ``change`` touches, after it."""
        touched = {int(self.slot[row]) for row, _, _, _ in change} | {slot for _, slot, _, _ in change}
        after = [{b: float(self.load[k][b]) for b in touched} for k in range(len(self.resources))]
        for row, slot, lead, _ in change:
            old_slot, was_lead = int(self.slot[row]), bool(self.lead[row])
            for k, capacity in enumerate(self.capacity):
                after[k][old_slot] -= self.amount_as(k, row, was_lead) / capacity[old_slot]
                after[k][slot] += self.amount_as(k, row, lead) / capacity[slot]
        return after

    def _accepted(self, k: int, after: list[dict[int, float]]) -> bool:
        """Earlier goals accept: no broker rises above an earlier goal's threshold (or above where it was)."""
        for j in range(k):
            limit = self.target(j) * (1 + 1e-9)
            for b, value in after[j].items():
                if value > self.load[j][b] + 1e-12 and value > limit:
                    return False
        return True

    def _apply(self, change: Change) -> None:
        self.actions += 1
        for row, slot, lead, relocate in change:
            self._set(row, slot, lead, relocate)

    def _set(self, row: int, slot: int, lead: bool, relocate: bool) -> None:
        i, old_slot, was_lead = int(self.part[row]), int(self.slot[row]), bool(self.lead[row])
        for k, capacity in enumerate(self.capacity):
            self.load[k][old_slot] -= self.amount_as(k, row, was_lead) / capacity[old_slot]
            self.load[k][slot] += self.amount_as(k, row, lead) / capacity[slot]
            self.row_amount[k][row] = self.amount_as(k, row, lead)
        self.count[old_slot] -= 1
        self.count[slot] += 1
        self.leaders[old_slot] -= int(self.lead[row])
        self.leaders[slot] += int(lead)
        reps = self.replicas[i]
        old, new = int(self.brokers[old_slot]), int(self.brokers[slot])
        if relocate:
            self.moved.subtract(self._moves_of(i, reps))
            reps[reps.index(old)] = new
            self.moved.update(self._moves_of(i, reps))
            self.usage.remove(i, old)
            self.usage.add(i, new)
            if new not in self.live[i]:
                self.twice.add((i, new))
        if lead and reps[0] != new:
            reps.remove(new)
            reps.insert(0, new)
        self.on[old_slot].discard(row)
        self.on[slot].add(row)
        self._rows.pop(old_slot, None)
        self._rows.pop(slot, None)
        self.slot[row], self.lead[row] = slot, lead
