"""Placing single replicas under every hard rule: eligibility, racks, caps.

The strategies share these steps: trim a baseline to what may stay
(:func:`keep_valid`), take replicas off brokers above their caps
(:func:`evict_over_capacity`) and fill the missing replicas on the emptiest
legal broker (:func:`refill`). All edit a list of replica lists in place.
"""

from __future__ import annotations

import bisect
import heapq
import math
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import NoReturn

import numpy as np

from assigners.errors import CapacityExhaustedError, InsufficientBrokersError
from assigners.model import (
    PAD,
    ClusterView,
    Replicas,
    as_matrix,
    distinct_per_row,
    id_union,
    pad_to,
    positions,
    replica_matrix,
    row_all,
    row_any,
    row_contains,
    row_sum,
    sorted_rows,
)


class Usage:
    """Replicas and bytes per eligible broker, against its caps."""

    def __init__(
        self, assignment: list[list[int]], sizes: np.ndarray, view: ClusterView, matrix: np.ndarray | None = None
    ) -> None:
        """``matrix``: the assignment's replica matrix, where the caller has it already."""
        self.view = view
        self.uncapped = not view.has_caps  # then every broker has room: asked per candidate, answered at once
        self.sizes_array = np.ascontiguousarray(sizes, dtype=np.int64)
        # Python ints on lookup, 8 bytes each (a list holds an int object per partition: 38 -> 8 MB at 1M)
        self.sizes = array("q", self.sizes_array.tobytes())
        self.count = dict.fromkeys(view.eligible, 0)
        self.disk = dict.fromkeys(view.eligible, 0)
        if not any(assignment):
            return
        # one numpy pass instead of an add() per replica; int64 sums keep byte counts exact
        matrix = replica_matrix(assignment) if matrix is None else matrix
        part, position = np.nonzero(matrix != PAD)
        held = matrix[part, position]
        ids = id_union(np.asarray(view.eligible, dtype=np.int64), held)
        slot = positions(ids, held)
        counts = np.bincount(slot, minlength=len(ids))
        disk = np.zeros(len(ids), dtype=np.int64)
        np.add.at(disk, slot, np.asarray(sizes, dtype=np.int64)[part])
        for b, n, d in zip(ids.tolist(), counts.tolist(), disk.tolist()):
            if b in self.count:
                self.count[b], self.disk[b] = n, d

    def add(self, i: int, b: int) -> None:
        if b in self.count:
            self.count[b] += 1
            self.disk[b] += self.sizes[i]

    def remove(self, i: int, b: int) -> None:
        if b in self.count:
            self.count[b] -= 1
            self.disk[b] -= self.sizes[i]

    def move_many(self, parts: np.ndarray, old: int, new: int) -> None:
        """:meth:`remove` from ``old`` and :meth:`add` to ``new`` of each of ``parts`` (both eligible)."""
        moved = int(self.sizes_array[parts].sum())
        self.count[old] -= len(parts)
        self.count[new] += len(parts)
        self.disk[old] -= moved
        self.disk[new] += moved

    def room_for(self, i: int, b: int) -> bool:
        """May broker ``b`` take one more replica, of partition ``i``?"""
        if self.uncapped:
            return True
        view = self.view
        return self.count[b] + 1 <= view.max_replicas.get(b, math.inf) and self.disk[b] + self.sizes[
            i
        ] <= view.max_disk.get(b, math.inf)

    def fullness(self, b: int) -> float:
        """Replicas relative to weight: what count balancing evens out."""
        return self.count[b] / self.view.weight_of[b]

    def over_capacity(self, b: int) -> bool:
        view = self.view
        return self.count[b] > view.max_replicas.get(b, math.inf) or self.disk[b] > view.max_disk.get(b, math.inf)


