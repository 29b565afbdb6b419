"""Undoing the moves a plan no longer needs once later actions made them needless."""

from __future__ import annotations

import numpy as np

from assigners.balanced.state import GoalSearch, UndoMark
from assigners.model import PAD, distinct_per_row, positions, row_contains
from assigners.placement import may_replace

PAIR_TRIES = 8  # second undos tried per moved replica

Step = tuple[int, int, bool, bool]  # (replica row, broker slot, leads, relocates), as in a Change
Group = tuple[tuple[int, int], list[tuple[int, Step]], list[tuple[int, Step]]]  # slots, undos, partners


def undo_needless_moves(search: GoalSearch) -> int:
    """Put replicas the plan moved back on a live broker of their partition wherever nothing gets worse.

    One at a time, then in pairs going opposite ways between two brokers
    (counts unchanged: the pair a load swap leaves once later actions made
    it needless).
    Nothing worse: the rules hold, counts stay in (or closer to) their
    band, and no goal's load rises above its threshold (or above its
    current maximum when it is not met). Each undo saves a move. Returns how many.

    A pass after the search's first asks again only what may pass now
    (:func:`_asked_again`): what it refused stays refused while neither its
    brokers nor its partition change and no goal's limit rises. The bench
    cluster with five placement rules makes four passes (28, 9, 5 and 0
    undone), each asking some 10,000 moved replicas again.
    """
    return _undo_alone(search) + _undo_pairs(search)


def _started(search: GoalSearch, kind: str) -> UndoMark | None:
    """Mark where this pass of ``kind`` starts; where the last one did (None: ask everything, as on the
    search's first pass, or where a goal's limit rose since, as a goal round may raise a later goal's peak)."""
    last = search.undo_marks.get(kind)
    limits = search.goal_limits()
    search.undo_marks[kind] = UndoMark(search.version.copy(), search.steps, list(limits))
    if last is None or any(now > then for now, then in zip(limits, last.limits)):
        return None
    return last


def _asked_again(search: GoalSearch, since: UndoMark | None, rows: np.ndarray, homes: np.ndarray) -> np.ndarray:
    """Per moved replica row: may its undo to ``homes`` pass now, where the pass begun at ``since`` refused
    it? Only where its broker, its home or its partition changed since (:meth:`GoalSearch.harmless` reads
    their loads, counts and replicas, and the goals' limits, which ``since`` holds no lower)."""
    if since is None:
        return np.ones(len(rows), dtype=bool)
    slots = search.version != since.slots
    changed: np.ndarray = slots[search.slot[rows]] | (search.changed_at[search.part[rows]] > since.step)
    changed |= (homes >= 0) & slots[np.maximum(homes, 0)]
    return changed


def _undo_pairs(search: GoalSearch) -> int:
    """Undos in pairs going opposite ways between two brokers, each undo tried with the first
    :data:`PAIR_TRIES` of the other way; returns how many undone."""
    since = _started(search, "pairs")
    groups, pairs = _pair_groups(search, since)
    search.undo_marks["pairs"] = search.undo_marks["pairs"]._replace(pairs=pairs)
    loads = PairLoads(search, groups)
    racks_keep: dict[int, bool] = {}  # per row, its undo alone keeps the rack rule: until a pair is applied
    undone = 0
    for n, (_, undos, opposite) in enumerate(groups):
        for u, (row, undo) in enumerate(undos):
            fits = loads.fits(n, u)  # None: the loads changed since; each pair then asks harmless() in full
            if fits is not None and not fits.any():
                continue  # every pair with it would be refused on the loads or the rules (most are)
            if not (_still_moved(search, undo) and _keeps_racks(search, undo, racks_keep)):
                continue  # every pair with it would be refused
            for o, (other, second) in enumerate(opposite):
                if fits is not None and not fits[o]:
                    continue
                if int(search.part[other]) == int(search.part[row]) or not _still_moved(search, second):
                    continue
                if _keeps_racks(search, second, racks_keep) and search.harmless((undo, second)):
                    search.apply_steps((undo, second))
                    racks_keep.clear()
                    undone += 2
                    break
    return undone


def pair_groups(search: GoalSearch) -> list[Group]:
    """Per two broker slots with moved replicas going back each way (the lower slot first): the undos from the
    first to the second, and the first :data:`PAIR_TRIES` the other way, their partners."""
    return _pair_groups(search, None)[0]


