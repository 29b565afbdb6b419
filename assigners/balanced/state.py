"""The layout a ``balanced`` search works on, under every rule an action must keep.

Replica rows (partition, broker slot, leads?), each goal's load per broker
slot per unit of capacity, replica and leader counts against their bands,
and the rules: racks and caps (:mod:`assigners.placement`), a replica moves
at most once, never A->B and B->A in one topic (``sticky``'s rule, counted
against the live layout), and earlier goals accept a later goal's action
(Cruise Control's ``ActionAcceptance``).
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from assigners.metrics import lower_bound_per_weight
from assigners.model import (
    ClusterView,
    Constraints,
    argsort_small,
    live_matrix,
    positions,
    replica_matrix,
    row_any,
    shared_ints,
    topic_codes,
)
from assigners.placement import Usage, may_replace, topic_move_counts
from assigners.policies import (
    Placement,
    absorbable,
    capped_shares,
    leader_racks_of,
    placement_floor,
    placement_shares,
    resolve_placement,
    water_floor,
)

RACK_SUBSETS = 8  # racks up to which rack_floor tries every subset of them under the placement rules

# One action: its steps, each (replica row, new broker slot, leads after, the replica changes broker).
Change = tuple[tuple[int, int, bool, bool], ...]
# A broker's rows and one goal's amounts per role (followers, leaders), ascending by amount, then row.
Roles = tuple[tuple[np.ndarray, np.ndarray], ...]


@dataclass(frozen=True)
class Resource:
    """One load goal: a partition's amount on its leader and on each follower, and the brokers' capacities."""

    name: str
    leader: np.ndarray
    follower: np.ndarray
    capacity: np.ndarray  # per eligible broker slot


class RackFloor(NamedTuple):
    """What the rack rule forces on the racks that carry the most per unit of capacity (GoalSearch.rack_floor)."""

    racks: list[str]
    floor: float  # per unit of capacity (0.0: nothing forced)
    held_by: str = ""  # an earlier goal whose threshold, kept on the other racks, makes these racks lead more


@dataclass(frozen=True)
class HeldGoal:
    """An earlier goal that a leader carries more of, met and kept within ``limit`` per unit of capacity: the
    racks outside a set can lead only so much of it (see :meth:`GoalSearch.rack_floor`)."""

    name: str
    extra: np.ndarray  # per partition, what leading adds to the goal's amount
    follower: np.ndarray
    capacity: np.ndarray  # per eligible broker slot
    limit: float


def band_ends(shares: np.ndarray, slack: float) -> tuple[np.ndarray, np.ndarray]:
    """Per broker, the low and high ends of the counts strictly within ``slack`` of its share (with slack 1:
    the floor and ceiling of the share, so equal brokers end within 1 of each other)."""
    low = np.floor(shares - slack + 1e-9).astype(np.int64) + 1
    high = np.ceil(shares + slack - 1e-9).astype(np.int64) - 1
    return low, high


def counts_outside_bands(replicas: list[list[int]], view: ClusterView, options: Constraints) -> int:
    """How far the replica and leader counts of the eligible brokers are outside their bands in all (the
    exact solver's count goal; :meth:`GoalSearch.count_band` summed, without building a search)."""
    brokers = np.asarray(view.eligible, dtype=np.int64)
    matrix = replica_matrix(replicas)
    on = np.isin(matrix, brokers)
    weight = np.array([view.weight_of[b] for b in view.eligible], dtype=float)
    total = 0
    for leaders, held in ((False, matrix[on]), (True, matrix[:, 0][on[:, 0]] if matrix.size else matrix[on])):
        counts = np.bincount(positions(brokers, held), minlength=len(brokers))
        low, high = band_ends(counts.sum() * weight / weight.sum(), options.balanced_slack(leaders))
        total += int(np.maximum(low - counts, 0).sum() + np.maximum(counts - high, 0).sum())
    return total


def goal_bound(resource: Resource, rf: np.ndarray) -> float:
    """The resource's lower bound per unit of capacity (see :func:`assigners.metrics.load_lower_bound`)."""
    return lower_bound_per_weight(resource.leader, resource.follower, rf, np.asarray(resource.capacity, dtype=float))


def _knapsack(extra: np.ndarray, goal: HeldGoal) -> tuple[float, float]:
    """What leaders may add to a goal's ``extra`` amounts at no cost to ``goal`` (its own extra amount 0), and
    the most per unit of it otherwise: any set of leaders adding ``w`` to the held goal adds at most
    ``free + w * ratio`` here."""
    costs = np.maximum(goal.extra, 0.0)
    paid = costs > 0
    free = float(extra[~paid].sum())
    ratio = float((extra[paid] / costs[paid]).max()) if paid.any() else 0.0
    return free, ratio


class _Sets:
    """Each partition's live brokers as a set, built the first time it is asked for (a search looks at a
    few thousand partitions of a million)."""

    def __init__(self, lists: list[list[int]]) -> None:
        self.lists, self.sets = lists, dict[int, set[int]]()

    def __getitem__(self, i: int) -> set[int]:
        found = self.sets.get(i)
        if found is None:
            found = self.sets[i] = set(self.lists[i])
        return found


class _Journal(NamedTuple):
    """What :meth:`GoalSearch.roll_back` restores: the action count and the replicas the pass had placed
    when the journal began, and per step since (row, slot it left, led there, relocated, its partition's
    replicas before); and the row that stays put meanwhile."""

    actions: int
    twice: set[tuple[int, int]]
    steps: list[tuple[int, int, bool, bool, list[int]]]
    pinned: int  # the row the trial relocated


class UndoMark(NamedTuple):
    """Where an undo pass started (:mod:`assigners.balanced.undo`): the broker slots' versions, the step count
    (:attr:`GoalSearch.changed_at` tells the partitions changed since) and the goals' limits; what changed
    since is all the next pass needs to ask again. ``pairs``: the moved replica rows then and the two slots
    of each one's pair group as one key (-1: none)."""

    slots: np.ndarray
    step: int
    limits: list[float]
    pairs: tuple[np.ndarray, np.ndarray] | None = None


class GoalSearch:
    """Replica rows (partition, broker slot, leads?) and per-goal broker loads, under every rule."""

    def __init__(
        self,
        replicas: list[list[int]],
        partitions: pd.DataFrame,
        view: ClusterView,
        resources: list[Resource],
        options: Constraints,
        since: list[list[int]] | None = None,
        matrix: np.ndarray | None = None,
    ) -> None:
        """``since``: the layout the topic rule counts moves from, when not the live one (``partitions``'
        ``current``): a search that starts from its own plan as if executed still keeps the rule against
        the layout the plan will be executed on. ``matrix``: ``replicas``' replica matrix, where the caller
        has it (read only)."""
        self.replicas, self.view, self.resources, self.options = replicas, view, resources, options
        self.brokers = np.asarray(view.eligible, dtype=np.int64)
        self.weight = np.array([view.weight_of[b] for b in view.eligible], dtype=float)  # per broker slot
        self.broker_ids = self.brokers.tolist()
        self.slots = {b: slot for slot, b in enumerate(self.broker_ids)}
        self.live = _Sets(list(partitions["current"]))
        self.topic = topic_codes(partitions)
        self.topics, self.numbers = partitions["topic"].tolist(), partitions["partition"].tolist()
        self.racks = sorted({view.domain_of[b] for b in view.eligible})  # the eligible brokers' racks (domains)
        self.rack_of = np.array([self.racks.index(view.domain_of[b]) for b in view.eligible], dtype=np.int64)
        self.rf = partitions["rf"].to_numpy(dtype=np.int64)
        self.required = view.required_domains_each(self.rf)  # racks each partition must span
        self.spans_every_rack = self.required >= view.n_domains
        # the placement rules (assigners.policies): the brokers each partition may use, partitions never moved
        self.placement = resolve_placement(options, partitions, view)
        self.sizes = partitions["size_bytes"].to_numpy(dtype=np.int64)
        matrix = replica_matrix(replicas) if matrix is None else matrix
        self.usage = Usage(replicas, self.sizes, view, matrix)
        self.bounds = [goal_bound(r, self.rf) for r in resources]
        self.ratios = [options.balanced_ratio(r.name) for r in resources]  # each goal's threshold
        self._inputs = (partitions, resources, options)
        self.floors, self.placement_floors, self.reachable = self._kept_floors()
        self.slack = [options.balanced_slack(False), options.balanced_slack(True)]  # replicas, leaders
        part, position = np.nonzero(np.isin(matrix, self.brokers))
        self.part, self.slot = part, positions(self.brokers, matrix[part, position])
        self.lead = position == 0
        live = live_matrix(partitions)  # what self.live lists
        # rows on a broker that does not hold their partition live (the plan moved them there)
        self.moved_in = ~row_any(live[part] == self.brokers[self.slot][:, None])
        self.live_matrix = live
        # per goal: each partition's amount as leader / as follower (lists for scalar lookups), each row's amount
        self.as_leader, self.as_follower = _amount_lists(resources)
        self.capacity = [r.capacity.tolist() for r in resources]
        self.row_amount = [np.where(self.lead, r.leader[part], r.follower[part]) for r in resources]
        self.load = np.zeros((len(resources), len(self.brokers)))
        for k, r in enumerate(resources):
            np.add.at(self.load[k], self.slot, self.row_amount[k] / r.capacity[self.slot])
        # per goal, what loads_after reads (the load rows are views: they follow every step)
        self.goal_rows = list(zip(self.load, self.capacity, self.as_leader, self.as_follower))
        self.first_row = np.searchsorted(self.part, np.arange(len(replicas) + 1))  # a partition's rows are contiguous
        by_slot = argsort_small(self.slot)  # stable: each slot's rows ascending
        ends = np.searchsorted(self.slot[by_slot], np.arange(len(self.brokers) + 1))
        # rows per broker slot, sorted; an action deletes and inserts its rows (a broker of a few brokers holds
        # tens of thousands: sorting them again after each action cost more than the search)
        self._rows = [by_slot[ends[b] : ends[b + 1]] for b in range(len(self.brokers))]
        self.version = np.zeros(len(self.brokers), dtype=np.int64)  # per slot: bumped whenever its rows change
        self.count = np.bincount(self.slot, minlength=len(self.brokers)).astype(np.int64)
        self.leaders = np.bincount(self.slot[self.lead], minlength=len(self.brokers)).astype(np.int64)
        self.share = [self._shares(self.count.sum(), self.count), self._shares(self.leaders.sum())]
        # (topic, from, to) of the plan's moves as they stand, against the live layout (a partition's
        # moves are every pair of a broker it leaves and one it joins): never the reverse as well
        self.since = self.live if since is None else _Sets(since)
        span = int(self.brokers.max(initial=0)) + 1
        self.moved = topic_move_counts(matrix, live if since is None else replica_matrix(since), self.topic, span)
        self.twice: set[tuple[int, int]] = set()  # (partition, broker) replicas this pass placed
        self._start_caches(view)
        self._default_modes()
        self._hold_met_goals()

    def _default_modes(self) -> None:
        """How the search runs, which its callers set: by default as any search."""
        # brokers a replica may move onto besides its live home (None: any), see strategy._onto_new_brokers
        self.landing: frozenset[int] | None = None
        self.batch = 1  # options a goal round applies at most (goals._apply_more)
        self.widen = False  # where the usual candidates give no accepted action, try more (goals.WIDER)
        # per partition of a rule with leader_racks (not frozen), those racks: with keep_soft, a replica there
        # never leaves them while it is its partition's only one, nor one on a preferred broker of its rule
        # (prefer_tags) for one that is not (prefer.leader_racks_searched, prefer.prefer_searched)
        self.keep_soft = False
        racks = leader_racks_of(self.placement)
        self.leader_racks = {} if racks is None else {i: frozenset(r) for i, r in enumerate(racks) if r}

    def _shares(self, total: float, replicas: np.ndarray | None = None) -> np.ndarray:
        """Each broker slot's share of ``total`` (leaders; or ``replicas``, the counts per slot) by weight;
        under the placement rules none above what the rules let it hold, and the replicas within their racks
        where the rack rule pins the racks' totals (:func:`assigners.policies.placement_shares`)."""
        if self.placement is None:
            shares: np.ndarray = total * self.weight / self.weight.sum()
            return shares
        if replicas is None:
            weight = dict(zip(self.broker_ids, self.weight.tolist()))
            capped = capped_shares(float(total), weight, self.placement.caps)
        else:
            racks = np.bincount(self.rack_of, weights=replicas, minlength=len(self.racks)).tolist()
            capped, _ = placement_shares(self.view, self.rf, dict(zip(self.racks, racks)), self.placement.caps)
        return np.array([capped[b] for b in self.broker_ids], dtype=float)

    def _kept_floors(self) -> tuple[list[RackFloor], list[tuple[list[int], float]], list[float]]:
        """:meth:`_reachable`, the same for every search of the plan's inputs: worked out once (the floors and
        bounds copied, as :meth:`hold_earlier_goals` raises them; the placement rules' floors only read)."""
        floors, confined, reachable = self.view.derived("floors", self._inputs, self._reachable)
        return list(floors), confined, list(reachable)

    def _reachable(self) -> tuple[list[RackFloor], list[tuple[list[int], float]], list[float]]:
        """Per goal, the racks and load per unit of capacity the rack rule forces (:meth:`rack_floor`), the
        brokers and load the placement rules confine (:func:`assigners.policies.placement_floor`), and the
        reachable bound: the largest of them and the goal's lower bound, which the goal's ratio applies to."""
        resources = self.resources
        # a goal whose leaders carry what its followers do (disk, bytes in: one array for both) has no leader term
        floors = [
            self.rack_floor(r.follower, r.capacity, None if r.leader is r.follower else r.leader) for r in resources
        ]
        confined: list[tuple[list[int], float]] = [
            ([], 0.0)
            if self.confining is None
            else placement_floor(
                self.confining,
                np.asarray(r.leader, dtype=float),
                np.asarray(r.follower, dtype=float),
                self.rf,
                dict(zip(self.broker_ids, np.asarray(r.capacity, dtype=float).tolist())),
                self.live.lists,
            )
            for r in resources
        ]
        bounds = zip(self.bounds, floors, confined, strict=True)
        return floors, confined, [max(bound, floor, held) for bound, (_, floor, _), (_, held) in bounds]

    @property
    def confining(self) -> Placement | None:
        """The placement rules where they keep replicas off brokers or in place, which bounds the loads (soft
        rules alone do not: the floors are those of a cluster without rules)."""
        return self.placement if self.placement is not None and self.placement.confines else None

    def _start_caches(self, view: ClusterView) -> None:
        """What the search asks over and over, kept until the layout changes under it."""
        self._by_role: tuple[int, dict[int, tuple[int, Roles]]] = (-1, {})  # goal, slot -> (version, by_role)
        self._led: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}  # slot -> (version, goal, led_by)
        # per role (replicas, leaders) and slot, the band (see band): the shares and slacks never change
        self._bands = [
            list(zip(*(ends.tolist() for ends in band_ends(shares, slack))))
            for shares, slack in zip(self.share, self.slack)
        ]
        self._ceilings: list[list[int]] = [self._held_replica_ceilings(), [high for _, high in self._bands[1]]]
        # may_step's answers, row x slots + slot -> (answer, the slot's version for a capped slot (else 0), how
        # often a replica of the row's topic had moved): one flat dict, invalidated by counting, not by popping
        self._steps: dict[int, tuple[bool, int, int]] = {}
        self._slot_count = len(self.brokers)
        self._costs: dict[int, tuple[int, int]] = {}  # see cost
        self.undo_marks: dict[str, UndoMark] = {}  # per kind of undo pass, where its last pass started
        self._topic_moved = [0] * (int(self.topic.max(initial=-1)) + 1)
        self._row_topic = self.topic[self.part]  # each row's topic
        # per row as lists, for the scalar rules a round asks thousands of times (a list item costs a
        # fraction of a numpy scalar's); the slots are kept in step with ``slot`` by set_row
        # one int object per distinct value (model.shared_ints): 3M rows x 3 lists hold 8 bytes a row, not 36
        self.part_of = shared_ints(self.part).tolist()  # each row's partition
        self._topic_of, self._slot_of = shared_ints(self._row_topic).tolist(), shared_ints(self.slot).tolist()
        self._capped = {slot for slot, b in enumerate(view.eligible) if view.capped(b)}
        self._moved_from: dict[int, np.ndarray] = {}  # see moved_from
        self._live_rows: tuple[np.ndarray, np.ndarray] | None = None  # see rows_live_on
        self._live_rows_of: dict[int, np.ndarray] = {}  # rows_live_on per slot: the live layout never changes
        self._required_of: dict[int, int] = {}  # see _needs
        self.steps = 0  # steps applied (set_row), for what is kept until the next one
        self.changed_at = np.zeros(len(self.first_row) - 1, dtype=np.int64)  # per partition: the step last changing it
        self.actions = 0  # actions applied (apply)
        self._journal: _Journal | None = None  # see keep_journal
        self._limits: tuple[int, list[float]] = (-1, [])  # (steps, each goal's limit): see harmless
        self.lightest_sums: dict[int, np.ndarray] = {}  # per goal, for shed.worth_shedding (built there, once)
        self.least_kept: dict[int, np.ndarray] = {}  # per goal, for goals.dominant_home (built there, once)
        self.any_forced = any(self.forced(k) for k in range(len(self.resources)))  # see accepted_after

    def _hold_met_goals(self) -> None:
        """Each goal's reachable bound with the earlier goals the layout meets held (:meth:`hold_earlier_goals`)."""
        self._racks_alone = list(zip(self.floors, self.reachable))  # what the rack rule forces alone
        self._held: dict[int, tuple[tuple[int, float], ...]] = {}  # per goal, (earlier goal, its target) held
        for k in range(len(self.resources)):
            self.hold_earlier_goals(k)

    def hold_earlier_goals(self, k: int) -> None:
        """Goal ``k``'s reachable bound, raised to what the racks must carry with the earlier goals met now kept
        within their thresholds (:meth:`rack_floor`'s ``held``) where that is higher.

        A goal met stays met (:meth:`accepted_after`, :meth:`harmless`), so the
        bound holds for the rest of the search; a goal the search meets
        later, or a threshold raised, gives it again when goal ``k``'s turn
        comes (goals.balance_goal).
        """
        resource = self.resources[k]
        if resource.leader is resource.follower or self.bounds[k] <= 0:
            return
        held = tuple(
            (j, self.target(j))
            for j, earlier in enumerate(self.resources[:k])
            if earlier.leader is not earlier.follower and self.bounds[j] > 0 and self.met(j)
        )
        if held == self._held.get(k, ()):
            return
        self._held[k] = held
        floors: dict[tuple[int, tuple[tuple[int, float], ...]], RackFloor]  # (goal, held) -> its rack floor
        floors = self.view.derived("held floors", self._inputs, dict)
        floor = floors.get((k, held))
        if floor is None:
            goals = [
                HeldGoal(
                    self.resources[j].name,
                    np.asarray(self.resources[j].leader, dtype=float) - self.resources[j].follower,
                    np.asarray(self.resources[j].follower, dtype=float),
                    np.asarray(self.resources[j].capacity, dtype=float),
                    target * (1 + 1e-9),
                )
                for j, target in held
            ]
            floor = floors[k, held] = self.rack_floor(resource.follower, resource.capacity, resource.leader, goals)
        self.floors[k], self.reachable[k] = self._racks_alone[k]
        if floor.held_by and floor.floor > self.reachable[k] * (1 + 1e-9):
            self.floors[k], self.reachable[k] = floor, floor.floor
        self.any_forced = any(self.forced(j) for j in range(len(self.resources)))
        self._limits = (-1, [])

    def amount(self, k: int, rows: np.ndarray) -> np.ndarray:
        """Goal ``k``'s amount of each replica row in its current role."""
        out: np.ndarray = self.row_amount[k][rows]
        return out

    def goals_met(self) -> list[bool]:
        """Per load goal: within its threshold (of what the racks leave within reach)?"""
        return [self.met(k) for k in range(len(self.resources))]

    def met(self, k: int) -> bool:
        """Is goal ``k`` within its threshold (of what the racks leave within reach)?"""
        return float(self.load[k].max(initial=0.0)) <= self.target(k) * (1 + 1e-9)

    def ratio(self, k: int) -> float:
        """Goal ``k``'s most loaded broker over the goal's lower bound."""
        return float(self.load[k].max(initial=0.0)) / self.bounds[k] if self.bounds[k] > 0 else 0.0

    def forced(self, k: int) -> bool:
        """Does the rack rule keep goal ``k``'s lower bound out of reach (its floor above the bound)?"""
        return self.reachable[k] > self.bounds[k] * (1 + 1e-9)

    def target(self, k: int) -> float:
        """The most load per unit of capacity goal ``k`` allows a broker: its ratio times the reachable bound."""
        return self.ratios[k] * self.reachable[k]

    def band(self, b: int, leaders: int) -> tuple[int, int]:
        """Counts strictly within the slack of broker slot ``b``'s weighted share (of replicas, or leaders).

        With slack 1: the floor and ceiling of the share, so equal brokers end within 1 of each other.
        """
        return self._bands[leaders][b]

    def count_band(self, b: int, leaders: int) -> tuple[int, int]:
        """How far broker slot ``b`` is below / above its band (replicas, or leaders if ``leaders``)."""
        have = int((self.leaders if leaders else self.count)[b])
        low, high = self.band(b, leaders)
        return max(0, low - have), max(0, have - high)

    def count_ok(self, counts: np.ndarray, leaders: int, b: int, delta: int) -> bool:
        """May broker ``b``'s count change by ``delta`` without leaving (or leaving further) its band, or, in a
        rack the rule forces above the bands, its held ceiling (:meth:`_held_replica_ceilings`)?"""
        after = int(counts[b]) + delta
        low, high = self.band(b, leaders)
        return (
            (low <= after <= high) or (delta < 0 and after >= low) or (delta > 0 and after <= self.ceiling(b, leaders))
        )

    def ceiling(self, b: int, leaders: int) -> int:
        """The most replicas (or leaders) broker slot ``b`` may take: its band's high end, or above it its held
        ceiling (:meth:`_held_replica_ceilings`)."""
        return self._ceilings[leaders][b]

    def forced_above_bands(self) -> bool:
        """Does the rack rule hold some broker above its replica band (:meth:`_held_replica_ceilings`)?"""
        return any(most > high for most, (_, high) in zip(self._ceilings[0], self._bands[0]))

    def split_forced_racks(self) -> None:
        """Let the brokers of a rack forced above the bands split its replicas as unevenly as leaves its other
        brokers at their band's top: the counts stay as far outside their bands in all (the exact solver's
        count goal), and a broker holding a hot replica may pass its other replicas to its rack mates
        (searches._forced_racks_apart)."""
        self._ceilings[0] = self._held_replica_ceilings(apart=True)

    def _held_replica_ceilings(self, apart: bool = False) -> list[int]:
        """Per broker slot, the most replicas it may take: its band's high end, or, in a rack that must hold a
        replica of each partition spanning every rack and so more than its brokers' bands, one above that
        forced share (its ceiling with the slack), as the load goals are held to a ratio of their rack floor.

        Every broker of such a rack is above its band whatever the plan: one
        replica passed between two of them leaves the counts as far outside
        their bands in all, which is as close as the racks allow (the
        oracle's first goal), and frees the load goals to split the rack's
        load between them (racks of 3, 2 and 2 brokers: disk 1.29x -> 1.22x
        the bound, where the solver's best is 1.225x).
        """
        ceilings = [high for _, high in self._bands[0]]
        if len(self.racks) < 2:
            return ceilings
        rack_weight = np.bincount(self.rack_of, weights=self.weight, minlength=len(self.racks))
        spanning = int(self.spans_every_rack.sum())
        highs = [high for _, high in self._bands[0]]
        rack_high = np.bincount(self.rack_of, weights=highs, minlength=len(self.racks))
        for b in range(len(ceilings)):
            rack = rack_weight[self.rack_of[b]]
            forced = spanning * self.weight[b] / rack if rack > 0 else 0.0
            if forced > ceilings[b]:
                most = math.ceil(forced + self.slack[0] - 1e-9)
                if apart:  # the rack's share less what its other brokers hold at their band's top
                    most = max(most, spanning - int(rack_high[self.rack_of[b]] - highs[b]))
                ceilings[b] = max(ceilings[b], most)
        return ceilings

    def rows_on(self, slot: int) -> np.ndarray:
        """Replica rows on a broker slot, in row order (deterministic)."""
        return self._rows[slot]

    def rows_of(self, i: int) -> range:
        """Partition ``i``'s replica rows."""
        return range(int(self.first_row[i]), int(self.first_row[i + 1]))

    def row_of(self, i: int, slot: int) -> int:
        """The replica row of partition ``i`` on broker slot ``slot``."""
        rows = range(int(self.first_row[i]), int(self.first_row[i + 1]))
        return next(row for row in rows if int(self.slot[row]) == slot)

    def moved_from(self, slot: int) -> np.ndarray:
        """Rows the plan moved away from broker ``slot`` (their partition is live there), in row order; kept
        until a replica of a partition live there moves (leadership rounds ask it over and over)."""
        known = self._moved_from.get(slot)
        if known is None:
            rows = self.rows_live_on(slot)
            known = self._moved_from[slot] = rows[self.moved_in[rows]]
        return known

    def rows_live_on(self, slot: int) -> np.ndarray:
        """The rows of every partition live on broker ``slot``, in row order (the live layout never changes: a
        broker's share of it is gathered once, for all brokers, the first time one is asked for)."""
        if self._live_rows is None:
            part, position = np.nonzero(np.isin(self.live_matrix, self.brokers))
            slots = positions(self.brokers, self.live_matrix[part, position])
            order = argsort_small(slots)  # stable: each slot's partitions ascending
            ends = np.searchsorted(slots[order], np.arange(len(self.brokers) + 1))
            self._live_rows = (part[order], ends)
        parts, ends = self._live_rows
        rows = self._live_rows_of.get(slot)
        if rows is None:
            mine = parts[ends[slot] : ends[slot + 1]]
            starts, lengths = self.first_row[mine], self.first_row[mine + 1] - self.first_row[mine]
            rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
            self._live_rows_of[slot] = rows
        return rows

    def holding_moved_from(self, slot: int) -> list[int]:
        """Broker slots holding replicas the plan moved away from ``slot`` (their partition is live there)."""
        slots: list[int] = np.unique(self.slot[self.moved_from(slot)]).tolist()
        return [s for s in slots if s != slot]

    def slot_of(self, broker: int) -> int | None:
        """Broker id -> its slot among the eligible brokers (None: not eligible)."""
        return self.slots.get(broker)

    def follower_amount(self, k: int, rows: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.resources[k].follower[self.part[rows]]
        return out

    def by_role(self, k: int, c: int) -> Roles:
        """Broker slot ``c``'s replica rows and goal ``k``'s amounts, per role (followers, leaders),
        ascending by amount, then row; kept until ``c`` changes (one goal's at a time)."""
        goal, cached = self._by_role
        if goal != k:
            cached = {}
            self._by_role = (k, cached)
        hit = cached.get(c)
        if hit is None or hit[0] != self.version[c]:
            rows = self.rows_on(c)
            lead, amounts = self.lead[rows], self.row_amount[k][rows]
            roles = []
            for role in (False, True):
                mine, theirs = rows[lead == role], amounts[lead == role]
                order = np.argsort(theirs, kind="stable")  # rows ascending: ties stay in row order
                roles.append((mine[order], theirs[order]))
            hit = cached[c] = (int(self.version[c]), tuple(roles))
        return hit[1]

    def led_by(self, k: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows broker slot ``c`` leads, in row order, and the amount of goal ``k`` each passes on with its
        leadership; kept until ``c`` changes (a leadership round asks it of most brokers, and rounds follow each
        other changing two or three)."""
        hit = self._led.get(c)
        if hit is None or hit[0] != self.version[c] or hit[1] != k:
            rows = self.rows_on(c)
            rows = rows[self.lead[rows]]
            passed = self.row_amount[k][rows] - self.follower_amount(k, rows)
            hit = self._led[c] = (int(self.version[c]), k, rows, passed)
        return hit[2], hit[3]

    def name(self, i: int) -> str:
        """Partition ``i`` as topic:partition, as the config names partitions."""
        return f"{self.topics[i]}:{self.numbers[i]}"

    def rack_floor(
        self,
        follower: np.ndarray,
        capacity: np.ndarray,
        leader: np.ndarray | None = None,
        held: Sequence[HeldGoal] = (),
    ) -> RackFloor:
        """The racks whose brokers must carry the most load per unit of capacity under the rack rule alone,
        and that load (0.0 where the rule forces nothing).

        A partition that must span ``d`` racks has a replica, at least a
        follower, in at least ``d - (D - k)`` of any ``k`` of the ``D``
        racks (the other racks give it one domain each at most). Over the
        ``k`` racks of least capacity that is a floor on their load; the
        worst ``k`` is the floor of the cluster (``k = 1``: the smallest
        rack holds a replica of each partition that spans every rack).

        With ``leader`` amounts (a goal a leader carries more of), the leader
        counts held in their bands add to it: the racks' brokers lead at
        least the low ends of their bands, each leader carrying at least the
        smallest leader-over-follower amounts of the cluster (racks of 6, 3
        and 3 brokers: a 3-broker rack holds a third of the replicas and a
        quarter of the leaders, which puts the combined load 1.2x above its
        bound, the followers alone 0.8x).

        Or, with ``held`` goals (earlier ones a leader carries more of, kept
        within their thresholds), what the other racks cannot lead: their
        brokers carry at most the held goal's limit, so they lead at most
        that much of its leader-over-follower amounts, and with them at most
        the best ratio of this goal's to it (a fractional knapsack's bound);
        the racks lead the rest (racks of 25, 13 and 12 brokers, RF 3: bytes
        out held to 1.05x its bound on the large rack leaves the two small
        ones leading 47.5 % of it, which puts the combined load at 1.180x its
        bound, the leader counts 1.035x).
        """
        if len(self.racks) < 2:
            return RackFloor([], 0.0)
        capacity = np.asarray(capacity, dtype=float)
        room_of = np.bincount(self.rack_of, weights=capacity, minlength=len(self.racks))
        smallest = sorted(range(len(self.racks)), key=lambda d: (room_of[d], d))  # ties: by name
        # what leading adds per partition, and the least leaders each broker holds (a leader term only)
        extra = None if leader is None else np.maximum(np.asarray(leader, dtype=float) - follower, 0.0)
        lead_low = None if extra is None else self._lowest_leader_counts()
        knapsacks = [] if extra is None else [_knapsack(extra, goal) for goal in held]
        extra_total = 0.0 if extra is None else float(extra.sum())
        held_forced: dict[tuple[int, int], float] = {}  # (held goal, k): its followers the other racks hold
        most = None  # under the placement rules, what each broker may carry at all: a rack's others take the rest
        if self.confining is not None:
            most = absorbable(
                self.confining, follower if leader is None else leader, follower, self.live.lists, self.broker_ids
            )
        best = RackFloor([], 0.0)
        # what the followers of any k racks carry, and the smallest n leader amounts: the same for many sets
        by_k: dict[int, float] = {}
        by_leaders: dict[int, float] = {}
        in_rack = self.rack_of[None, :] == np.arange(len(self.racks))[:, None]  # rack x slot
        sets = self._rack_sets(smallest, every=bool(held))
        # every subset asks for many leader counts: then one sort answers them all
        sums = (
            None if extra is None or len(sets) < len(smallest) else np.concatenate(([0.0], np.cumsum(np.sort(extra))))
        )
        for racks in sets:
            k = len(racks)
            if k not in by_k:
                by_k[k] = float(self.replicas_in_any(k) @ follower)
            slots = in_rack[racks].any(axis=0)
            led, by = 0.0, ""  # what the racks' leaders add at least, and the held goal that says so
            if extra is not None and lead_low is not None:
                leaders = min(int(lead_low[slots].sum()), len(extra))
                if sums is None and leaders and leaders not in by_leaders:  # without sorting a million of them
                    by_leaders[leaders] = float(np.partition(extra, leaders - 1)[:leaders].sum())
                led = float(sums[leaders]) if sums is not None else by_leaders.get(leaders, 0.0)
            for n, (goal, (free, ratio)) in enumerate(zip(held, knapsacks)):
                if (n, k) not in held_forced:  # the other racks' forced replicas, followers at least
                    held_forced[n, k] = float(self.replicas_in_any(len(smallest) - k) @ goal.follower)
                room = max(goal.limit * float(goal.capacity[~slots].sum()) - held_forced[n, k], 0.0)
                rest = extra_total - min(extra_total, free + room * ratio)  # what the racks must lead at least
                if rest > led * (1 + 1e-9):
                    led, by = rest, goal.name
            carried = by_k[k] + led
            room = float(room_of[racks].sum())
            floor = carried / room if room > 0 else 0.0
            if most is not None:
                floor = water_floor(carried, capacity[slots], most[slots])
            if floor > best.floor * (1 + 1e-9):
                best = RackFloor(sorted(self.racks[d] for d in racks), floor, by)
        return best

    def replicas_in_any(self, m: int) -> np.ndarray:
        """Per partition, the replicas any ``m`` racks hold at least: it spans ``d`` of the ``D`` racks, and the
        other ``D - m`` give it one each at most, so ``d - (D - m)``."""
        kept: np.ndarray = np.maximum(self.required - (len(self.racks) - m), 0)
        return kept

    def _rack_sets(self, smallest: list[int], every: bool = False) -> list[list[int]]:
        """The sets of racks :meth:`rack_floor` tries: the ``k`` of least capacity, each ``k``; under the
        placement rules (where a rack's brokers may not all take their share), or ``every``, each proper subset
        (with held goals the least capacity is not always the worst: the other racks lead less of them)."""
        if (self.confining is None and not every) or len(smallest) > RACK_SUBSETS:
            return [smallest[:k] for k in range(1, len(smallest))]
        return [list(c) for k in range(1, len(smallest)) for c in itertools.combinations(sorted(smallest), k)]

    def _lowest_leader_counts(self) -> np.ndarray:
        """Per broker slot, the low end of its leader band (:meth:`band`), from the shares alone."""
        weight = self.weight
        share = len(self.rf) * weight / weight.sum() if weight.sum() > 0 else weight  # every partition leads
        low: np.ndarray = np.maximum(band_ends(share, self.options.balanced_slack(True))[0], 0)
        return low

    def in_racks(self, racks: list[str]) -> np.ndarray:
        """The broker slots in ``racks``."""
        slots: np.ndarray = np.flatnonzero(np.isin(self.rack_of, [self.racks.index(r) for r in racks]))
        return slots

    def cost(self, row: int, slot: int) -> tuple[int, int]:
        """(replica moves added, bytes moved) by moving ``row`` to broker ``slot``, against the live layout:
        onto a broker that does not hold the partition live adds one, back onto one that does saves one."""
        key = (row * self._slot_count + self._slot_of[row]) * self._slot_count + slot
        known = self._costs.get(key)
        if known is None:  # what it reads never changes: the live layout, and where the row is (in the key)
            i = self.part_of[row]
            live, ids = self.live[i], self.broker_ids
            moves = int(ids[slot] not in live) - int(ids[self._slot_of[row]] not in live)
            known = self._costs[key] = (moves, moves * self.usage.sizes[i])
        return known

    def legal(self, change: Change) -> bool:
        """Counts, racks, caps, one move per replica and the topic rule for an option's steps."""
        # loops written out, not any() / all() over generators: asked of nearly every option a round lists
        for step in change:
            if step[3]:
                break
        else:  # leadership only: no data moves, only leader counts change
            if self.placement is not None and any(self.placement.frozen[self.part_of[row]] for row, *_ in change):
                return False  # a frozen partition keeps its leader too
            deltas: dict[int, int] = {}
            lead_of = self.lead
            for row, slot, lead, _ in change:
                deltas[slot] = deltas.get(slot, 0) + int(lead) - int(lead_of[row])
            for b, d in deltas.items():  # noqa: SIM110 (as above)
                if d and not self.count_ok(self.leaders, 1, b, d):
                    return False
            return True
        if len(change) == 1:  # a move: the counts change
            r, c, lead, _ = change[0]
            if not self.counts_allow_move(r, c, lead):
                return False
        elif self._topic_of[change[0][0]] == self._topic_of[change[1][0]]:
            return False  # a swap of two replicas of one topic would move it A->B and B->A
        for row, slot, _, _ in change:  # noqa: SIM110 (as above)
            if not self.may_step(row, slot):
                return False
        return True

    def counts_allow_move(self, row: int, slot: int, lead: bool) -> bool:
        """May ``row`` move to broker ``slot`` (leading there if ``lead``) with the counts kept in their bands?"""
        top = self._slot_of[row]
        if not (self.count_ok(self.count, 0, top, -1) and self.count_ok(self.count, 0, slot, +1)):
            return False
        return not lead or (self.count_ok(self.leaders, 1, top, -1) and self.count_ok(self.leaders, 1, slot, +1))

    def may_step(self, row: int, slot: int) -> bool:
        """The rules one step of an action keeps, on their own: ``row`` to broker ``slot`` once, with racks,
        room and the topic rule. A round asks the same of many options (a replica's move and its swaps share
        it), and most fail, which rejects them before they are scored.

        Kept until what the answer reads changes: a replica of the row's topic
        moves (its partition's replicas, the topic's moves, what may move
        again), or, where ``slot`` has a cap, ``slot``'s replicas change
        (its room); the next rounds ask nearly the same (10k partitions:
        7 answers of 10 are found kept).
        """
        stamp = int(self.version[slot]) if slot in self._capped else 0
        key, generation = row * self._slot_count + slot, self._topic_moved[self._topic_of[row]]
        known = self._steps.get(key)
        if known is None or known[1] != stamp or known[2] != generation:
            i = self.part_of[row]
            answer = self.may_go(row, slot) and self.may_enter(i, self._slot_of[row], slot, self.replicas[i])
            known = self._steps[key] = (answer, stamp, generation)
        return known[0]

    def may_go(self, row: int, slot: int) -> bool:
        """A replica moves at most once: one this pass placed only goes back to a live broker (an undo); the
        one a trial relocated stays while it runs (:meth:`keep_journal`)."""
        if self._journal is not None and row == self._journal.pinned:
            return False
        i, ids = self.part_of[row], self.broker_ids
        return (i, ids[self._slot_of[row]]) not in self.twice or ids[slot] in self.live[i]

    def may_enter(self, i: int, old_slot: int, new_slot: int, reps: list[int]) -> bool:
        """May partition ``i``'s replica on ``old_slot`` move to ``new_slot``: racks, room, and no topic pair?

        :func:`assigners.placement.may_replace` and the topic's pairs inline:
        a round asks thousands of new (replica, broker) pairs, and building
        their lists and tuples cost more than the rules.
        """
        old, new = self.broker_ids[old_slot], self.broker_ids[new_slot]
        if self.landing is not None and new not in self.landing and new not in self.live[i]:
            return False
        if self.placement is not None and (self.placement.frozen[i] or new not in self.placement.allowed_of(i)):
            return False
        if new in reps:
            return False
        domain_of = self.view.domain_of
        if self.keep_soft and self._gives_up_soft(i, old, new, reps):
            return False
        after = [new if b == old else b for b in reps]
        if len({domain_of[b] for b in after}) < self._needs(len(reps)) or not self.usage.room_for(i, new):
            return False
        live, now = self.since[i], set(after)
        # a move a -> b of this partition (a left, b joined) beside one b -> a of its topic
        return not self.moved.any_between(int(self.topic[i]), now - live, live - now)

    def _needs(self, replicas: int) -> int:
        """:meth:`ClusterView.required_domains`, kept per replica count."""
        known = self._required_of.get(replicas)
        if known is None:
            known = self._required_of[replicas] = self.view.required_domains(replicas)
        return known

    def loads_after(self, change: Change) -> list[dict[int, float]]:
        """Every goal's load on the brokers ``change`` touches, after it."""
        steps = self._steps_of(change)
        return [_goal_loads_after(goal, steps) for goal in self.goal_rows]

    def _steps_of(self, change: Change) -> list[tuple[int, int, bool, int, bool]]:
        """Per step: (partition, slot it leaves, led there, slot it goes to, leads there)."""
        slot_of, part_of, lead_of = self._slot_of, self.part_of, self.lead
        return [(part_of[row], slot_of[row], bool(lead_of[row]), slot, lead) for row, slot, lead, _ in change]

    def accepted_after(self, k: int, change: Change) -> list[dict[int, float]] | None:
        """:meth:`loads_after` where the goals before ``k`` accept ``change``, else None. They accept where no
        broker rises above an earlier goal's threshold (or above where it was); where the rack rule puts a goal
        out of reach, above an earlier goal's peak if that is higher.

        Where the racks force a goal, the goals after it are often unmet
        too, and the exact solver keeps each goal at the peak it reached while
        it lowers the next: held to the threshold, the brokers below an unmet
        goal's peak were closed to the next goal (racks of 5, 4 and 4 brokers,
        20 partitions: the load 1.133x -> 1.094x the bound, the solver's best
        1.05x; bytes out 1.195x -> 1.207x, its 1.19x). Not elsewhere: where
        the greedy search is short of a goal's best, the passes that come
        back to it start from a worse layout (the e2e fleet's cluster-1: bytes
        in 1.061x -> 1.130x the bound, the load 1.233x -> 1.265x).

        A goal at a time, the first refusal ending it: a round with its goal
        stuck asks hundreds of options, nearly all refused by the first
        earlier goal or two (leader bytes in on a 24-broker 1,000-partition
        cluster: ~680k goal loads computed for all goals, a sixth of its plan).
        """
        steps = self._steps_of(change)
        limits = self.goal_limits() if self.any_forced else None
        after = []
        for j, goal in enumerate(self.goal_rows):
            loads = _goal_loads_after(goal, steps)
            if j < k:
                limit = self.target(j) * (1 + 1e-9) if limits is None else limits[j]
                for b, value in loads.items():
                    if value > goal[0][b] + 1e-12 and value > limit:  # goal[0]: its load row as it stands
                        return None
            after.append(loads)
        return after

    def goal_limits(self) -> list[float]:
        """Per goal, how high a broker's load may rise: its threshold, or its peak where that is above; kept
        until the next step."""
        if self._limits[0] != self.steps:
            peaks = self.load.max(axis=1).tolist()
            limits = [
                max(self.target(k), peaks[k]) * (1 + 1e-9) if self.bounds[k] > 0 else math.inf
                for k in range(len(self.resources))
            ]
            self._limits = (self.steps, limits)
        return self._limits[1]

    def harmless(self, change: Change) -> bool:
        """Counts stay in (or closer to) their bands, the rules hold, and no goal rises above its threshold
        (or its current peak when it is not met) after ``change``'s steps.

        The loads first: they refuse most of what the undo passes ask (on the
        10k bench, 707 of 711 pairs), and their limits are kept until a step.
        """
        steps = self._steps_of(change)
        for goal, limit in zip(self.goal_rows, self.goal_limits()):  # a goal at a time: most fail on the first
            for value in _goal_loads_after(goal, steps).values():
                if not value <= limit:
                    return False
        deltas: dict[int, int] = {}
        leader_deltas: dict[int, int] = {}
        for row, slot, lead, _ in change:
            old_slot = int(self.slot[row])
            deltas[old_slot] = deltas.get(old_slot, 0) - 1
            deltas[slot] = deltas.get(slot, 0) + 1
            if lead:
                leader_deltas[old_slot] = leader_deltas.get(old_slot, 0) - 1
                leader_deltas[slot] = leader_deltas.get(slot, 0) + 1
        if not all(self.count_ok(self.count, 0, b, d) for b, d in deltas.items() if d):
            return False
        if not all(self.count_ok(self.leaders, 1, b, d) for b, d in leader_deltas.items() if d):
            return False
        for row, slot, _, _ in change:
            i, old, new = int(self.part[row]), int(self.brokers[self.slot[row]]), int(self.brokers[slot])
            if not may_replace(self.replicas[i], old, new, self.view) or not self.usage.room_for(i, new):
                return False
            if self.placement is not None and (self.placement.frozen[i] or new not in self.placement.allowed_of(i)):
                return False
            if self.keep_soft and self._gives_up_soft(i, old, new, self.replicas[i]):
                return False
        return True

    def _gives_up_soft(self, i: int, old: int, new: int, reps: list[int]) -> bool:
        """Would partition ``i``'s replica moving from ``old`` to ``new`` leave a preferred broker of its rule
        for one that is not, or take its only one in its leader racks out of them?"""
        placement = self.placement
        preferred = None if placement is None else placement.preferred.get(int(placement.rule_of[i]))
        if preferred is not None and old in preferred and new not in preferred:
            return True
        racks = self.leader_racks.get(i)
        if racks is None:
            return False
        domain_of = self.view.domain_of
        inside = domain_of[old] in racks and domain_of[new] not in racks
        return inside and sum(domain_of[b] in racks for b in reps) == 1

    def new_pass(self) -> None:
        """A replica the last pass placed may move again (see :meth:`may_go`)."""
        self.twice.clear()
        self._steps.clear()

    def apply(self, change: Change) -> None:
        self.actions += 1
        for row, slot, lead, relocate in change:
            self.set_row(row, slot, lead, relocate)

    def apply_steps(self, change: Change) -> None:
        for row, slot, lead, relocate in change:
            self.set_row(row, slot, lead, relocate)

    def keep_journal(self, pinned: int) -> None:
        """Note every step from here on, so that :meth:`roll_back` can take them back (a trial the goal
        search keeps only where it ends better); until then replica row ``pinned`` stays where it is."""
        self._journal = _Journal(self.actions, set(self.twice), [], pinned)
        self._topic_moved[self._topic_of[pinned]] += 1  # may_step's kept answers for it are stale

    @property
    def journaling(self) -> bool:
        return self._journal is not None

    def drop_journal(self) -> None:
        """Keep the steps since :meth:`keep_journal`."""
        assert self._journal is not None
        self._topic_moved[self._topic_of[self._journal.pinned]] += 1  # its row may move again
        self._journal = None

    def roll_back(self) -> None:
        """Take back every step since :meth:`keep_journal`, last first: the layout, the replica lists' order,
        the replicas this pass placed and the action count as they were (the loads up to float rounding)."""
        journal = self._journal
        assert journal is not None
        self._journal = None
        for row, old_slot, was_lead, relocate, reps in reversed(journal.steps):
            self.set_row(row, old_slot, was_lead, relocate)
            self.replicas[self.part_of[row]][:] = reps
        self.twice.clear()
        self.twice.update(journal.twice)
        self.actions = journal.actions

    def set_row(self, row: int, slot: int, lead: bool, relocate: bool) -> None:
        self.steps += 1
        i, old_slot, was_lead = self.part_of[row], self._slot_of[row], bool(self.lead[row])
        if self._journal is not None:
            self._journal.steps.append((row, old_slot, was_lead, relocate, list(self.replicas[i])))
        ordered = self._still_ordered(old_slot, slot)
        old_amount = float(self.row_amount[self._by_role[0]][row]) if ordered else 0.0
        for (load, capacity, as_leader, as_follower), amounts in zip(self.goal_rows, self.row_amount):
            leader, follower = as_leader[i], as_follower[i]
            load[old_slot] -= (leader if was_lead else follower) / capacity[old_slot]
            load[slot] += (leader if lead else follower) / capacity[slot]
            amounts[row] = leader if lead else follower
        self.version[old_slot] += 1
        self.version[slot] += 1
        self.changed_at[i] = self.steps
        self.count[old_slot] -= 1
        self.count[slot] += 1
        self.leaders[old_slot] -= int(self.lead[row])
        self.leaders[slot] += int(lead)
        reps = self.replicas[i]
        old, new = int(self.brokers[old_slot]), int(self.brokers[slot])
        if relocate:
            self._topic_moved[self._topic_of[row]] += 1
            for b in self.live[i]:  # only the brokers partition i is live on see its rows as moved away
                self._moved_from.pop(self.slots.get(b, -1), None)
            self._count_moves(i, reps, -1)
            reps[reps.index(old)] = new
            self._count_moves(i, reps, +1)
            self.usage.remove(i, old)
            self.usage.add(i, new)
            self.moved_in[row] = new not in self.live[i]
            if new not in self.live[i]:
                self.twice.add((i, new))
        if lead and reps[0] != new:
            reps.remove(new)
            reps.insert(0, new)
        if slot != old_slot:
            rows = self._rows[old_slot]
            self._rows[old_slot] = _without(rows, int(rows.searchsorted(row)))
            self._rows[slot] = _with(self._rows[slot], int(self._rows[slot].searchsorted(row)), row)
        self.slot[row], self.lead[row], self._slot_of[row] = slot, lead, slot
        self._reorder(ordered, row, (old_slot, was_lead, old_amount))

    def _count_moves(self, i: int, reps: list[int], by: int) -> None:
        """Partition ``i``'s (topic, from, to) pairs at ``reps`` against the live layout (each broker it left
        with each it joined), added to the topic's move counts ``by`` times."""
        live, now = self.since[i], set(reps)
        self.moved.count_between(int(self.topic[i]), live - now, now - live, by)

    def _still_ordered(self, *slots: int) -> dict[int, Roles]:
        """The :meth:`by_role` orders of ``slots`` that are up to date (before a step changes them)."""
        cached = self._by_role[1]
        return {s: cached[s][1] for s in slots if s in cached and cached[s][0] == self.version[s]}

    def _reorder(self, ordered: dict[int, Roles], row: int, was: tuple[int, bool, float]) -> None:
        """After ``row``'s step, its brokers' :meth:`by_role` orders follow it by a delete and an insert,
        where sorting them again cost more than the search on a cluster of few brokers."""
        old_slot, was_lead, old_amount = was
        slot, lead = int(self.slot[row]), bool(self.lead[row])
        if old_slot in ordered:
            ordered[old_slot] = _sorted_without(ordered[old_slot], was_lead, row, old_amount)
        if slot in ordered:
            ordered[slot] = _sorted_with(ordered[slot], lead, row, float(self.row_amount[self._by_role[0]][row]))
        for s, roles in ordered.items():
            self._by_role[1][s] = (int(self.version[s]), roles)


def _goal_loads_after(
    goal: tuple[np.ndarray, list[float], Sequence[float], Sequence[float]],
    steps: list[tuple[int, int, bool, int, bool]],
) -> dict[int, float]:
    """One goal's load (its load row, capacities, leader and follower amounts) on the brokers ``steps`` touch
    (:meth:`GoalSearch._steps_of`), after them; the amount in each role read inline: asked per option."""
    load, capacity, as_leader, as_follower = goal
    loads: dict[int, float] = {}
    for i, old_slot, was_lead, slot, lead in steps:
        if old_slot not in loads:
            loads[old_slot] = load.item(old_slot)
        loads[old_slot] -= (as_leader[i] if was_lead else as_follower[i]) / capacity[old_slot]
        if slot not in loads:
            loads[slot] = load.item(slot)
        loads[slot] += (as_leader[i] if lead else as_follower[i]) / capacity[slot]
    return loads


def _amount_lists(resources: list[Resource]) -> tuple[list[Sequence[float]], list[Sequence[float]]]:
    """Per goal, each partition's amount as leader and as follower, for scalar lookups: Python floats as a list
    gives them, 8 bytes each (``array('d')``: a list of floats holds a 24-byte object per item, 183 -> 48 MiB
    at 1M partitions), one per amount array, as the goals share most of them (disk's leader and follower
    amounts are both the sizes, bytes in's the rates)."""
    listed: dict[int, Sequence[float]] = {}
    for values in (a for r in resources for a in (r.leader, r.follower)):
        if id(values) not in listed:
            listed[id(values)] = array("d", np.ascontiguousarray(values, dtype=float).tobytes())
    return [listed[id(r.leader)] for r in resources], [listed[id(r.follower)] for r in resources]


def _at(rows: np.ndarray, amounts: np.ndarray, row: int, amount: float) -> int:
    """Where (amount, row) sits in arrays ascending by amount, then row."""
    at = int(amounts.searchsorted(amount, "left"))
    if at < len(amounts) and amounts.item(at) == amount and rows.item(at) < row:
        # past rows tied on the amount: placed by row among them (most amounts are no tie: one search)
        at += int(rows[at : int(amounts.searchsorted(amount, "right"))].searchsorted(row))
    return at


def _sorted_without(roles: Roles, role: bool, row: int, amount: float) -> Roles:
    rows, amounts = roles[int(role)]
    at = _at(rows, amounts, row, amount)
    trimmed = (_without(rows, at), _without(amounts, at))
    return (trimmed, roles[1]) if not role else (roles[0], trimmed)


def _sorted_with(roles: Roles, role: bool, row: int, amount: float) -> Roles:
    rows, amounts = roles[int(role)]
    at = _at(rows, amounts, row, amount)
    grown = (_with(rows, at, row), _with(amounts, at, amount))
    return (grown, roles[1]) if not role else (roles[0], grown)


def _without(values: np.ndarray, at: int) -> np.ndarray:
    """``np.delete(values, at)`` without its argument handling, which costs more than copying a broker's few
    hundred rows (600 rows: 2.1 -> 0.8 us; ``np.insert`` 5.0 -> 0.8 us)."""
    out = np.empty(len(values) - 1, dtype=values.dtype)
    out[:at], out[at:] = values[:at], values[at + 1 :]
    return out


def _with(values: np.ndarray, at: int, value: float) -> np.ndarray:
    """``np.insert(values, at, value)``, likewise."""
    out = np.empty(len(values) + 1, dtype=values.dtype)
    out[:at], out[at], out[at + 1 :] = values[:at], value, values[at:]
    return out