def keep_valid(
    baseline: list[int],
    rf: int,
    view: ClusterView,
    pressure: Mapping[int, float] | None = None,
    leader_may_go: bool = False,
) -> list[int]:
    """The baseline replicas that may stay: eligible, distinct, at most ``rf``, racks still reachable.

    Order is kept, so the leader stays the leader when it may. When some
    must go (RF decrease, or the kept replicas crowd too few racks for the
    rack rule), the follower on the broker with the highest ``pressure``
    (its load per weight) goes first, so the forced move also evens out the
    brokers; ties go to the later replica. ``leader_may_go``: where the rack
    rule makes one of a rack's replicas go, the leader's competes as well
    (its leadership passes to the next replica; any of them keeps the rule).
    """
    eligible = view.eligible_set
    if len(baseline) <= rf and eligible.issuperset(baseline):  # the common case: all may stay
        spread = len({view.domain_of[b] for b in baseline})
        if len(set(baseline)) == len(baseline) and spread + rf - len(baseline) >= view.required_domains(rf):
            return list(baseline)
    kept: list[int] = []
    for b in baseline:
        if b in eligible and b not in kept:
            kept.append(b)
    required = view.required_domains(rf)

    def drop_one(candidates: list[int], leader_too: bool = False) -> None:
        followers = candidates if leader_too else [j for j in candidates if j > 0] or candidates
        worst = max(followers, key=lambda j: ((pressure or {}).get(kept[j], 0.0), j))
        kept.pop(worst)

    while len(kept) > rf:
        drop_one(list(range(len(kept))))
    while len({view.domain_of[b] for b in kept}) + (rf - len(kept)) < required:
        domains = [view.domain_of[b] for b in kept]
        drop_one([j for j, d in enumerate(domains) if domains.count(d) > 1], leader_may_go)
    return kept


def keep_valid_each(
    baselines: list[list[int]],
    rf: Sequence[int],
    view: ClusterView,
    even_out: bool = False,
    matrix: np.ndarray | None = None,
) -> list[list[int]]:
    """:func:`keep_valid` of every partition, without the per-partition call where all replicas may stay.

    The common case (RF replicas, distinct, all eligible, enough racks) is
    recognised in bulk on the replica matrix; the rest go through
    :func:`keep_valid` one by one, so the result is the same. ``even_out``:
    where one must go, the one on the broker with the most replicas per
    weight at that point (counts updated as replicas go), the leader's
    included, so the forced moves do the count balancing's work and it
    moves fewer. The leader's replica competing is what lets them: on a
    rack-blind layout where the brokers above their share lead many of the
    crowded partitions, keeping every leader where it may stay left a third
    of that work undone (10k partitions: 8,001 -> 7,134 moves to even the
    counts; the best choice of the replicas to drop, by maximum flow, is
    7,134 too). ``matrix``: ``baselines``' replica matrix, where the caller has it.
    """
    n = len(baselines)
    if not n:
        return []
    matrix = replica_matrix(baselines) if matrix is None else matrix
    want = np.asarray(rf, dtype=np.int64)
    present = matrix != PAD
    eligible_ids = np.fromiter(view.eligible_set, dtype=np.int64, count=len(view.eligible_set))
    eligible = np.isin(matrix, eligible_ids)
    ordered = sorted_rows(np.where(present, matrix, np.iinfo(np.int64).max))
    distinct = ~row_any((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != np.iinfo(np.int64).max))
    cells = np.where(present, view.domain_matrix(matrix), -1)
    domains = sorted_rows(cells)
    spread = row_sum(domains[:, 1:] != domains[:, :-1]) + (domains[:, 0] != -1)
    whole = (row_sum(present) == want) & row_all(eligible | ~present) & distinct
    required = view.required_domains_each(want)
    ok = whole & (spread >= required)
    kept = [list(b) for b in baselines]
    pressure: dict[int, float] | None = None
    if even_out and not ok.all():
        ids = np.sort(eligible_ids)
        held = np.bincount(positions(ids, matrix[eligible]), minlength=len(ids)).tolist()
        pressure = {b: c / view.weight_of[b] for b, c in zip(ids.tolist(), held)}
    # the next most common case, a rack-blind layout's: all may stay but two share a rack the rule wants apart
    pair, first, second = _one_crowded_pair(cells)
    pair &= whole & (spread == want - 1) & (required == want)
    # and a dead broker's partitions: all the eligible ones may stay (no more than RF, racks reachable), so only
    # the others go, which no broker's pressure counts: in any order, without the general search
    off_ineligible = _off_ineligible_only(present, eligible, cells, want, required) & ~ok & distinct
    eligible_set = view.eligible_set
    for i in np.flatnonzero(off_ineligible).tolist():
        kept[i] = [b for b in kept[i] if b in eligible_set]
    bad = np.flatnonzero(~ok & ~off_ineligible)
    for i, crowded, j, k in zip(bad.tolist(), pair[bad].tolist(), first[bad].tolist(), second[bad].tolist()):
        if crowded:  # keep_valid's choice, without its general search: the fuller broker's replica goes
            replicas = kept[i]
            if pressure is not None and pressure.get(replicas[j], 0.0) > pressure.get(replicas[k], 0.0):
                k = j  # ties, and without even_out (the leader stays), the later one goes
            gone = replicas.pop(k)
            if pressure is not None and gone in pressure:
                pressure[gone] -= 1 / view.weight_of[gone]
            continue
        kept[i] = keep_valid(kept[i], int(rf[i]), view, pressure, leader_may_go=even_out)
        if pressure is not None:
            for b in set(baselines[i]) - set(kept[i]):
                if b in pressure:
                    pressure[b] -= 1 / view.weight_of[b]
    return kept