def _pair_groups(
    search: GoalSearch, since: UndoMark | None
) -> tuple[list[Group], tuple[np.ndarray, np.ndarray]]:
    """:func:`pair_groups`, after ``since`` (a pass's start) only those where a pair may pass that did not
    then; and the moved replica rows with their groups' two slots as one key (-1: none), for the next pass.

    A group is asked again where one of its brokers changed, or a replica of a changed partition is in it
    or was then (its partner list, the first :data:`PAIR_TRIES`, may hold another pair); else it holds the
    pairs it did, on the same loads, counts and replicas (:func:`_asked_again`).
    """
    rows = moved_rows(search)
    back = home_slots(search, rows)
    there = search.slot[rows]
    span = len(search.brokers)
    way, reverse_way = there * span + back, back * span + there
    paired = (back >= 0) & np.isin(way, reverse_way[back >= 0])  # only undos with one going the other way
    group_of = np.where(back >= 0, np.minimum(there, back) * span + np.maximum(there, back), -1)
    if since is not None and since.pairs is not None:
        then, groups_then = since.pairs
        left = groups_then[search.changed_at[search.part[then]] > since.step]  # where changed replicas were
        again = group_of[paired & _asked_again(search, since, rows, back)]
        paired &= np.isin(group_of, np.concatenate([again, left[left >= 0]]))
    reverse: dict[tuple[int, int], list[tuple[int, Step]]] = {}  # (slot it is on, slot it goes back to) -> undos
    for row, a, b in zip(rows[paired].tolist(), there[paired].tolist(), back[paired].tolist()):
        reverse.setdefault((a, b), []).append((row, (row, b, bool(search.lead[row]), True)))
    groups = [(key, undos, reverse[key[::-1]][:PAIR_TRIES]) for key, undos in reverse.items() if key < key[::-1]]
    return [group for group in groups if group[2]], (rows, group_of)


