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

from assigners.balance import settle, topic_moves
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
# An action with its sort key: (not fixing the goal, replica moves it adds (negative: it undoes some),
# bytes moved (per gain when not fixing), kind, tie-break)
Option = tuple[float, int, float, int, int, Change]
# A partner broker of one round: its slot, its replica rows, which of them lead, their amounts of the goal
Held = tuple[int, np.ndarray, np.ndarray, np.ndarray]

ROUNDS_PER_GOAL = 2000
RESTARTS = 2  # searches started again from the plan's own output while goals stay unmet
FIXPOINT_ROUNDS = 4  # goal passes over again, each from a fresh search, until one changes nothing
CANDIDATES = 6  # replicas of the top broker tried per round: the heaviest, then the lightest that could fix it
PARTNER_BROKERS = 6  # least loaded brokers whose replicas are tried as swap partners
PAIR_TRIES = 8  # second undos tried per moved replica
LATER_GOAL_TRIES = 6  # equally cheap accepted options compared by what they do to the later goals


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
    preferred_even = kept is not None and _legal_and_settled(kept, partitions, view)
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
    notes, met = _restart_from_own_plan(replicas, partitions, view, resources, options, (notes, met))
    if preferred_even and not any(now and not before for before, now in zip(preferred_met, met)):
        # what is out of reach stays so: moving replicas for a partial gain would only cost moves, and
        # re-planning the plan in force must move nothing (sticky keeps its load pass on the same rule)
        frame = assignment_frame(topics, numbers, preferred)
        frame.attrs[NOTES] = [*notes, "no goal the layout misses can be met: it stays as it is"]
        return frame
    frame = assignment_frame(topics, numbers, replicas)
    frame.attrs[NOTES] = notes
    return frame


def _restart_from_own_plan(
    replicas: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
    reached: tuple[list[str], list[bool]],
) -> tuple[list[str], list[bool]]:
    """Where goals stay unmet, search again as if the plan were already executed; in place.

    The search's rules are relative to the live layout (a replica moves
    once, sending one back saves a move), so a search that starts from its
    own plan can reach what the first one could not, which is what a second
    run after executing the plan would do. Doing it here meets the goal one
    run earlier, and re-planning a plan's own output then finds nothing
    left. Kept only when it meets more goals (in priority order) and, against
    the live layout, still never moves a replica of a topic A->B and B->A.
    """
    notes, met = reached
    live = partitions["current"].tolist()
    topics = topic_codes(partitions)
    for _ in range(RESTARTS):
        if all(met):
            break
        again = [list(r) for r in replicas]
        new_notes, new_met = _reach_goals(again, partitions.assign(current=replicas), view, resources, options)
        pairs = topic_moves(live, again, topics)
        if new_met <= met or any((t, b, a) in pairs for t, a, b in pairs):
            break  # lists of bools compare in priority order: the first goal it newly meets decides
        replicas[:] = again
        notes, met = new_notes, new_met
    return notes, met


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
        notes = [*search.count_notes(), *(note for resource in resources if (note := search.balance(resource)))]
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