def _off_ineligible_only(
    present: np.ndarray, eligible: np.ndarray, domains_of: np.ndarray, want: np.ndarray, required: np.ndarray
) -> np.ndarray:
    """Per row of a domain matrix: do its eligible replicas number at most ``want`` and leave the rack rule's
    ``required`` racks reachable? (All False where every replica is eligible: nothing to learn there.)"""
    if not (present & ~eligible).any():
        return np.zeros(len(present), dtype=bool)
    return kept_whole(domains_of, present & eligible, want, required)


def kept_whole(domains_of: np.ndarray, staying: np.ndarray, rf: np.ndarray, required: np.ndarray) -> np.ndarray:
    """Per row of a domain matrix: would :func:`keep_valid` keep its ``staying`` replicas whole on the counts and
    the racks (at most ``rf`` of them, and the ``required`` racks still reachable with the ones they span)?
    A broker held twice is the caller's to rule out."""
    held = row_sum(staying)
    whole: np.ndarray = (held <= rf) & (distinct_per_row(domains_of, staying) + rf - held >= required)
    return whole


def _one_crowded_pair(domains_of: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a domain matrix (-1: no replica): whether exactly two cells share a domain, and their
    positions (first, second)."""
    n, width = domains_of.shape
    pairs = np.zeros(n, dtype=np.int64)
    first, second = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for j in range(width):
        for k in range(j + 1, width):
            same = (domains_of[:, j] == domains_of[:, k]) & (domains_of[:, j] != -1)
            pairs += same
            first[same], second[same] = j, k
    return pairs == 1, first, second


def may_replace(reps: list[int], old: int, new: int, view: ClusterView) -> bool:
    """Does ``reps`` keep the rack rule with ``old`` replaced by ``new`` (not already a replica)?"""
    if new in reps:
        return False
    after = [new if b == old else b for b in reps]
    return len({view.domain_of[b] for b in after}) >= view.required_domains(len(reps))


def may_replace_with(reps: list[int], old: int, candidates: Iterable[int], view: ClusterView) -> list[int]:
    """The ``candidates`` :func:`may_replace` allows in place of ``old``, the other replicas' racks read once
    (a scale-out weighs a dozen new brokers for each of thousands of replicas)."""
    others = {view.domain_of[b] for b in reps if b != old}
    need = view.required_domains(len(reps)) - len(others)  # 1: the new one must bring a rack of its own
    return [b for b in candidates if b not in reps and int(view.domain_of[b] not in others) >= need]


def replica_pressure(assignment: list[list[int]], view: ClusterView) -> dict[int, float]:
    """Replicas per weight of every eligible broker."""
    counts = dict.fromkeys(view.eligible, 0)
    for replicas in assignment:
        for b in replicas:
            if b in counts:
                counts[b] += 1
    return {b: c / view.weight_of[b] for b, c in counts.items()}


def evict_over_capacity(assignment: list[list[int]], usage: Usage) -> int:
    """Drop replicas from brokers above a cap, followers and later partitions first; returns how many."""
    dropped = 0
    over = [b for b in usage.view.eligible if usage.over_capacity(b)]
    for b in over:
        for leaders_too in (False, True):
            for i in range(len(assignment) - 1, -1, -1):
                if not usage.over_capacity(b):
                    break
                replicas = assignment[i]
                if b in replicas and (leaders_too or replicas[0] != b):
                    replicas.remove(b)
                    usage.remove(i, b)
                    dropped += 1
    return dropped


def refill(
    assignment: list[list[int]],
    rf: np.ndarray,
    usage: Usage,
    since: list[list[int]] | None = None,
    topics: np.ndarray | None = None,
    moved: set[tuple[int, int, int]] | None = None,
    allowed_of: Callable[[int], Container[int]] | None = None,
) -> int:
    """Add the missing replicas of every partition on the emptiest legal broker; returns how many.


    Legal: eligible, not already a replica, room under the caps, and a new
    rack while the partition still needs one for the rack rule. "Emptiest"
    is replicas per weight, ties to the lower broker id, so refills spread
    evenly and deterministically. With ``since`` (the live layout) and
    ``topics``, a refill avoids, while another broker is legal, the reverse
    of a move the plan already makes in the topic (a partition of a topic
    that left A for B, and another that leaves B for A: both could have
    stayed), the per-plan rule of Kafka's reassignment guidance. ``moved``: :func:`topic_moves` from
    ``since`` to ``assignment``, where the caller has it. ``allowed_of(i)``: the brokers partition ``i`` may
    use at all (the placement rules).
    """
    view = usage.view
    ranked = sorted((usage.fullness(b), b) for b in view.eligible)  # kept sorted: a few dozen to hundreds
    added = 0
    rule = None  # (the topic's moves so far, the live layout, topic codes) when the rule applies
    if since is not None and topics is not None:
        rule = (topic_moves(since, assignment, topics) if moved is None else moved, since, topics.tolist())
    targets = rf.tolist()
    order = range(len(targets)) if rule is None else _fewest_choices_first(assignment, targets, view)
    count, weight_of = usage.count, view.weight_of  # fullness inline: asked twice per replica refilled
    required = {target: view.required_domains(target) for target in set(targets)}  # asked per replica
    for i in order:
        target, replicas = targets[i], assignment[i]
        while len(replicas) < target:
            left = None if rule is None else [d for d in rule[1][i] if d not in replicas]  # live brokers it left
            avoid = _reverses(rule[0], rule[2][i], left) if left and rule is not None else None
            usable = None if allowed_of is None else allowed_of(i)
            b = first_legal(ranked, i, replicas, target, usage, avoid, required[target], usable)
            if b is None:
                raise_no_room(i, replicas, usage)
            del ranked[bisect.bisect_left(ranked, (count[b] / weight_of[b], b))]
            replicas.append(b)
            usage.add(i, b)
            bisect.insort(ranked, (count[b] / weight_of[b], b))
            if left and rule is not None:
                topic = rule[2][i]
                rule[0].update([(topic, d, b) for d in left if d != b])
            added += 1
    return added


def _fewest_choices_first(assignment: list[list[int]], targets: list[int], view: ClusterView) -> list[int]:
    """Partitions to refill, those with the fewest brokers in racks they do not use yet first: a partition
    bound to one rack's few brokers picks before one that could go anywhere, so the latter can still avoid
    reversing the former's move."""
    short = np.array([i for i, (r, t) in enumerate(zip(assignment, targets)) if len(r) < t], dtype=np.int64)
    if not len(short):
        return []
    names = sorted(set(view.domain_of.values()))
    eligible_per_domain = np.zeros(len(names) + 1, dtype=np.int64)  # the last: brokers the view does not know
    for b in view.eligible:
        eligible_per_domain[names.index(view.domain_of[b])] += 1
    domains = sorted_rows(view.domain_matrix(replica_matrix([assignment[i] for i in short.tolist()])))
    first = np.ones(domains.shape, dtype=bool)
    first[:, 1:] = domains[:, 1:] != domains[:, :-1]
    known = (domains >= 0) & (domains < len(names))
    used = row_sum(np.where(first & known, eligible_per_domain[np.where(known, domains, len(names))], 0))
    choices = len(view.eligible) - used
    order: list[int] = short[np.lexsort((short, choices))].tolist()
    return order


def _reverses(moves: set[tuple[int, int, int]], topic: int, dropped: list[int]) -> Callable[[int], bool]:
    """Would adding broker ``b`` to a partition of ``topic`` that left ``dropped`` reverse a move of the topic?"""
    if len(dropped) == 1:  # the usual case, asked per candidate: one lookup, no generator
        d = dropped[0]
        return lambda b: (topic, b, d) in moves
    return lambda b: any((topic, b, d) in moves for d in dropped)


def topic_moves(before: Replicas, after: Replicas, topics: np.ndarray) -> set[tuple[int, int, int]]:
    """(topic, from, to) of going from ``before`` to ``after`` (lists, or their replica matrices where the
    caller has them): each broker a partition leaves with each it joins.

    On the replica matrices, as :func:`topic_move_counts` names them: a set
    per changed partition cost twice as much (10k partitions, 5k changed).
    """
    t, a, b = _move_pairs(as_matrix(after), as_matrix(before), np.asarray(topics, dtype=np.int64))
    return set(zip(t.tolist(), a.tolist(), b.tolist()))


def _move_pairs(now: np.ndarray, was: np.ndarray, topic: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(topic, from, to) as three arrays, one entry per broker a partition leaves and broker it joins going
    from ``was`` to ``now`` (replica matrices)."""
    width = max(now.shape[1], was.shape[1])
    now, was = pad_to(now, width), pad_to(was, width)
    gone = (was != PAD) & ~row_contains(was, now)
    joined = (now != PAD) & ~row_contains(now, was)
    rows = np.flatnonzero(row_any(gone) & row_any(joined))
    r, j, k = np.nonzero(gone[rows][:, :, None] & joined[rows][:, None, :])
    return topic[rows[r]].astype(np.int64), was[rows[r], j], now[rows[r], k]


Pair = tuple[int, int, int]  # (topic, from broker, to broker)


class PairCounts:
    """(topic, from, to) -> how many of a plan's moves name it, each pair kept as one int ((topic x span +
    from) x span + to): a plan of a million moves built its pairs as tuples in over a second."""

    def __init__(self, span: int, counts: dict[int, int] | None = None) -> None:
        """``span``: above every broker id a pair may name (encoding stays unambiguous)."""
        self.span, self.counts = span, {} if counts is None else counts

    def _key(self, pair: Pair) -> int:
        t, a, b = pair
        return (t * self.span + a) * self.span + b

    def __getitem__(self, pair: Pair) -> int:
        t, a, b = pair  # _key inlined: the goal search asks tens of thousands of times
        return self.counts.get((t * self.span + a) * self.span + b, 0)

    def __setitem__(self, pair: Pair, n: int) -> None:
        self.counts[self._key(pair)] = n

    def update(self, pairs: Sequence[Pair] | set[Pair]) -> None:
        for pair in pairs:
            key = self._key(pair)
            self.counts[key] = self.counts.get(key, 0) + 1

    def subtract(self, pairs: Sequence[Pair] | set[Pair]) -> None:
        for pair in pairs:
            key = self._key(pair)
            self.counts[key] = self.counts.get(key, 0) - 1

    def count_between(self, topic: int, froms: Iterable[int], tos: Iterable[int], by: int) -> None:
        """Add ``by`` to (topic, a, b) for every a of ``froms`` and b of ``tos`` (a partition's pairs at once,
        keyed inline: the goal search counts two per step)."""
        base, span = topic * self.span, self.span
        for a in froms:
            for b in tos:
                key = (base + a) * span + b
                self.counts[key] = self.counts.get(key, 0) + by

    def any_between(self, topic: int, froms: Iterable[int], tos: Iterable[int]) -> bool:
        """Does any (topic, a, b) for a of ``froms`` and b of ``tos`` have a count?"""
        base, span, counts = topic * self.span, self.span, self.counts
        return any(counts.get((base + a) * span + b, 0) for a in froms for b in tos)

    def named(self) -> np.ndarray:
        """The pairs with a positive count, as rows (topic, from, to), in no particular order."""
        keys = np.fromiter((k for k, n in self.counts.items() if n > 0), dtype=np.int64)
        return np.stack([keys // (self.span * self.span), keys // self.span % self.span, keys % self.span], axis=1)


def topic_move_counts(now: np.ndarray, was: np.ndarray, topic: np.ndarray, span: int) -> PairCounts:
    """(topic, from, to) of every partition going from ``was`` to ``now`` (replica matrices), counted: each
    broker a partition leaves with each broker it joins, as :func:`topic_moves` names them. ``span``: above
    every broker id the counts will be asked about (the eligible brokers', and these matrices')."""
    span = max(span, int(max(was.max(initial=0), now.max(initial=0))) + 1)
    if now is was:  # the live layout judged as it stands (model.live_matrix is shared): nothing moves
        return PairCounts(span, {})
    t, a, b = _move_pairs(now, was, topic)
    keys, counts = np.unique((t * span + a) * span + b, return_counts=True)
    return PairCounts(span, dict(zip(keys.tolist(), counts.tolist())))


def pop_legal(
    heap: list[tuple[float, int]],
    key_of: Callable[[int], float],
    i: int,
    replicas: list[int],
    target: int,
    usage: Usage,
    avoid: Callable[[int], bool] | None = None,
) -> int:
    """Pop the lowest-key broker that may take the next replica of partition ``i`` (:func:`first_legal`; the
    others go back).

    ``heap`` holds ``(key, broker)`` entries; an entry whose key is no longer
    ``key_of(broker)`` is stale and dropped (the caller pushed a fresh one).
    """
    popped: list[tuple[float, int]] = []

    def fresh() -> Iterator[tuple[float, int]]:
        while heap:
            entry = heapq.heappop(heap)
            if entry[0] == key_of(entry[1]):  # else stale: the fresh one is in the heap
                popped.append(entry)
                yield entry

    chosen = first_legal(fresh(), i, replicas, target, usage, avoid)
    for entry in popped:
        if entry[1] != chosen:
            heapq.heappush(heap, entry)
    if chosen is None:
        raise_no_room(i, replicas, usage)
    return chosen


def first_legal(
    ranked: Iterable[tuple[float, int]],
    i: int,
    replicas: list[int],
    target: int,
    usage: Usage,
    avoid: Callable[[int], bool] | None = None,
    required: int | None = None,
    usable: Container[int] | None = None,
) -> int | None:
    """Of the brokers ``ranked`` (``(key, broker)``, best first), the one to take the next replica of partition
    ``i`` (None: none may).

    The first legal one in a rack the partition does not use yet, while it
    may still use one; else the first in a rack it uses where the rack rule
    still holds; those ``avoid`` names only when no other is legal. Takes
    from ``ranked`` only as far as it needs to. ``required``: ``view.required_domains(target)``, where the
    caller keeps it; ``usable``: the only brokers it may take (the placement rules), where they apply.
    """
    view = usage.view
    domain_of = view.domain_of
    used = {domain_of[b] for b in replicas}
    if required is None:
        required = view.required_domains(target)
    prefers_new_rack = len(used) < required or (view.rack_aware and len(used) < view.n_domains)
    old_rack_ok = len(used) + (target - len(replicas) - 1) >= required
    fallback: int | None = None
    avoided: int | None = None
    for _, b in ranked:
        if usable is not None and b not in usable:
            continue  # the placement rules keep the partition off it
        new_rack = not prefers_new_rack or domain_of[b] not in used
        if not (new_rack or old_rack_ok):
            continue  # an old rack the rule cannot take: never chosen, so its rules need no asking (most brokers)
        if b in replicas or not usage.room_for(i, b):
            continue
        if avoid is not None and avoid(b):
            if avoided is None:
                avoided = b
            continue
        if new_rack:
            return b
        if fallback is None:
            fallback = b  # an old rack still meets the rule; a new one is only preferred
    return fallback if fallback is not None else avoided


def raise_no_room(i: int, replicas: list[int], usage: Usage) -> NoReturn:
    view = usage.view
    full = [b for b in view.eligible if b not in replicas and not usage.room_for(i, b)]
    if full:
        raise CapacityExhaustedError(
            f"no eligible broker has room for replica {len(replicas) + 1} of partition #{i}",
            table="brokers",
            rows=[
                f"broker_id={b} replicas={usage.count[b]}/{_fmt(view.max_replicas[b])} "
                f"bytes={usage.disk[b]}/{_fmt(view.max_disk[b])}"
                for b in full
            ],
        )
    raise InsufficientBrokersError(
        f"no broker in a new rack left for replica {len(replicas) + 1} of partition #{i} (replicas {replicas})",
        table="brokers",
    )


def _fmt(cap: float) -> str:
    return "-" if cap == math.inf else str(int(cap))