class PairLoads:
    """Per group of pairs (two brokers, undos one way, partners the other), whether each pair passes the checks
    of :meth:`GoalSearch.harmless` that refuse most pairs: every goal's load on both brokers within its
    limit, the placement rules (an undo of a repair they forced), the leader counts in their bands. For all
    groups at once: one pair at a time, 1,700 a pass on the 10k cluster with placement rules took ~13 ms.

    The loads take the float steps of :func:`assigners.balanced.state._goal_loads_after`, so the answers
    are harmless()'s; kept while neither broker's rows changed and the limits are the same.
    """

    def __init__(self, search: GoalSearch, groups: list[Group]) -> None:
        self.search = search
        self.limits = search.goal_limits()
        self.versions = search.version.copy()
        self.slots = [key for key, _, _ in groups]
        self.shapes = [(len(undos), len(opposite)) for _, undos, opposite in groups]
        if not groups:
            self.ok: list[np.ndarray] = []
            return
        u_rows = np.array([r for _, undos, opp in groups for r, _ in undos for _ in opp], dtype=np.int64)
        o_rows = np.array([r for _, undos, opp in groups for _ in undos for r, _ in opp], dtype=np.int64)
        sizes = [a * b for a, b in self.shapes]
        there = np.repeat([a for a, _ in self.slots], sizes)
        home = np.repeat([b for _, b in self.slots], sizes)
        ok = (
            self._rules_allow(u_rows, home)
            & self._rules_allow(o_rows, there)
            & self._leaders_allow(u_rows, o_rows, there, home)
        )
        for (load, capacity, _, _), amounts, limit in zip(search.goal_rows, search.row_amount, self.limits):
            cap = np.asarray(capacity, dtype=float)
            u, o, c_there, c_home = amounts[u_rows], amounts[o_rows], cap[there], cap[home]
            ok &= (load[there] - u / c_there) + o / c_there <= limit  # the undo leaves, its partner comes back
            ok &= (load[home] + u / c_home) - o / c_home <= limit
        ends = np.cumsum(sizes)
        self.ok = [part.reshape(shape) for part, shape in zip(np.split(ok, ends[:-1]), self.shapes)]

    def _rules_allow(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """May each row's replica go to the broker in ``slots`` under the placement rules (an undo of a repair
        the rules forced may not)?"""
        search = self.search
        if search.placement is None:
            return np.ones(len(rows), dtype=bool)
        allowed: np.ndarray = search.placement.may_move_each(search.part[rows], search.brokers[slots])
        return allowed

    def _leaders_allow(self, u_rows: np.ndarray, o_rows: np.ndarray, there: np.ndarray, home: np.ndarray) -> np.ndarray:
        """Do the leader counts of both brokers stay in their bands (:meth:`GoalSearch.count_ok`) where one of
        the pair leads and the other does not (the replica counts never change: one each way)?"""
        search = self.search
        gains, loses = leader_steps_allowed(search)
        lead_u, lead_o = search.lead[u_rows], search.lead[o_rows]
        undo_leads = lead_u & ~lead_o  # the leader count moves with the undo (else with its partner, or not)
        partner_leads = lead_o & ~lead_u
        ok: np.ndarray = (lead_u == lead_o) | (undo_leads & loses[there] & gains[home])
        ok |= partner_leads & gains[there] & loses[home]
        return ok

    def fits(self, group: int, undo: int) -> np.ndarray | None:
        """Per partner of the group's ``undo``: its pair passes these checks; None where no longer known."""
        a, b = self.slots[group]
        search = self.search
        if search.version[a] != self.versions[a] or search.version[b] != self.versions[b]:
            return None
        if search.goal_limits() != self.limits:
            return None
        fits: np.ndarray = self.ok[group][undo]
        return fits


def leader_steps_allowed(search: GoalSearch) -> tuple[np.ndarray, np.ndarray]:
    """Per broker slot, may its leader count rise by one, and may it fall by one, within its band
    (:meth:`GoalSearch.count_ok`)?"""
    slots = range(len(search.brokers))
    gains, loses = (np.array([search.count_ok(search.leaders, 1, b, d) for b in slots]) for d in (1, -1))
    return gains, loses


def _keeps_racks(search: GoalSearch, step: Step, known: dict[int, bool]) -> bool:
    """Does the undo ``step`` alone keep the rack rule (one of :meth:`GoalSearch.harmless`'s checks, the one
    that refuses most of the pairs :class:`PairLoads` lets through)? Remembered in ``known`` per row."""
    row = step[0]
    if row not in known:
        i, old, new = int(search.part[row]), int(search.brokers[search.slot[row]]), int(search.brokers[step[1]])
        known[row] = may_replace(search.replicas[i], old, new, search.view)
    return known[row]


def _undo_alone(search: GoalSearch) -> int:
    """Single undos, in row order; most would take a count out of its band (below it where the replica
    leaves, above it where it goes back), which is checked in bulk first, and most of the rest are refused
    on the loads, the leader counts or the rules, checked in bulk next (:func:`undos_refused`). After the
    search's first pass, only those that may pass now (:func:`_asked_again`)."""
    since = _started(search, "alone")
    rows, undone, start = moved_rows(search), 0, 0
    bands = np.array([search.band(b, 0) for b in range(len(search.brokers))], dtype=np.int64).reshape(-1, 2)
    low, high = bands[:, 0], bands[:, 1]
    back = home_slots(search, rows)  # where undo_step sends each, while its partition stays as it is
    changed = np.zeros(len(search.first_row) - 1, dtype=bool)  # partitions an undo here changed: asked again
    while start < len(rows):
        rest, way_back = rows[start:], back[start:]
        goes = way_back >= 0
        may = search.count[search.slot[rest]] > low[search.slot[rest]]
        home = np.where(goes, way_back, 0)
        may &= changed[search.part[rest]] | (goes & (search.count[home] < high[home]))
        may &= _asked_again(search, since, rest, way_back)
        asked = np.flatnonzero(may)
        # where its way back is still home_slots', what these checks refuse harmless() would refuse too
        known = goes[asked] & ~changed[search.part[rest[asked]]]
        asked = asked[~(known & undos_refused(search, rest[asked], home[asked]))]
        start = len(rows)
        for n in asked.tolist():  # the first undo applied changes counts and loads: the bulk checks are redone
            row = int(rest[n])
            if not search.count_ok(search.count, 0, int(search.slot[row]), -1):
                continue
            if (undo := undo_step(search, row)) is not None and search.harmless((undo,)):
                search.apply_steps((undo,))
                changed[int(search.part[row])] = True
                undone += 1
                start = len(rows) - len(rest) + n + 1
                break
    return undone


def undos_refused(search: GoalSearch, rows: np.ndarray, homes: np.ndarray) -> np.ndarray:
    """Per moved replica row, would :meth:`GoalSearch.harmless` refuse its undo to ``homes`` (the slot it goes
    back to, its role kept) on one of the checks that refuse most single undos: a goal's load on either
    broker above its limit (its float steps, so the same answers), a leader count leaving its band, the
    rack rule, the placement rules? For all at once: asked one by one, the drifted 10k shape's ~800
    single undos, all refused (500 on the racks, 250 on the leader counts), took ~4 % of its plan."""
    there, parts = search.slot[rows], search.part[rows]
    refused = np.zeros(len(rows), dtype=bool)
    for (load, capacity, _, _), amounts, limit in zip(search.goal_rows, search.row_amount, search.goal_limits()):
        cap, amount = np.asarray(capacity, dtype=float), amounts[rows]
        refused |= ~(load[there] - amount / cap[there] <= limit) | ~(load[homes] + amount / cap[homes] <= limit)
    if search.lead[rows].any():
        gains, loses = leader_steps_allowed(search)
        refused |= search.lead[rows] & ~(loses[there] & gains[homes])
    # the rack rule where every replica of the partition is a row (else asked in full): its other rows' racks
    # and the home's rack span at least the racks its replicas must (as may_replace counts them)
    first, end = search.first_row[parts], search.first_row[parts + 1]
    cells = first[:, None] + np.arange(int((end - first).max(initial=0)))
    others = (cells < end[:, None]) & (cells != rows[:, None])
    racks = np.where(others, search.rack_of[search.slot[np.minimum(cells, len(search.part) - 1)]], 0)
    racks = np.concatenate([racks, search.rack_of[homes][:, None]], axis=1)
    valid = np.concatenate([others, np.ones((len(rows), 1), dtype=bool)], axis=1)
    whole = end - first == np.array([len(search.replicas[i]) for i in parts.tolist()], dtype=np.int64)
    refused |= whole & (distinct_per_row(racks, valid) < search.view.required_domains_each(end - first))
    if search.placement is not None:
        refused |= ~search.placement.may_move_each(parts, search.brokers[homes])
    return refused


def home_slots(search: GoalSearch, rows: np.ndarray) -> np.ndarray:
    """Per moved replica row, the slot of its partition's lowest live broker that is eligible and not
    holding it now (where :func:`undo_step` sends it), -1 where there is none."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    parts = search.part[rows]
    live = search.live_matrix[parts]
    free = ~row_contains(live, _held(search)[parts]) & (live != PAD) & np.isin(live, search.brokers)
    none = np.iinfo(np.int64).max
    home = np.where(free, live, none).min(axis=1)
    return np.where(home < none, positions(search.brokers, np.minimum(home, search.brokers[-1])), -1)


def _held(search: GoalSearch) -> np.ndarray:
    """Per partition, the eligible brokers holding it now (PAD-filled rows), from the search's rows at
    once: from the replica lists, a moved replica's partition at a time, it cost most of an undo pass."""
    first = search.first_row
    width = max(1, int(np.diff(first).max(initial=0)))
    held = np.full((len(first) - 1, width), PAD, dtype=np.int64)
    held[search.part, np.arange(len(search.part)) - first[search.part]] = search.brokers[search.slot]
    return held


def _still_moved(search: GoalSearch, step: Step) -> bool:
    """Is the step's replica still away from its live brokers, and its way back still free?"""
    row, back = step[0], step[1]
    i = int(search.part[row])
    return bool(search.moved_in[row]) and int(search.brokers[back]) not in search.replicas[i]


def moved_rows(search: GoalSearch) -> np.ndarray:
    """Replica rows on a broker that does not hold their partition live, in row order."""
    return np.flatnonzero(search.moved_in)


def undo_step(search: GoalSearch, row: int) -> Step | None:
    """The step putting a moved replica back on its partition's first free live broker, if it still is moved."""
    i = int(search.part[row])
    if int(search.brokers[search.slot[row]]) in search.live[i]:
        return None
    for home in sorted(search.live[i] - set(search.replicas[i])):
        back = search.slot_of(home)
        if back is not None:
            return (row, back, bool(search.lead[row]), True)
    return None