def _legal_and_settled(search: _GoalSearch, partitions: pd.DataFrame, view: ClusterView) -> bool:
    """In the search's layout nothing is forced (every replica may stay, no cap broken), and the shared
    count balancing finds no replica or leader to move (counts in their bands, or as close as racks allow)."""
    rf = partitions["rf"].tolist()
    if any(keep_valid(list(r), n, view) != list(r) for r, n in zip(search.replicas, rf)):
        return False
    if any(search.usage.over_capacity(b) for b in view.eligible):
        return False
    settled = [list(r) for r in search.replicas]
    settle(settled, partitions, view, since=partitions["current"].tolist())
    return settled == search.replicas


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
        self.topics, self.numbers = partitions["topic"].tolist(), partitions["partition"].tolist()
        self.spans_every_rack = view.required_domains_each(partitions["rf"].to_numpy()) >= view.n_domains
        self.sizes = partitions["size_bytes"].to_numpy(dtype=np.int64)
        self.usage = Usage(replicas, self.sizes, view)
        rf = partitions["rf"].to_numpy(dtype=np.int64)
        self.bounds = [_bound(r, rf) for r in resources]
        matrix = replica_matrix(replicas)
        part, position = np.nonzero(np.isin(matrix, self.brokers))
        self.part, self.slot = part, np.searchsorted(self.brokers, matrix[part, position])
        self.lead = position == 0
        live = replica_matrix(list(partitions["current"]))
        # rows on a broker that does not hold their partition live (the plan moved them there)
        self.moved_in = ~(live[part] == self.brokers[self.slot][:, None]).any(axis=1)
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

    def count_notes(self) -> list[str]:
        """Why replica or leader counts stay outside their band, naming the broker furthest out (and the rack
        when the rack rule forces it)."""
        notes = []
        for leaders, what in ((0, "replicas"), (1, "leaders")):
            off = [sum(self.count_band(b, leaders)) for b in range(len(self.brokers))]
            if not off or max(off) == 0:
                continue
            b = int(np.argmax(off))
            low, high = self.band(b, leaders)
            have = int((self.leaders if leaders else self.count)[b])
            where = f"broker {int(self.brokers[b])} holds {have} {what} (band {low}-{high})"
            weight = np.array([self.view.weight_of[x] for x in self.view.eligible], dtype=float)
            rack, floor = self.rack_floor(np.ones(len(self.spans_every_rack)), weight)
            in_rack = [x for x, broker in enumerate(self.brokers.tolist()) if self.view.domain_of[broker] == rack]
            if not leaders and any(floor * weight[x] > self.band(x, 0)[1] for x in in_rack):
                notes.append(
                    f"replica count goal out of reach: rack {rack} must hold a replica of each of the "
                    f"{int(self.spans_every_rack.sum()):,} partitions that span every rack; {where}"
                )
            else:
                notes.append(f"{what} count goal not met: {where}; racks, caps or pins leave no legal move")
        return notes

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
        where = f"broker {int(self.brokers[top])} at {self.ratio(k):.2f}x the lower bound"
        threshold = f"threshold {self.options.balanced_load_ratio}"
        rack, floor = self.rack_floor(resource.follower, resource.capacity)
        if floor > self.target(k) * (1 + 1e-9):
            spanning = int(self.spans_every_rack.sum())
            return (
                f"{resource.name} goal out of reach: rack {rack} must hold a replica of each of the {spanning:,} "
                f"partitions that span every rack, {floor / self.bounds[k]:.2f}x the lower bound per unit of "
                f"capacity ({threshold}); {where}"
            )
        mine = self.rows_on(top)
        heaviest = mine[np.argmax(self.amount(k, mine))] if len(mine) else None
        hot = "" if heaviest is None else f"; its heaviest replica is {self.name(int(self.part[heaviest]))}"
        return (
            f"{resource.name} goal not met: {where} ({threshold}){hot}; no legal action lowers it without "
            "breaking an earlier goal"
        )

    def rack_floor(self, follower: np.ndarray, capacity: np.ndarray) -> tuple[str, float]:
        """The rack with the least capacity, and the load per unit of capacity it must carry at least.

        A partition that must span every rack (``required_domains`` equal to
        the racks there are) has a replica, at least a follower, in each, so
        the smallest rack carries their follower amounts over its capacity.
        """
        if not self.spans_every_rack.any() or self.view.n_domains < 2:
            return "", 0.0
        racks: dict[str, float] = {}
        for slot, b in enumerate(self.brokers.tolist()):
            racks[self.view.domain_of[b]] = racks.get(self.view.domain_of[b], 0.0) + float(capacity[slot])
        rack = min(sorted(racks), key=lambda d: racks[d])
        return rack, float(follower[self.spans_every_rack].sum()) / racks[rack] if racks[rack] > 0 else 0.0

    def name(self, i: int) -> str:
        """Partition ``i`` as topic:partition, as the config names partitions."""
        return f"{self.topics[i]}:{self.numbers[i]}"

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
            options += self._moves_and_swaps(k, r, top, held)
        # replicas the plan moved onto top, towards their live home: sending one back (or swapping it
        # for one from there) undoes a move instead of adding one
        for r in order[self.moved_in[order]][:CANDIDATES].tolist():
            homes = [self._slot_of(b) for b in sorted(self.live[int(self.part[r])] - set(self.replicas[int(self.part[r])]))]
            home_held = [(c, *self._rows_and_amounts(k, c)) for c in homes if c is not None and c != top]
            options += self._moves_and_swaps(k, r, top, home_held)
        if not any(o[0] == 0.0 and o[1] <= 0 for o in options):
            # nothing fixes the goal for free: try leadership passed along three brokers (costlier to list)
            for r in order[self.lead[order]][:CANDIDATES].tolist():
                options += self._transfer_chains(k, r, top)
        options.sort(key=lambda o: o[:5])
        best: tuple[float, int, Change] | None = None
        tried, first_class = 0, None
        for option in options:
            change = option[-1]
            if first_class is not None and (option[:2] != first_class or tried >= LATER_GOAL_TRIES):
                break
            after = self._loads_after(change) if self._legal(change) else None
            if after is None or not self._accepted(k, after):
                continue
            first_class = option[:2]
            candidate = (self._later_excess(k, after), tried, change)
            best = candidate if best is None else min(best, candidate, key=lambda c: c[:2])
            tried += 1
        if best is not None:
            self._apply(best[2])
        return best is not None

    def _later_excess(self, k: int, after: list[dict[int, float]]) -> float:
        """How much an option raises the goals after ``k`` above their thresholds on the brokers it touches
        (negative: how much it brings them down), each per its own bound.

        Among equally cheap options the one that helps the goals still to
        come saves the moves they would spend on its side effects; this only
        breaks ties, it never makes an option cheaper or a goal blended.
        """
        excess = 0.0
        for j in range(k + 1, len(self.resources)):
            if self.bounds[j] <= 0:
                continue
            target = self.target(j)
            before = max(float(self.load[j][b]) for b in after[j])
            excess += (max(0.0, max(after[j].values()) - target) - max(0.0, before - target)) / self.bounds[j]
        return excess

    def _key(
        self, k: int, top: int, c: int, new_top: float, new_c: float, cost: tuple[int, int] = (0, 0)
    ) -> tuple[float, int, float] | None:
        """(not fixing, moves added, bytes) of an option leaving ``top`` at ``new_top`` and ``c`` at ``new_c``,
        given its ``cost`` (moves added, bytes moved); None: no gain."""
        peak, new_peak = self.load[k][top], max(new_top, new_c)
        if new_peak >= peak * (1 - 1e-9):
            return None
        moves, moved = cost
        fixes = new_peak <= self.target(k) * (1 + 1e-9)
        return (0.0, moves, float(moved)) if fixes else (1.0, moves, moved / (peak - new_peak))

    def _cost(self, row: int, slot: int) -> tuple[int, int]:
        """(replica moves added, bytes moved) by moving ``row`` to broker ``slot``, against the live layout:
        onto a broker that does not hold the partition live adds one, back onto one that does saves one."""
        i = int(self.part[row])
        live = self.live[i]
        moves = int(int(self.brokers[slot]) not in live) - int(int(self.brokers[self.slot[row]]) not in live)
        return moves, moves * int(self.sizes[i])

    def _slot_of(self, broker: int) -> int | None:
        slot = int(np.searchsorted(self.brokers, broker))
        return slot if slot < len(self.brokers) and int(self.brokers[slot]) == broker else None

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
            key = self._key(k, top, c, load[top] - delta / cap[top], load[c] + delta / cap[c])
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
                key = self._key(k, top, c, float(new_top[n]), float(new_c[n]))
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

    def _transfer_chains(self, k: int, r: int, top: int) -> list[Option]:
        """Leadership passed along ``top`` -> c -> d (kind 0): ``r``'s partition to its follower c, one
        that c leads to its follower d, and, closing the cycle, one that d leads back to ``top``.

        The path leaves c's leader count as it was, the cycle every count:
        where the leader counts sit at their band, these reach loads that a
        single transfer or a pair cannot without moving data.
        """
        i = int(self.part[r])
        delta = self.as_leader[k][i] - self.as_follower[k][i]
        if not self.lead[r] or delta <= 0:
            return []
        load, cap, out = self.load[k], self.capacity[k], list[Option]()
        on_top = self.rows_on(top)
        followed_by_top = self.part[on_top[~self.lead[on_top]]]
        for row in self._rows_of(i):
            c = int(self.slot[row])
            if row == r:
                continue
            led = self.rows_on(c)
            led = led[self.lead[led] & (self.part[led] != i)]
            passed = self.row_amount[k][led] - self._follower_amount(k, led)
            for n in np.argsort(np.abs(delta - passed), kind="stable")[:CANDIDATES].tolist():
                j_c, j_passed = int(led[n]), float(passed[n])
                j = int(self.part[j_c])
                for j_d in self._rows_of(j):
                    d = int(self.slot[j_d])
                    if d in (top, c):
                        continue
                    new_top, new_c = load[top] - delta / cap[top], load[c] + (delta - j_passed) / cap[c]
                    new_d = load[d] + j_passed / cap[d]
                    path = ((r, top, False, False), (row, c, True, False), (j_c, c, False, False), (j_d, d, True, False))
                    if (key := self._key(k, top, c, new_top, max(new_c, new_d))) is not None:
                        out.append((*key, 0, j_d, path))
                    out += self._close_cycle(k, top, d, (i, j), followed_by_top, path, (new_top, new_c, new_d))
        return out

    def _close_cycle(
        self,
        k: int,
        top: int,
        d: int,
        used: tuple[int, int],
        followed_by_top: np.ndarray,
        path: Change,
        loads: tuple[float, float, float],
    ) -> list[Option]:
        """The best few partitions ``d`` leads and ``top`` follows to hand back to ``top`` after ``path``."""
        cap = self.capacity[k]
        led = self.rows_on(d)
        led = led[self.lead[led] & np.isin(self.part[led], followed_by_top) & ~np.isin(self.part[led], used)]
        back = self.row_amount[k][led] - self._follower_amount(k, led)
        new_top, new_c, new_d = loads
        peaks = np.maximum(new_top + back / cap[top], new_d - back / cap[d])
        out = list[Option]()
        for n in np.argsort(peaks, kind="stable")[:2].tolist():
            l_d = int(led[n])
            key = self._key(k, top, d, float(new_top + back[n] / cap[top]), max(new_c, float(new_d - back[n] / cap[d])))
            if key is not None:
                l_top = self._row_of(int(self.part[l_d]), top)
                out.append((*key, 0, l_d, (*path, (l_d, d, False, False), (l_top, top, True, False))))
        return out

    def _rows_of(self, i: int) -> range:
        """Partition ``i``'s replica rows."""
        return range(int(self.first_row[i]), int(self.first_row[i + 1]))

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
        lead, mine = bool(self.lead[r]), float(self.row_amount[k][r])
        cap, load, out = self.capacity[k], self.load[k], list[Option]()
        for c, all_rows, leads, amounts in held:
            there = self._cost(r, c)
            key = self._key(k, top, c, load[top] - mine / cap[top], load[c] + mine / cap[c], there)
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
                back = self._cost(s_row, top)
                cost = (there[0] + back[0], there[1] + back[1])
                key = self._key(k, top, c, float(new_top[n]), float(new_c[n]), cost)
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
            if not self._may_go(row, slot) or not self._may_enter(i, int(self.slot[row]), slot, self.replicas[i]):
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

        One at a time, then in pairs going opposite ways between two brokers
        (counts unchanged: the pair a load swap leaves once later actions made
        it needless).
        Nothing worse: the rules hold, counts stay in (or closer to) their
        band, and no goal's load rises above its threshold (or above its
        current maximum when it is not met). Each undo saves a move. Returns how many.
        """
        undone = 0
        for row in self._moved_rows():
            if (undo := self._undo_step(row)) is not None and self._harmless((undo,)):
                self._apply_undo((undo,))
                undone += 1
        reverse: dict[tuple[int, int], list[int]] = {}  # (broker slot it is on, slot it goes back to) -> rows
        for row in self._moved_rows():
            if (undo := self._undo_step(row)) is not None:
                reverse.setdefault((int(self.slot[row]), undo[1]), []).append(row)
        for row in self._moved_rows():
            undo = self._undo_step(row)
            if undo is None:
                continue
            for other in reverse.get((undo[1], int(self.slot[row])), ())[:PAIR_TRIES]:
                second = self._undo_step(other)
                if second is None or int(self.part[other]) == int(self.part[row]):
                    continue
                if self._harmless((undo, second)):
                    self._apply_undo((undo, second))
                    undone += 2
                    break
        return undone

    def _moved_rows(self) -> list[int]:
        """Replica rows on a broker that does not hold their partition live, in row order."""
        return np.flatnonzero(self.moved_in).tolist()

    def _undo_step(self, row: int) -> tuple[int, int, bool, bool] | None:
        """The step putting a moved replica back on its partition's first free live broker, if it still is moved."""
        i = int(self.part[row])
        if int(self.brokers[self.slot[row]]) in self.live[i]:
            return None
        for home in sorted(self.live[i] - set(self.replicas[i])):
            back = self._slot_of(home)
            if back is not None:
                return (row, back, bool(self.lead[row]), True)
        return None

    def _harmless(self, change: Change) -> bool:
        """Counts stay in (or closer to) their bands, the rules hold, and no goal rises above its threshold
        (or its current peak when it is not met) after ``change``'s steps."""
        deltas: Counter[int] = Counter()
        leader_deltas: Counter[int] = Counter()
        for row, slot, lead, _ in change:
            deltas[int(self.slot[row])] -= 1
            deltas[slot] += 1
            if lead:
                leader_deltas[int(self.slot[row])] -= 1
                leader_deltas[slot] += 1
        if not all(self._count_ok(self.count, 0, b, d) for b, d in deltas.items() if d):
            return False
        if not all(self._count_ok(self.leaders, 1, b, d) for b, d in leader_deltas.items() if d):
            return False
        for row, slot, _, _ in change:
            i, old, new = int(self.part[row]), int(self.brokers[self.slot[row]]), int(self.brokers[slot])
            if not may_replace(self.replicas[i], old, new, self.view) or not self.usage.room_for(i, new):
                return False
        after = self._loads_after(change)
        return all(
            value <= max(self.target(k), float(self.load[k].max())) * (1 + 1e-9)
            for k in range(len(self.resources))
            if self.bounds[k] > 0
            for value in after[k].values()
        )

    def _apply_undo(self, change: Change) -> None:
        for row, slot, lead, relocate in change:
            self._set(row, slot, lead, relocate)

    def _may_go(self, row: int, slot: int) -> bool:
        """A replica moves at most once: one this pass placed only goes back to a live broker (an undo)."""
        i = int(self.part[row])
        placed = (i, int(self.brokers[self.slot[row]])) in self.twice
        return not placed or int(self.brokers[slot]) in self.live[i]

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
            self.moved_in[row] = new not in self.live[i]
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
