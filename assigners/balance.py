"""Count balancing shared by the strategies: replicas per broker, then leaders.

Both passes edit a list of replica lists in place and only make moves that
keep every rule the plan already satisfies (eligible brokers, distinct
brokers, the rack rule), so they can follow any strategy.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections import deque
from collections.abc import Callable

import numpy as np
import pandas as pd

from assigners.model import (
    PAD,
    ClusterView,
    argsort_small,
    broker_codes,
    layout_matrix,
    pad_to,
    positions,
    replica_matrix,
    row_all,
    row_any,
    row_lengths,
    row_sum,
    topic_codes,
)
from assigners.placement import PairCounts, Usage, evict_over_capacity, refill, topic_move_counts, topic_moves
from assigners.policies import Placement, placement_shares


def _domain_bits(view: ClusterView) -> dict[int, int]:
    """Each known broker's failure domain as one bit (domains in name order)."""
    domains = sorted({view.domain_of[b] for b in view.domain_of})
    return {b: 1 << domains.index(view.domain_of[b]) for b in view.domain_of}


def _other_domains(
    matrix: np.ndarray, bit: dict[int, int], coded: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Per replica, the OR of the domain bits of its partition's other replicas (unknown brokers: no bit).
    ``coded``: :func:`_bit_codes` of ``bit``, where the caller keeps them."""
    known, codes = _bit_codes(bit) if coded is None else coded
    bits = broker_codes(matrix, known, codes, 0)
    masks = np.zeros_like(bits)
    for pos in range(matrix.shape[1]):
        for other in range(matrix.shape[1]):
            if other != pos:
                masks[:, pos] |= bits[:, other]
    return masks


def _bit_codes(bit: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The brokers of ``bit`` in id order, and their bits, as arrays for :func:`broker_codes`."""
    known = np.array(sorted(bit), dtype=np.int64)
    return known, np.array([bit[b] for b in known.tolist()], dtype=np.int64)


class _ReplicaIndex:
    """Each broker's partitions grouped by (is leader, RF, failure domains of the *other* replicas).

    Whether a replica may move from ``old`` to ``new`` under the rack rule
    depends only on that group key and on ``new``'s domain, so a legal move is
    found by looking at a handful of groups instead of every partition the
    donor holds.
    """

    def __init__(
        self,
        assignment: list[list[int]],
        view: ClusterView,
        placement: Placement | None = None,
        matrix: np.ndarray | None = None,
    ) -> None:
        """``placement``: the placement rules; a partition's rule is part of its group's key (a frozen one's
        is :data:`FROZEN`), so a find passes over the groups that may not use the receiver at once.
        ``matrix``: the assignment's replica matrix, where the caller keeps one up to date."""
        self.assignment = assignment
        self.view = view
        self.placement = placement
        self.code = None if placement is None else _rule_codes(placement)  # None: one group key for all
        domains = sorted({view.domain_of[b] for b in view.domain_of})
        self.bit = _domain_bits(view)
        self.required: dict[int, int] = {}  # view.required_domains per RF, asked once per group a find looks at
        # Members are insertion-ordered dicts (used as ordered sets): taking the first one
        # is O(1) and deterministic, where min() over a set rescanned thousands of members.
        self.groups: dict[int, list[dict[tuple[int, int, int], dict[int, None]]]] = {b: [{}, {}] for b in view.eligible}
        # Receivers each donor is known to have no legal move to; the conditions of a move only
        # tighten (more moves recorded, fuller receivers) except where ``move`` clears them.
        # A verdict holds while its receiver has not lost a replica since (``freed`` counts that).
        self.dead: dict[int, dict[int, int]] = {b: {} for b in view.eligible}
        self.freed: dict[int, int] = dict.fromkeys(view.eligible, 0)
        self.matrix = matrix  # the caller's, kept in step by move (None: none kept)
        if 0 < len(domains) < 63:
            self._bulk_build(replica_matrix(assignment) if matrix is None else matrix)
        else:  # masks beyond int64: one partition at a time
            for i in range(len(assignment)):
                self._update(i, add=True)

    def _bulk_build(self, matrix: np.ndarray) -> None:
        """What :meth:`_update` would build for every partition in turn, in numpy, from the assignment's
        replica ``matrix``.

        Groups appear in the order of their first replica and list their
        partitions in ascending order, as the one-by-one build left them.
        """
        masks = _other_domains(matrix, self.bit)
        eligible = np.array(sorted(self.groups), dtype=np.int64)
        part, pos = np.nonzero(np.isin(matrix, eligible))  # row-major: the one-by-one build's order
        if not len(part):
            return
        broker, lead = matrix[part, pos], (pos == 0).astype(np.int64)
        rf = row_lengths(matrix)[part]
        mask_values, mask_code = np.unique(masks[part, pos], return_inverse=True)
        mask_code = mask_code.ravel()
        code = np.zeros(len(part), dtype=np.int64) if self.code is None else np.asarray(self.code)[part] - FROZEN
        # one int64 per (broker, lead, rf, mask, rule): a 1-D unique sorts far faster than rows
        key = np.searchsorted(eligible, broker)
        digits = ((2, lead), (matrix.shape[1] + 1, rf), (len(mask_values), mask_code), (int(code.max()) + 1, code))
        for radix, digit in digits:
            key = key * radix + digit
        _, first, group = np.unique(key, return_index=True, return_inverse=True)
        members = part[np.argsort(group, kind="stable")].tolist()
        ends = np.cumsum(np.bincount(group.ravel())).tolist()
        for g in np.argsort(first).tolist():
            i = first[g]
            groups = self.groups[int(broker[i])][int(lead[i])]
            groups[(int(rf[i]), int(mask_values[mask_code[i]]), self._code(int(part[i])))] = dict.fromkeys(
                members[ends[g - 1] if g else 0 : ends[g]]
            )

    def _update(self, i: int, add: bool) -> None:
        replicas = self.assignment[i]
        bits = [self.bit.get(b, 0) for b in replicas]  # per replica, once (the hot path of a 1M-partition run)
        for pos, b in enumerate(replicas):
            mine = self.groups.get(b)
            if mine is None:
                continue
            mask = 0
            for other, bit in zip(replicas, bits):
                if other != b:
                    mask |= bit
            groups = mine[pos == 0]  # followers [0] are tried before leaders [1]
            key = (len(replicas), mask, self._code(i))
            if add:
                groups.setdefault(key, {})[i] = None
            else:
                members = groups[key]
                del members[i]
                if not members:
                    del groups[key]

    def _code(self, i: int) -> int:
        """Partition ``i``'s placement rule code in the group keys (0 for all without the rules)."""
        return 0 if self.code is None else self.code[i]

    def find(self, old: int, new: int, ok: Callable[[int], bool] | None = None) -> int | None:
        """A partition whose replica on ``old`` may move to ``new`` without hurting its rack spread.

        ``ok`` adds per-partition conditions (room on ``new``, no reverse move).
        """
        if self.dead[old].get(new, -1) == self.freed[new]:
            return None
        new_bit, old_bit, required_of = self.bit[new], self.bit[old], self.required
        for groups in self.groups[old]:
            for (rf, mask, code), members in groups.items():
                if self.placement is not None and (code == FROZEN or new not in self.placement.allowed[code]):
                    continue  # the rules keep this group off ``new``
                required = required_of.get(rf)
                if required is None:
                    required = required_of[rf] = self.view.required_domains(rf)
                after = (mask | new_bit).bit_count()
                if after < min(required, (mask | old_bit).bit_count()):
                    continue
                if ok is None and not mask & new_bit:  # new's domain is free here, so new holds no replica
                    return next(iter(members))
                hit = next(
                    (i for i in members if new not in self.assignment[i] and (ok is None or ok(i))),
                    None,
                )
                if hit is not None:
                    return hit
        self.dead[old][new] = self.freed[new]
        return None

    def move(self, i: int, old: int, new: int) -> None:
        self._update(i, add=False)
        replicas = self.assignment[i]
        position = replicas.index(old)
        replicas[position] = new
        if self.matrix is not None:
            self.matrix[i, position] = new
        self._update(i, add=True)
        # What this move can make possible again: partitions of i's brokers changed their rack
        # masks, ``new`` gained a partition, and ``old`` got room back.
        for b in (*replicas, old):
            if b in self.dead:
                self.dead[b].clear()
        if old in self.freed:
            self.freed[old] += 1  # outdates every "nothing fits on old" verdict at once


def balance_replica_counts(
    assignment: list[list[int]],
    view: ClusterView,
    sizes: np.ndarray | None = None,
    topics: np.ndarray | None = None,
    usage: Usage | None = None,
    moved: set[tuple[int, int, int]] | None = None,
    live: list[list[int]] | None = None,
    take_first: np.ndarray | None = None,
    probe: bool = False,
    live_matrix: np.ndarray | None = None,
    placement: Placement | None = None,
    matrix: np.ndarray | None = None,
) -> int:
    """Move replicas from the fullest to the emptiest brokers (per weight) while that evens them out.


    Followers move first (a leader move also shifts leadership). A move
    from donor ``d`` to receiver ``r`` is made only when it lowers
    sum(count^2 / weight), i.e. (2 c_r + 1) / w_r < (2 c_d - 1) / w_d; with
    equal weights that is "counts differ by 2 or more", so it stops at
    max - min <= 1 or when no legal move is left. Moves respect the caps
    (``sizes`` gives the bytes each replica adds) and never send a replica
    of a topic from B to A after another went from A to B (``topics`` codes;
    ``moved`` seeds the (topic, from, to) the plan already makes, e.g. forced;
    with ``live``, moves are judged against the live layout: moving a replica
    the plan placed moves on what it replaced, see :class:`_TopicRule`;
    ``take_first``: which replicas a donor gives first, see :func:`_bulk_count_moves`; ``live_matrix``:
    ``live``'s replica matrix, where the caller has it; ``placement``: the placement rules, kept by every
    move, their replica caps by the shares; ``matrix``: ``assignment``'s, where the caller has it: every move
    is made in it too).
    Returns the number of moves made; ``probe``: stop once there are any (would it move anything?).

    Notes
    -----
    Each step strictly lowers that sum (a chain of moves changes only its
    two ends), so the loop ends.
    """
    if len(view.eligible) < 2:
        return 0
    n = len(assignment)
    if usage is None:
        usage = Usage(assignment, np.zeros(n, dtype=np.int64) if sizes is None else sizes, view)
    if not _any_improving_pair(usage):
        return 0  # already even: skip building the index (a tenth of a second per 30k partitions)
    topic_of = list(range(n)) if topics is None else topics.tolist()  # None: no same-topic rule
    matrix = replica_matrix(assignment) if matrix is None else matrix
    span = max(view.eligible) + 1
    rule = _TopicRule(
        topic_of, set() if moved is None else set(moved), assignment, live, matrix, span, live_matrix, placement
    )
    moves = _bulk_count_moves(assignment, usage, rule, matrix, take_first, probe)
    shift = _placement_shift(usage, matrix, placement)
    if (probe and moves) or not _any_improving_pair(usage, shift):
        return moves  # the exact loop would find nothing: skip building its index
    index = _ReplicaIndex(assignment, view, placement, matrix)  # the bulk moves kept the matrix up to date
    capped = view.has_caps  # read once: it looks at every broker's caps
    while True:
        chain = _find_count_move(index, usage, rule, capped, shift)
        if chain is None or len({i for i, _, _ in chain}) < len(chain):
            return moves  # no way forward (a chain reusing a partition could break its own rules)
        for i, old, new in chain:
            rule.record(i, old, new)
            index.move(i, old, new)
            usage.remove(i, old)
            usage.add(i, new)
            moves += 1
        if probe:
            return moves


class _TopicRule:
    """Never a replica of a topic from B to A after another went from A to B, in one plan.

    With ``live``, the (topic, from, to) pairs are the plan's moves against the live layout, as the rest of
    the planner counts them: each broker a partition leaves with each it joins. A move is allowed when none
    of the pairs it adds to its partition reverses a pair of the plan (moving a replica the plan placed
    changes what its partition's live replicas moved to; moving one back home only removes pairs). Without
    ``live``, the pairs are the balancing's own moves, seeded by ``moved``.
    """

    def __init__(
        self,
        topic_of: list[int],
        moved: set[tuple[int, int, int]],
        assignment: list[list[int]],
        live: list[list[int]] | None,
        matrix: np.ndarray,
        span: int,
        live_matrix: np.ndarray | None = None,
        placement: Placement | None = None,
    ) -> None:
        """``matrix``: the assignment's replica matrix; ``span``: above every eligible broker id;
        ``live_matrix``: ``live``'s, where the caller has it; ``placement``: the placement rules, which a move
        keeps as well (:meth:`assigners.policies.Placement.may_move`)."""
        self.topic_of, self.moved, self.assignment, self.live = topic_of, moved, assignment, live
        self.placement = placement
        self.count = PairCounts(span)
        self.live_matrix = None if live is None else replica_matrix(live) if live_matrix is None else live_matrix
        if self.live_matrix is not None:
            self.count = topic_move_counts(matrix, self.live_matrix, np.asarray(topic_of, dtype=np.int64), span)

    @property
    def active(self) -> bool:
        return bool(self.moved) or self.live is not None or self.placement is not None

    def _added(self, i: int, old: int, new: int) -> list[tuple[int, int, int]]:
        """The pairs partition ``i``'s move from ``old`` to ``new`` adds (:meth:`_added_steps`, with its topic)."""
        t = self.topic_of[i]
        return [(t, a, b) for a, b in self._added_steps(i, old, new)]

    def _added_steps(self, i: int, old: int, new: int) -> list[tuple[int, int]]:
        """(from, to) of the pairs partition ``i``'s move from ``old`` to ``new`` adds: a live ``old`` left for
        each broker it will hold off its live set, and each live broker it is off left for a ``new`` off its
        live set (the pairs of the other brokers stay as they were)."""
        assert self.live is not None
        was, now = self.live[i], self.assignment[i]
        added = []
        if old in was:
            added += [(old, b) for b in now if b != old and b not in was]
            if new not in was:
                added.append((old, new))
        if new not in was:
            added += [(a, new) for a in was if a not in now]
        return added

    def _removed(self, i: int, old: int, new: int) -> set[tuple[int, int, int]]:
        """The pairs partition ``i``'s move from ``old`` to ``new`` removes (:meth:`_removed_steps`, with its
        topic)."""
        t = self.topic_of[i]
        return {(t, a, b) for a, b in self._removed_steps(i, old, new)}

    def _removed_steps(self, i: int, old: int, new: int) -> set[tuple[int, int]]:
        """(from, to) of the pairs partition ``i``'s move from ``old`` to ``new`` removes: a live ``new`` it comes
        back to no longer left for any broker, and no live broker is left for an ``old`` off its live set."""
        assert self.live is not None
        was, now = self.live[i], self.assignment[i]
        removed = set()  # a set: where new is live and old is not, both groups name (new, old)
        if new in was:
            removed |= {(new, b) for b in now if b not in was}
        if old not in was:
            removed |= {(a, old) for a in was if a not in now}
        return removed

    def allows(self, i: int, old: int, new: int) -> bool:
        if self.placement is not None and not self.placement.may_move(i, new):
            return False
        if self.live is None:
            return (self.topic_of[i], new, old) not in self.moved
        if self.assignment[i] == self.live[i]:  # its first move: it adds the one pair (topic, old, new)
            return self.count[(self.topic_of[i], new, old)] <= 0
        return all(self.count[(t, b, a)] <= 0 for t, a, b in self._added(i, old, new))

    def record_if_allowed(self, i: int, old: int, new: int) -> bool:
        """:meth:`allows`, then :meth:`record` where it does, with the pairs the move adds named once, as int
        keys. The count balancing moves ~5,000 partitions the plan changed before on a drifted 10k cluster,
        each asked, then recorded, naming its pairs twice as tuples: at once, its settle takes 0.77-0.87x the
        time (same process)."""
        if self.live is None or self.assignment[i] == self.live[i]:
            if not self.allows(i, old, new):
                return False
            self.record(i, old, new)
            return True
        if self.placement is not None and not self.placement.may_move(i, new):
            return False
        added = self._added_steps(i, old, new)
        span, counts = self.count.span, self.count.counts
        base = self.topic_of[i] * span  # PairCounts' keys, inline
        for a, b in added:
            if counts.get((base + b) * span + a, 0) > 0:
                return False  # it would reverse a pair of the plan
        for a, b in self._removed_steps(i, old, new):
            key = (base + a) * span + b
            counts[key] = counts.get(key, 0) - 1
        for a, b in added:
            key = (base + a) * span + b
            counts[key] = counts.get(key, 0) + 1
        return True

    def pairs(self) -> np.ndarray:
        """The (topic, from, to) pairs that forbid their reverse now, as rows (in no particular order)."""
        if self.live is None:
            return np.asarray(list(self.moved), dtype=np.int64).reshape(-1, 3)
        return self.count.named()

    def fresh(self, matrix: np.ndarray) -> np.ndarray:
        """Per partition (``matrix``: the assignment's): does its next move only add the pair (topic, old,
        new), so that :meth:`allows` is a lookup of its reverse among :meth:`pairs`?"""
        if self.live_matrix is None:
            return np.ones(len(matrix), dtype=bool)
        live = self.live_matrix
        width = max(matrix.shape[1], live.shape[1])
        same = row_all(pad_to(matrix, width) == pad_to(live, width))
        return same

    def record_many(self, topics: list[int], old: int, new: int) -> None:
        """:meth:`record` of the first moves of partitions of ``topics`` (one each) from ``old`` to ``new``; keyed
        inline, as :class:`PairCounts` keys them (thousands of first moves per bulk pour on a 10k cluster)."""
        if self.live is None:
            self.moved.update((t, old, new) for t in topics)
            return
        span, counts = self.count.span, self.count.counts
        for t in topics:
            key = (t * span + old) * span + new
            counts[key] = counts.get(key, 0) + 1

    def record(self, i: int, old: int, new: int) -> None:
        """Call before the move is applied to the assignment."""
        if self.live is None:
            self.moved.add((self.topic_of[i], old, new))
            return
        if self.assignment[i] == self.live[i]:  # as in allows: no pairs yet, one after
            self.count[(self.topic_of[i], old, new)] += 1
            return
        self.count.subtract(self._removed(i, old, new))
        self.count.update(self._added(i, old, new))


def _bulk_count_moves(
    assignment: list[list[int]],
    usage: Usage,
    rule: _TopicRule,
    matrix: np.ndarray,
    take_first: np.ndarray | None = None,
    probe: bool = False,
) -> int:
    """The bulk of the balancing: replicas from brokers above their share straight to brokers below it.

    Share = total replicas x weight / total weight, or its rack's where the
    rack rule pins each rack's total (:func:`_shares`). Only a broker above the
    ceiling of its share gives and only one below the floor takes, so no
    broker is overshot and every move here is one any balanced plan needs;
    the exact loop in :func:`balance_replica_counts` then finishes the few
    that are left (chains, rounding). Each donor gives to each receiver in
    turn as many replicas as both need, followers before leaders, in
    partition order (``take_first``: by that key per partition, lowest
    first; the sizes take the least data to copy), picked in bulk on the replica matrix: a partition
    moves once here, so the rack rule is judged on its other replicas as
    they were, and its topic pairs against those made before (a receiver
    never gives here, so no move of this phase can reverse another).
    """
    view = usage.view
    bit = _domain_bits(view)
    if not assignment or not 0 < len(set(bit.values())) < 63:
        return 0  # domain masks beyond int64: the exact loop does it all
    share, pinned = _shares(usage, matrix, None if rule.placement is None else rule.placement.caps)
    high = {b: math.ceil(share[b]) for b in view.eligible}
    low = {b: math.floor(share[b]) for b in view.eligible}
    donors = sorted((b for b in view.eligible if usage.count[b] > high[b]), key=lambda b: (-usage.fullness(b), b))
    # under the placement rules a broker they restrict takes first: it can take only some replicas, which
    # the donors would give away to the others before reaching it
    caps = {} if rule.placement is None else rule.placement.caps
    partitions = len(assignment)
    receivers = sorted(
        (b for b in view.eligible if usage.count[b] < low[b]),
        key=lambda b: (caps.get(b, partitions) >= partitions, usage.fullness(b), b),
    )
    if not donors or not receivers:
        return 0
    bulk = _Bulk(assignment, matrix, view, bit, rule, take_first, within_racks=pinned)
    moves = _pour(bulk, usage, donors, receivers, high, low, probe)
    if rule.placement is None or (probe and moves):
        return moves
    # a broker the rules restrict can stay short: the brokers above their ceiling hold too few replicas it
    # may take. It borrows them from the others and those refill from the brokers above their ceiling: the
    # chains of two moves the exact loop would otherwise find one at a time (five rules on 10k
    # partitions: ~1,500 of them, 200 ms a start)
    short = [b for b in receivers if usage.count[b] < low[b]]
    lent = sum(_borrow(bulk, usage, new, [b for b in view.eligible if b not in short], low[new]) for new in short)
    if not lent:
        return moves
    again = sorted((b for b in view.eligible if usage.count[b] < low[b]), key=lambda b: (usage.fullness(b), b))
    return moves + lent + _pour(bulk, usage, donors, again, high, low, probe)


def _borrow(bulk: _Bulk, usage: Usage, new: int, lenders: list[int], low: int) -> int:
    """Replicas for ``new`` up to ``low`` from ``lenders``, spread evenly over those that hold any it may
    take (each lends at most an equal part of what is missing, in rounds until it is all lent or none is
    left); how many moved."""
    assert bulk.rule.placement is not None
    may_take = bulk.rule.placement.movable_to
    offers = {old: bulk.cells(old) for old in lenders}  # those holding any replica the rules let it take
    offers = {old: (rows, pos) for old, (rows, pos) in offers.items() if may_take(rows, new).any()}
    lent = 0
    while (missing := low - usage.count[new]) > 0 and offers:
        quota = -(-missing // len(offers))
        for old, (rows, pos) in list(offers.items()):
            asked = min(quota, low - usage.count[new])
            given = _give(bulk, rows, pos, old, new, asked, usage)
            if given < asked:
                del offers[old]  # nothing more it may lend (the racks or the topic rule keep the rest)
            lent += given
            if usage.count[new] >= low:
                break
    return lent


def _pour(
    bulk: _Bulk,
    usage: Usage,
    donors: list[int],
    receivers: list[int],
    high: dict[int, int],
    low: dict[int, int],
    probe: bool,
) -> int:
    """Each donor gives each receiver in turn as many replicas as both need (:func:`_wanted`: the donor down to
    ``high``, the receiver up to ``low``); how many moved."""
    moves = 0
    for old in donors:
        rows, pos = bulk.cells(old)
        for new in receivers:
            wanted = _wanted(usage, old, new, high[old], low[new])
            # a donor's first replicas in order are judged first, more only while too few of them may go
            # (a donor holds thousands, a receiver takes a few; which ones go is the same either way)
            start, size = 0, 4 * wanted + 64
            while wanted and start < len(rows):
                chunk = slice(start, start + size)
                given = _give(bulk, rows[chunk], pos[chunk], old, new, wanted, usage)
                moves, wanted, start, size = moves + given, wanted - given, start + size, 4 * size
                if probe and moves:
                    return moves
    return moves


def _shares(usage: Usage, matrix: np.ndarray, caps: dict[int, int] | None = None) -> tuple[dict[int, float], bool]:
    """Each eligible broker's share of the replicas by weight: of the cluster's, or of its rack's where the
    rack rule pins the racks' totals (:meth:`ClusterView.rack_shares`), and whether it does; with the
    placement rules' ``caps``, no broker's share above its cap (:func:`assigners.policies.capped_shares`).

    Held to the cluster's share there, a broker of a large rack took up to
    it and gave the excess back, and the rest went one move at a time
    through the exact loop. Held to its rack's share, each move is one the
    rack needs (50 brokers x 10k partitions over racks of 17, 17 and 16,
    sticky: skewed 2,147 -> 1,999 moves, uneven racks 321 -> 153 ms).
    """
    view = usage.view
    weight = sum(view.weight_of[b] for b in view.eligible)
    total = sum(usage.count[b] for b in view.eligible)
    rack_totals: dict[str, float] = {}
    for b in view.eligible:
        rack_totals[view.domain_of[b]] = rack_totals.get(view.domain_of[b], 0) + usage.count[b]
    if caps is not None:
        return placement_shares(view, row_lengths(matrix), rack_totals, caps)
    by_rack = view.rack_shares(row_lengths(matrix), rack_totals)
    if by_rack is not None:
        return by_rack, True
    return {b: total * view.weight_of[b] / weight for b in view.eligible}, False


def _give(bulk: _Bulk, rows: np.ndarray, pos: np.ndarray, old: int, new: int, wanted: int, usage: Usage) -> int:
    """Move up to ``wanted`` of ``rows`` (in order) that may go from ``old`` to ``new``; how many moved.

    Moves made on earlier rows never change whether a later one may go:
    the rack masks are the partitions' own, and a move adds (topic, old,
    new), which never reverses another donor-to-receiver move of this phase.
    """
    legal = bulk.legal(rows, pos, old, new)
    if usage.view.max_disk.get(new, math.inf) == math.inf:  # room is a count, and wanted stays within it
        return bulk.take(rows[legal], pos[legal], old, new, wanted, usage)
    given = 0
    for n in legal.tolist():
        i = int(rows[n])
        if not usage.room_for(i, new):
            continue
        if bulk.fresh[i]:
            bulk.move(i, int(pos[n]), old, new, usage)
        elif not bulk.move_if_allowed(i, int(pos[n]), old, new, usage):
            continue
        given += 1
        if given == wanted:
            break
    return given


def _wanted(usage: Usage, old: int, new: int, old_high: int, new_low: int) -> int:
    """How many replicas ``old`` should give ``new`` in the bulk phase: while it is above its ceiling, the
    other below its floor and within its cap, and the move evens them out (:func:`_improves`)."""
    w_old, w_new = usage.view.weight_of[old], usage.view.weight_of[new]
    c_old, c_new, cap = usage.count[old], usage.count[new], usage.view.max_replicas.get(new, math.inf)
    wanted = 0
    while c_old > old_high and c_new < new_low and c_new < cap and (2 * c_new + 1) / w_new < (2 * c_old - 1) / w_old:
        wanted, c_old, c_new = wanted + 1, c_old - 1, c_new + 1
    return wanted


class _Bulk:
    """The replica matrix of :func:`_bulk_count_moves`: each broker's replicas, their racks' masks, and the
    topic pairs a partition's first move may not reverse, judged for many partitions at once."""

    def __init__(
        self,
        assignment: list[list[int]],
        matrix: np.ndarray,
        view: ClusterView,
        bit: dict[int, int],
        rule: _TopicRule,
        take_first: np.ndarray | None,
        within_racks: bool = False,
    ) -> None:
        """``take_first``: a key per partition, each donor's replicas offered lowest first (else in
        partition order); ``within_racks``: every legal move stays in its rack (the rack rule pins the racks'
        totals), so a partition may move again here (see :meth:`_moved`)."""
        self.assignment, self.bit, self.rule = assignment, bit, rule
        self.matrix = matrix  # kept up to date with the moves made here
        valid = self.matrix != PAD
        self.coded = _bit_codes(bit)  # asked again for each move under the placement rules (_moved)
        self.masks = _other_domains(self.matrix, bit, self.coded)
        self.required = view.required_domains_each(row_sum(valid))
        self.moved = np.zeros(len(assignment), dtype=bool)  # moved here: its other replicas' masks are stale
        self.within_racks = within_racks
        part, position = np.nonzero(valid)
        broker = self.matrix[part, position]
        first = np.zeros(len(part), dtype=np.int64) if take_first is None else take_first[part]
        # per broker: followers first, then by the key, then in partition order (``part`` ascends already);
        # stable sorts chained from the last key, the small-int ones by radix (half a lexsort's time at 1M)
        order = np.arange(len(part)) if take_first is None else np.argsort(first, kind="stable")
        order = order[argsort_small((position[order] == 0).astype(np.int8))]
        order = order[argsort_small(broker[order])]
        self.part, self.position, self.broker = part[order], position[order], broker[order]
        self.topic = np.asarray(rule.topic_of, dtype=np.int64)
        triples = rule.pairs()
        eligible = np.asarray(view.eligible, dtype=np.int64)
        self.ids = np.unique(np.concatenate([broker, triples[:, 1], triples[:, 2], eligible]))
        self.rank = {b: n for n, b in enumerate(self.ids.tolist())}  # see _rank_of
        self.blocked = np.sort(self.keys(triples[:, 0], triples[:, 1], triples[:, 2]))
        self.fresh = rule.fresh(self.matrix)

    def keys(self, t: np.ndarray, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        """(topic, a, b) triples as one int64 each (brokers by their rank among the ids known here)."""
        n = len(self.ids)
        out: np.ndarray = (t * n + self._rank_of(a)) * n + self._rank_of(b)
        return out

    def _rank_of(self, b: np.ndarray | int) -> np.ndarray | int:
        """:func:`positions` among the ids, one id from a dict (positions builds a table each call)."""
        return self.rank[int(b)] if isinstance(b, (int, np.integer)) else positions(self.ids, b)

    def cells(self, broker: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and positions of ``broker``'s replicas, followers first, each in partition order."""
        start, end = np.searchsorted(self.broker, [broker, broker + 1])
        return self.part[start:end], self.position[start:end]

    def legal(self, rows: np.ndarray, pos: np.ndarray, old: int, new: int) -> np.ndarray:
        """Which of ``old``'s replicas may go to ``new``: still there and free to move (:meth:`_moved`), ``new``
        not already a replica,
        the rack spread kept as :meth:`_ReplicaIndex.find` keeps it, no topic pair reversed (partitions the
        plan changed before are checked one by one by the caller)."""
        masks = self.masks[rows, pos]
        after = np.bitwise_count(masks | self.bit[new])
        before = np.bitwise_count(masks | self.bit[old])
        ok = ~self.moved[rows] & (self.matrix[rows, pos] == old) & ~row_any(self.matrix[rows] == new)
        ok &= after >= np.minimum(self.required[rows], before)
        if self.rule.placement is not None:
            ok &= self.rule.placement.movable_to(rows, new)
        if len(self.blocked):
            keys = self.keys(self.topic[rows], new, old)
            at = np.minimum(np.searchsorted(self.blocked, keys), len(self.blocked) - 1)
            ok &= ~self.fresh[rows] | (self.blocked[at] != keys)
        return np.flatnonzero(ok)

    def take(self, rows: np.ndarray, pos: np.ndarray, old: int, new: int, wanted: int, usage: Usage) -> int:
        """Move the first ``wanted`` of the legal ``rows`` (in order) that the rule allows from ``old`` to
        ``new``; how many moved.

        A fresh partition's move only adds (topic, old, new): a donor to a
        receiver, which no other move of this phase reverses or is reversed
        by, so the fresh ones move at once. A partition the plan changed
        before is judged alone by the rule, in its turn among the others
        like it (their pairs can reverse each other's).
        """
        fresh = self.fresh[rows]
        fresh_before = np.cumsum(fresh) - fresh
        accepted = fresh.copy()
        taken = 0
        judged = np.flatnonzero(~fresh)  # as lists: a drifted 10k cluster judges ~5,000 of them, one at a time
        for j, ahead, i, at in zip(
            judged.tolist(), fresh_before[judged].tolist(), rows[judged].tolist(), pos[judged].tolist()
        ):
            if ahead + taken >= wanted:
                break  # enough come before it
            if self.move_if_allowed(i, at, old, new, usage):
                accepted[j] = True
                taken += 1
        chosen = accepted & (np.cumsum(accepted) <= wanted)
        self._move_fresh(rows[chosen & fresh], pos[chosen & fresh], old, new, usage)
        return int(chosen.sum())

    def _move_fresh(self, rows: np.ndarray, pos: np.ndarray, old: int, new: int, usage: Usage) -> None:
        self.rule.record_many(self.topic[rows].tolist(), old, new)
        for i, p in zip(rows.tolist(), pos.tolist()):
            self.assignment[i][p] = new
        self.matrix[rows, pos] = new
        self._moved(rows)
        usage.move_many(rows, old, new)

    def _moved(self, rows: np.ndarray | int) -> None:
        """After a move, its partition's next one is judged by the rule alone; and it moves no more here, as
        its other replicas' rack masks no longer hold, unless every move stays within its rack, or under
        the placement rules, where its masks are computed again.

        Where the rack rule pins the racks' totals each rack's brokers
        even out among themselves, and a partition may have a replica to
        give in each (racks of 17/17/16 over 10k partitions, drifted: sticky
        354 -> 188 ms, the same moves within 0.1%). Under the placement
        rules a broker they restrict borrows the few replicas it may take
        (:func:`_borrow`), often of partitions that moved already.
        """
        self.fresh[rows] = False
        if self.within_racks:
            return
        if self.rule.placement is None:
            self.moved[rows] = True
        elif isinstance(rows, int):  # the rules' receivers need these partitions again (_bulk_count_moves)
            bits = [self.bit.get(b, 0) for b in self.assignment[rows]]
            for p in range(len(bits)):
                self.masks[rows, p] = functools.reduce(operator.or_, bits[:p] + bits[p + 1 :], 0)
        else:
            self.masks[rows] = _other_domains(self.matrix[rows], self.bit, self.coded)

    def move(self, i: int, position: int, old: int, new: int, usage: Usage) -> None:
        """One partition's replica from ``old`` to ``new``: rule, lists, matrix and usage."""
        self.rule.record(i, old, new)
        self._place(i, position, old, new, usage)

    def move_if_allowed(self, i: int, position: int, old: int, new: int, usage: Usage) -> bool:
        """:meth:`move` where the rule allows it (:meth:`_TopicRule.record_if_allowed`); moved?"""
        if not self.rule.record_if_allowed(i, old, new):
            return False
        self._place(i, position, old, new, usage)
        return True

    def _place(self, i: int, position: int, old: int, new: int, usage: Usage) -> None:
        self.assignment[i][position] = new
        self.matrix[i, position] = new
        self._moved(i)
        usage.remove(i, old)
        usage.add(i, new)


FROZEN = -2  # a frozen partition's rule code in the index (no rule's index, nor NO_RULE)


def _rule_codes(placement: Placement) -> list[int]:
    """Per partition, its placement rule's index (NO_RULE where none), or FROZEN."""
    codes: list[int] = np.where(placement.frozen, FROZEN, placement.rule_of).tolist()
    return codes


Shift = dict[int, float] | None  # per broker, its share per weight where shares are not by weight alone


def _improves(usage: Usage, donor: int, receiver: int, shift: Shift = None) -> bool:
    """Does moving a replica from ``donor`` to ``receiver`` lower sum((count - share)^2 / weight)? With
    shares by weight (``shift`` None) that is the counts per weight alone."""
    w, c = usage.view.weight_of, usage.count
    if shift is None:
        return (2 * c[receiver] + 1) / w[receiver] < (2 * c[donor] - 1) / w[donor]
    return (2 * c[receiver] + 1) / w[receiver] - 2 * shift[receiver] < (2 * c[donor] - 1) / w[donor] - 2 * shift[donor]


def _any_improving_pair(usage: Usage, shift: Shift = None) -> bool:
    """Is there a donor and receiver for which :func:`_improves` holds? (never for one broker with itself)"""
    w = usage.view.weight_of
    eligible = usage.view.eligible
    s = dict.fromkeys(eligible, 0.0) if shift is None else shift
    lowest_receiver = min((2 * usage.count[b] + 1) / w[b] - 2 * s[b] for b in eligible)
    return lowest_receiver < max((2 * usage.count[b] - 1) / w[b] - 2 * s[b] for b in eligible)


def _placement_shift(usage: Usage, matrix: np.ndarray, placement: Placement | None) -> Shift:
    """Under the placement rules, each broker's share per weight (:func:`_shares` with their caps): the
    count balancing evens counts towards it, so a broker the rules keep short is not a receiver forever."""
    if placement is None:
        return None
    share, _ = _shares(usage, matrix, placement.caps)
    return {b: share[b] / usage.view.weight_of[b] for b in usage.view.eligible}


def _find_count_move(
    index: _ReplicaIndex, usage: Usage, rule: _TopicRule, capped: bool = True, shift: Shift = None
) -> list[tuple[int, int, int]] | None:
    """A direct move from a fullest to an emptiest broker, else the shortest chain of moves.

    A chain donor -> b1 -> ... -> receiver moves one replica per hop; the
    brokers in between gain one and lose one, so only the two ends change.
    It gets past dead ends where every partition of the donor already uses
    the receiver's rack. ``capped``: :attr:`ClusterView.has_caps`; ``shift``: see :func:`_improves`.

    Each move looks at every (donor, receiver) pair, most of them known to
    have nothing that fits (:attr:`_ReplicaIndex.dead`): the pairs are
    judged on the counts read once per move, and a dead one is passed over
    before asking the index (drifted, 50 brokers over 3 racks, where the
    rack rule leaves thousands of moves to this loop: 67 pairs a move asked
    of the index before, 13 now).
    """
    weight, count, dead, freed = usage.view.weight_of, usage.count, index.dead, index.freed
    s = dict.fromkeys(usage.view.eligible, 0.0) if shift is None else shift
    fullness = {b: count[b] / weight[b] - s[b] for b in usage.view.eligible}
    order = sorted(usage.view.eligible, key=lambda b: (fullness[b], b))
    top = fullness[order[-1]]
    donors = [b for b in reversed(order) if fullness[b] == top]
    every_donor = order[::-1]  # direct moves from any heavier broker before a chain from the heaviest
    taking = [(b, (2 * count[b] + 1) / weight[b] - 2 * s[b]) for b in order]  # _improves' receiver side

    def legal(old: int, new: int) -> Callable[[int], bool]:
        return lambda i: usage.room_for(i, new) and rule.allows(i, old, new)

    plain = not capped and not rule.active  # no per-partition condition: any rack-legal one will do
    for old in every_donor:
        giving, dead_old = (2 * count[old] - 1) / weight[old] - 2 * s[old], dead[old]
        for new, takes in taking:
            if takes < giving and dead_old.get(new, -1) != freed[new]:
                i = index.find(old, new, None if plain else legal(old, new))
                if i is not None:
                    return [(i, old, new)]
    for source in donors:
        targets = {b for b in order if _improves(usage, source, b, shift)}
        if not targets:
            continue
        parent: dict[int, tuple[int, int]] = {}
        queue = deque([source])
        seen = {source}
        while queue:
            a = queue.popleft()
            for b in order:
                if b in seen:
                    continue
                i = index.find(a, b, legal(a, b))
                if i is None:
                    continue
                seen.add(b)
                parent[b] = (a, i)
                if b in targets:
                    return _chain(parent, source, b)
                queue.append(b)
    return None


def _chain(parent: dict[int, tuple[int, int]], source: int, end: int) -> list[tuple[int, int, int]]:
    hops = []
    node = end
    while node != source:
        prev, i = parent[node]
        hops.append((i, prev, node))
        node = prev
    return hops[::-1]


def settle(
    assignment: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    since: list[list[int]] | None = None,
    take_first: np.ndarray | None = None,
    probe: bool = False,
    placement: Placement | None = None,
) -> None:
    """The finish every count-balancing strategy shares, in place.

    Replicas above a broker cap go, missing replicas are filled on the
    emptiest legal brokers, then replica counts and leaders are evened out.
    ``since``: the layout the plan's moves are counted from (the live one),
    for strategies that keep it; the changes made up to the balancing
    (forced ones) then count for its A->B / B->A rule too. ``take_first``: a
    key per partition; the count moves take each donor's replicas lowest first. ``probe``: only
    whether it changes anything matters, so it stops at the first replica the count balancing moves (see
    :func:`settles_as_it_is`). ``placement``: the placement rules, which refills and count moves keep (their
    caps held in the shares) and whose frozen partitions keep their leaders.
    """
    sizes = partitions["size_bytes"].to_numpy()
    matrix = replica_matrix(assignment)  # each layout listed as a matrix once (~1 ms per 10k partitions)
    usage = Usage(assignment, sizes, view, matrix)
    evicted = evict_over_capacity(assignment, usage)
    topics = topic_codes(partitions)
    live = None if since is None else layout_matrix(since, partitions)
    moved = None if live is None else topic_moves(live, assignment if evicted else matrix, topics)
    allowed_of = None if placement is None else placement.allowed_of
    refilled = refill(assignment, partitions["rf"].to_numpy(), usage, since, topics, moved, allowed_of)
    if evicted or refilled:
        matrix = replica_matrix(assignment)  # kept in step from here by the count and the leader balancing
    moved_count = balance_replica_counts(
        assignment,
        view,
        sizes,
        topics,
        usage,
        live=since,
        take_first=take_first,
        probe=probe,
        live_matrix=live,
        placement=placement,
        matrix=matrix,
    )
    if probe and moved_count:
        return
    frozen = frozenset() if placement is None else frozenset(np.flatnonzero(placement.frozen).tolist())
    balance_leaders(assignment, view, frozen, matrix)


def settles_as_it_is(
    assignment: list[list[int]], partitions: pd.DataFrame, view: ClusterView, since: list[list[int]]
) -> bool:
    """Would :func:`settle` leave ``assignment`` as it is? Tried on a copy that stops at the first replica
    the count balancing moves (a drifted 10k-partition layout: thousands of moves, half a second)."""
    trial = [list(r) for r in assignment]
    settle(trial, partitions, view, since, probe=True)
    return trial == assignment


def balance_leaders(
    assignment: list[list[int]],
    view: ClusterView,
    frozen: frozenset[int] | set[int] = frozenset(),
    matrix: np.ndarray | None = None,
) -> int:
    """Reorder replica lists so leader counts per broker differ by <= 1 where possible.

    No data moves: a partition's leader becomes another of its replicas. Uses
    shortest augmenting paths (like bipartite matching): from a broker with
    the most leaderships, follow "a leads a partition that b replicates"
    edges to a broker with at least two fewer, and shift leadership along the
    path. Partitions in ``frozen`` (pinned leaders) count but never change.
    ``matrix``: ``assignment``'s, where the caller has it (every change is made in it too).
    Returns the number of leadership changes.
    """
    matrix = replica_matrix(assignment) if matrix is None else matrix  # kept in step with each bulk and flow change
    led = _led_by_broker(matrix[:, 0], view.eligible)
    changes = _bulk_leader_changes(assignment, led, frozen, matrix)
    changes += _flow_leader_changes(assignment, led, frozen, matrix)
    counts = {b: len(parts) for b, parts in led.items()}  # a path changes only its ends' counts: kept in step
    scanned: dict[int, int] = {}  # per broker, its first led partitions known to have no light follower
    while True:
        top = max(counts.values())
        if top - min(counts.values()) <= 1:
            return changes
        path = None
        dead: set[int] = set()  # brokers a failed search reached: none of them reaches a light one either
        for source in sorted(b for b, n in counts.items() if n == top):
            if source in dead:
                continue
            path = _handed_on(assignment, led, source, top, frozen, scanned)
            if path is None:
                path = _leader_path(assignment, led, source, top, frozen, dead)
            if path:
                break
        if not path:
            return changes
        for i, new_leader in path:
            replicas = assignment[i]
            old_leader = replicas[0]
            replicas.remove(new_leader)
            replicas.insert(0, new_leader)
            matrix[i, : len(replicas)] = replicas
            del led[old_leader][i]
            led[new_leader][i] = None
            counts[old_leader] -= 1
            counts[new_leader] += 1
            changes += 1
        if len(path) > 1:  # found by the search in full: every partition its source leads was scanned
            scanned[source] = len(led[source])


def _led_by_broker(leaders: np.ndarray, eligible: list[int]) -> dict[int, dict[int, None]]:
    """Per eligible broker, the partitions it leads in ascending order (ordered sets, see _ReplicaIndex)."""
    order = np.argsort(leaders, kind="stable")
    ids = np.asarray(eligible, dtype=np.int64)
    sorted_leaders = leaders[order]
    starts = np.searchsorted(sorted_leaders, ids, side="left").tolist()
    ends = np.searchsorted(sorted_leaders, ids, side="right").tolist()
    return {b: dict.fromkeys(order[s:e].tolist()) for b, s, e in zip(eligible, starts, ends)}


def _bulk_leader_changes(
    assignment: list[list[int]],
    led: dict[int, dict[int, None]],
    frozen: frozenset[int] | set[int],
    matrix: np.ndarray,
) -> int:
    """One pass handing leadership from brokers above ceil(average) to a follower below floor(average).

    Each such hand-over is one any balanced outcome needs; the path search
    in :func:`balance_leaders` then finishes the rest without re-sorting
    every broker per change. ``matrix``: the assignment's replica matrix, kept in step.
    """
    if not led:
        return 0
    average = sum(len(p) for p in led.values()) / len(led)
    high, low = math.ceil(average), math.floor(average)
    changes: list[tuple[int, int]] = []
    # a giver is above the ceiling and a taker below the floor from the start (a giver only falls, a taker only
    # rises to the floor): only partitions led by the one with a follower on the other are asked
    over = [b for b, parts in led.items() if len(parts) > high]
    under = [b for b, parts in led.items() if len(parts) < low]
    asked = np.isin(matrix[:, 0], over) & row_any(np.isin(matrix[:, 1:], under))
    giving, taking = set(over), set(under)  # those still above the ceiling, those still below the floor
    for i in np.flatnonzero(asked).tolist():
        replicas = assignment[i]
        leader = replicas[0]
        if leader not in giving or i in frozen:
            continue
        taker = next((b for b in replicas[1:] if b in taking), None)
        if taker is not None:
            replicas.remove(taker)
            replicas.insert(0, taker)
            del led[leader][i]
            led[taker][i] = None
            changes.append((i, taker))
            if len(led[leader]) <= high:
                giving.discard(leader)
            if len(led[taker]) >= low:
                taking.discard(taker)
    if changes:
        rows, takers = np.asarray(changes, dtype=np.int64).T
        _lead_from(matrix, rows, takers)
    return len(changes)


# Below this many leaderships still to shift, the path search is quicker than building a flow network.
_FLOW_MIN_SHIFTS = 64


def _flow_leader_changes(
    assignment: list[list[int]],
    led: dict[int, dict[int, None]],
    frozen: frozenset[int] | set[int],
    matrix: np.ndarray,
) -> int:
    """Shift many leaderships at once as a maximum flow (what one path search per change does slowly).

    Network: source -> broker with surplus -> each partition it leads -> each
    of that partition's followers -> ... -> broker with a deficit -> sink. A
    partition node has one way in (its leader) of capacity 1, so it changes
    leader at most once, and brokers in between keep their count. First the
    brokers above ceil(average) feed those below floor(average); then any
    surplus left goes to brokers below the ceiling, or any deficit left is
    fed from brokers above the floor. scipy's Dinic is deterministic. Where
    the average is whole the three are one network: a maximum flow leaves
    no path in it, so it runs once. ``matrix``: the assignment's replica
    matrix, kept in step.
    """
    average = sum(len(p) for p in led.values()) / max(len(led), 1)
    high, low = math.ceil(average), math.floor(average)
    changes = 0
    for over, under in dict.fromkeys(((high, low), (high, high), (low, low))):
        supply = {b: len(p) - over for b, p in led.items() if len(p) > over}
        demand = {b: under - len(p) for b, p in led.items() if len(p) < under}
        if min(sum(supply.values()), sum(demand.values())) >= _FLOW_MIN_SHIFTS:
            changes += _shift_by_flow(assignment, matrix, led, frozen, supply, demand)
    return changes


def _shift_by_flow(
    assignment: list[list[int]],
    everyone: np.ndarray,
    led: dict[int, dict[int, None]],
    frozen: frozenset[int] | set[int],
    supply: dict[int, int],
    demand: dict[int, int],
) -> int:
    """One maximum flow of leaderships from ``supply`` to ``demand`` (see :func:`_flow_leader_changes`); in
    place, ``everyone`` (the assignment's replica matrix) kept in step. Returns the leaderships shifted."""
    brokers = sorted(led)  # broker k is node k + 1; 0 is the source
    parts = [i for b in brokers for i in led[b] if i not in frozen]
    first = len(brokers) + 1  # partition k is node first + k
    sink = first + len(parts)
    src, dst, cap = _flow_edges(everyone, parts, brokers, first, sink, supply, demand)
    from scipy.sparse import csr_matrix  # here: scipy costs a read-only command 0.2 s to import
    from scipy.sparse.csgraph import maximum_flow

    network = csr_matrix(
        (cap.astype(np.int32), (src.astype(np.int64), dst.astype(np.int64))), shape=(sink + 1, sink + 1)
    )
    flow = maximum_flow(network, 0, sink, method="dinic").flow.tocoo()
    used = (flow.data > 0) & (flow.row >= first) & (flow.row < sink)
    shifted = np.asarray(parts, dtype=np.int64)[flow.row[used] - first]
    new_leaders = np.asarray(brokers, dtype=np.int64)[flow.col[used] - 1]
    for i, new_leader in zip(shifted.tolist(), new_leaders.tolist()):
        replicas = assignment[i]
        del led[replicas[0]][i]
        replicas.remove(new_leader)
        replicas.insert(0, new_leader)
        led[new_leader][i] = None
    _lead_from(everyone, shifted, new_leaders)
    return len(shifted)


def _lead_from(matrix: np.ndarray, rows: np.ndarray, new_leaders: np.ndarray) -> None:
    """Each of ``rows`` of a replica matrix led by its broker of ``new_leaders`` (one of its replicas), the
    others in their order after it, as ``remove`` and ``insert(0, ...)`` reorder a list; in place."""
    block = matrix[rows]
    rest = block[block != new_leaders[:, None]].reshape(len(rows), block.shape[1] - 1)
    matrix[rows] = np.concatenate([new_leaders[:, None], rest], axis=1)


def _flow_edges(
    everyone: np.ndarray,
    parts: list[int],
    brokers: list[int],
    first: int,
    sink: int,
    supply: dict[int, int],
    demand: dict[int, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The flow network's edges (from, to, capacity): source -> each broker with a surplus; leader -> partition
    (node ``first`` + its index in ``parts``) -> each follower that is a broker of the network; each broker with
    a deficit -> sink. Padding columns add no edge. Each array is dropped once read: at 1M partitions each is a
    replica matrix's size, and ``everyone`` stays besides."""
    node = {b: k + 1 for k, b in enumerate(brokers)}  # 0 is the source
    known = np.asarray(brokers, dtype=np.int64)
    matrix = everyone[parts]
    slot = np.searchsorted(known, matrix)
    np.clip(slot, 0, len(known) - 1, out=slot)
    in_network = known[slot] == matrix
    del matrix
    part_node = first + np.arange(len(parts), dtype=np.int64)
    row, col = np.nonzero(in_network[:, 1:])
    del in_network
    src = np.concatenate([np.zeros(len(supply), np.int64), slot[:, 0] + 1, part_node[row], [node[b] for b in demand]])
    dst = np.concatenate([[node[b] for b in supply], part_node, slot[row, col + 1] + 1, np.full(len(demand), sink)])
    cap = np.concatenate([list(supply.values()), np.ones(len(parts) + len(row), np.int64), list(demand.values())])
    return src, dst, cap


def _handed_on(
    assignment: list[list[int]],
    led: dict[int, dict[int, None]],
    source: int,
    top: int,
    frozen: frozenset[int] | set[int],
    scanned: dict[int, int],
) -> list[tuple[int, int]] | None:
    """The path of one hand-over :func:`_leader_path` finds first where there is one (a partition ``source``
    leads with a light follower), read past the first ``scanned[source]`` partitions ``source`` leads, known
    to have none; None where the rest has none either (all of them then scanned), for the search in full.

    Known for good: a broker that is not light stays so while the leaders
    are balanced (a path lowers only its source, at the top, and the top
    never rises), and a list loses only the partition its broker hands over,
    the first with a light follower (so past its scanned ones, as the
    source of a path or in its middle), and gains at its end. Pinned leaders
    on 10k partitions: ~320 hand-overs a plan, each found ~60 partitions
    into its source's list.
    """
    items = led[source]
    start = scanned.get(source, 0)
    for n, i in enumerate(itertools.islice(items, start, None), start):
        if i in frozen:
            continue
        for b in assignment[i][1:]:  # the search's seen brokers (the source, the dead) are not light
            if b in led and len(led[b]) <= top - 2:
                scanned[source] = n
                return [(i, b)]
    scanned[source] = len(items)
    return None


def _leader_path(
    assignment: list[list[int]],
    led: dict[int, dict[int, None]],
    source: int,
    top: int,
    frozen: frozenset[int] | set[int],
    dead: set[int] | None = None,
) -> list[tuple[int, int]] | None:
    """Breadth-first search for a chain of leadership hand-overs ending on a light broker.

    ``dead``: brokers an earlier search of the same layout and ``top`` reached without finding one, which
    are neither light nor lead to one (not expanded); where this search finds none, those it reached join
    them. Same answers, and the top brokers' searches that cannot succeed cost one traversal in all, not
    one each (pinned leaders on 10k partitions: 34 failed searches of ~1 ms in a plan).
    """
    parent: dict[int, tuple[int, int]] = {}
    seen = {source} if dead is None else {source, *dead}
    queue = deque([source])
    while queue:
        a = queue.popleft()
        for i in led[a]:
            if i in frozen:
                continue
            for b in assignment[i][1:]:
                if b in seen or b not in led:
                    continue
                seen.add(b)
                parent[b] = (a, i)
                if len(led[b]) <= top - 2:
                    path = []
                    node = b
                    while node != source:
                        prev, part = parent[node]
                        path.append((part, node))
                        node = prev
                    return path[::-1]
                queue.append(b)
    if dead is not None:
        dead |= seen
    return None
