"""Leadership rules applied after any strategy: pinned leaders, anti-affinity, affinity hints.

Config names partitions as ``"topic:partition"``, or ``"topic"`` for all of
a topic's partitions. The rules, strongest first:

1. a pinned partition (``preferred_leaders``) is led by its pinned broker;
   when that broker holds no replica, it replaces the follower whose loss
   keeps the rack rule (same rack first, then the fullest broker);
2. an anti-affinity group's leaders sit on distinct brokers: a maximum
   bipartite matching of partitions to their replicas' brokers (augmenting
   paths, as networkx's matching does), and a partition left unmatched gets
   a free broker in place of a follower;
3. an affinity hint's leaders share a broker when no hard rule is broken:
   a broker all its partitions already replicate, else one that can join
   the others by replacing a follower each. Hints that cannot be met are
   reported, never forced.

Leaders these rules fix are frozen; the remaining leaders are then evened
out again around them (except after ``lpt``, whose leaders balance load).
A partition named in a rule but absent from the cluster is reported in the
notes (config is often shared by clusters).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from assigners.balance import balance_leaders
from assigners.errors import ConstraintViolationError
from assigners.model import DEFAULT_HINT_STRENGTH, ClusterView, Constraints
from assigners.placement import Usage, may_replace
from assigners.policies import Placement


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``"orders:3"`` -> ("orders", 3); ``"orders"`` -> ("orders", None).

    Kafka topic names cannot hold ``:``, so the last one splits.

    >>> parse_ref("orders:3"), parse_ref("orders")
    (('orders', 3), ('orders', None))
    """
    topic, sep, partition = ref.rpartition(":")
    if sep and partition.isdigit():
        return topic, int(partition)
    return ref, None


@dataclass
class LeaderRules:
    """The rules of one cluster, as partition indices of the prepared frame."""

    pins: dict[int, int] = field(default_factory=dict)
    anti_groups: list[list[int]] = field(default_factory=list)
    hint_groups: list[list[int]] = field(default_factory=list)
    hint_names: list[str] = field(default_factory=list)
    hint_hard: list[bool] = field(default_factory=list)  # per hint group: strength 1.0, a hard rule
    missing: list[str] = field(default_factory=list)  # "<config key> <ref>" of names not in this cluster

    @classmethod
    def resolve(cls, constraints: Constraints, partitions: pd.DataFrame) -> LeaderRules:
        if not (constraints.preferred_leaders or constraints.anti_affinity_groups or constraints.affinity_hints):
            return cls()
        index = {(t, int(p)): i for i, (t, p) in enumerate(zip(partitions["topic"], partitions["partition"]))}
        by_topic: dict[str, list[int]] = {}
        for (t, _), i in index.items():
            by_topic.setdefault(t, []).append(i)
        rules = cls()

        def lookup(ref: str, key: str) -> list[int]:
            topic, partition = parse_ref(ref)
            if partition is None:
                found = by_topic.get(topic, [])
            else:
                found = [index[(topic, partition)]] if (topic, partition) in index else []
            if not found:
                rules.missing.append(f"{key} {ref}")
            return found

        for ref, broker in sorted(constraints.preferred_leaders.items()):
            for i in lookup(ref, "preferred_leaders"):
                rules.pins[i] = int(broker)
        for group in constraints.anti_affinity_groups:
            members = sorted({i for ref in group for i in lookup(ref, "anti_affinity_groups")})
            if len(members) > 1:
                rules.anti_groups.append(members)
        strengths = constraints.affinity_hint_strengths or (DEFAULT_HINT_STRENGTH,) * len(constraints.affinity_hints)
        # the stronger first (stable: config order among equals), so they get the brokers; 0.0: ignored
        for n in sorted(range(len(strengths)), key=lambda n: -strengths[n]):
            if strengths[n] <= 0.0:
                continue
            group = constraints.affinity_hints[n]
            for name, members in _hint_groups(group, lambda ref: lookup(ref, "affinity_hints"), partitions):
                if len(members) > 1:
                    rules.hint_groups.append(members)
                    rules.hint_names.append(name)
                    rules.hint_hard.append(strengths[n] >= 1.0)
        return rules

    @property
    def active(self) -> bool:
        return bool(self.pins or self.anti_groups or self.hint_groups)


def _hint_groups(
    group: tuple[str, ...], lookup: Callable[[str], list[int]], partitions: pd.DataFrame
) -> Iterable[tuple[str, list[int]]]:
    """One group of named partitions, or one per partition number when the hint names topics."""
    refs = [parse_ref(r) for r in group]
    if all(p is not None for _, p in refs):
        yield " ".join(group), sorted({i for ref in group for i in lookup(ref)})
        return
    per_number: dict[int, list[int]] = {}
    for ref in group:
        for i in lookup(ref):
            per_number.setdefault(int(partitions["partition"].iat[i]), []).append(i)
    for number in sorted(per_number):
        yield f"{' '.join(group)} partition {number}", sorted(per_number[number])


def apply_leader_rules(
    assignment: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    rules: LeaderRules,
    rebalance: bool,
    placement: Placement | None = None,
) -> tuple[list[str], frozenset[int]]:
    """Enforce pins and anti-affinity, try the hints, in place.

    Returns the unmet hints and the partitions whose leaders the rules fixed.

    Raises :class:`ConstraintViolationError` listing every hard rule that
    cannot be met.
    """
    usage = Usage(assignment, partitions["size_bytes"].to_numpy(dtype=np.int64), view)
    names = [f"{t}-{p}" for t, p in zip(partitions["topic"], partitions["partition"])]
    placer = _Placer(assignment, usage, view, placement)
    fixed: dict[int, int] = {}
    problems: list[str] = []
    for i, broker in sorted(rules.pins.items()):
        if broker not in view.eligible_set:
            problems.append(f"{names[i]}: pinned leader {broker} is not an eligible broker")
        elif placer.lead(i, broker):
            fixed[i] = broker
        else:
            problems.append(f"{names[i]}: pinned leader {broker} cannot join {assignment[i]} (racks or caps)")
    for group in rules.anti_groups:
        problems += _separate_leaders(group, fixed, placer, names)
    if problems:
        raise ConstraintViolationError(f"{len(problems)} leadership rules cannot be met", table="config", rows=problems)
    # every anti-affinity member is fixed by now, so a hint can only break a rule through ``fixed``
    unmet: list[str] = []
    hard: list[str] = []
    for group, name, must in zip(rules.hint_groups, rules.hint_names, rules.hint_hard):
        if _colocate(group, fixed, placer):
            if must:  # a hard hint met stays met: its leaders are fixed for what follows
                fixed.update({i: assignment[i][0] for i in group})
        else:
            (hard if must else unmet).append(name)
    if hard:
        raise ConstraintViolationError(
            f"{len(hard)} affinity hints of strength 1.0 cannot be met (leaders on one broker: racks or caps)",
            table="config",
            rows=hard,
        )
    if rebalance:
        balance_leaders(assignment, view, frozenset(fixed))
    return unmet, frozenset(fixed)


class _Placer:
    """Makes a broker a partition's leader, replacing a follower when it holds no replica."""

    def __init__(
        self, assignment: list[list[int]], usage: Usage, view: ClusterView, placement: Placement | None = None
    ) -> None:
        """``placement``: the placement rules, which a replaced follower keeps (never a forbidden broker, never
        a frozen partition's replicas)."""
        self.assignment, self.usage, self.view, self.placement = assignment, usage, view, placement
        self.led = Counter(r[0] for r in assignment if r)

    def can_join(self, i: int, broker: int) -> int | None:
        """Position of the replica ``broker`` would replace in partition ``i`` (None: it cannot)."""
        replicas, view = self.assignment[i], self.view
        if broker in replicas:
            return replicas.index(broker)
        if broker not in view.eligible_set or not self.usage.room_for(i, broker) or not replicas:
            return None
        if self.placement is not None and not self.placement.may_move(i, broker):
            return None
        options = []
        for pos, old in enumerate(replicas):
            if may_replace(replicas, old, broker, view):
                same_rack = view.domain_of[old] == view.domain_of[broker]
                fullness = self.usage.fullness(old) if old in self.usage.count else 0.0
                options.append((not same_rack, pos == 0, -fullness, pos))  # a follower goes before the leader
        return min(options)[-1] if options else None

    def lead(self, i: int, broker: int) -> bool:
        pos = self.can_join(i, broker)
        if pos is None:
            return False
        replicas = self.assignment[i]
        if replicas[pos] != broker:
            self.usage.remove(i, replicas[pos])
            self.usage.add(i, broker)
            replicas[pos] = broker
        self.set_leader(i, broker)
        return True

    def restore(self, i: int, replicas: list[int]) -> None:
        current = self.assignment[i]
        self.led[current[0]] -= 1
        for b in set(current) - set(replicas):
            self.usage.remove(i, b)
        for b in set(replicas) - set(current):
            self.usage.add(i, b)
        current[:] = replicas
        self.led[replicas[0]] += 1

    def set_leader(self, i: int, broker: int) -> None:
        replicas = self.assignment[i]
        self.led[replicas[0]] -= 1
        replicas.remove(broker)
        replicas.insert(0, broker)
        self.led[broker] += 1


def _separate_leaders(group: list[int], fixed: dict[int, int], placer: _Placer, names: list[str]) -> list[str]:
    """Distinct leaders for one anti-affinity group; returns what cannot be met."""
    eligible = placer.view.eligible
    if len(group) > len(eligible):
        return [f"anti-affinity group of {len(group)} partitions needs as many brokers, {len(eligible)} are eligible"]
    owner: dict[int, int] = {}  # broker -> partition leading there
    match: dict[int, int] = {}  # partition -> broker
    problems = []
    for i in group:
        if i in fixed:
            if fixed[i] in owner:
                problems.append(f"{names[i]} and {names[owner[fixed[i]]]}: both fixed on leader {fixed[i]}")
            owner[fixed[i]], match[i] = i, fixed[i]

    def candidates(i: int) -> list[int]:
        return [fixed[i]] if i in fixed else list(placer.assignment[i])

    for i in group:
        if i in match or _augment(i, candidates, owner, match):
            continue
        free = sorted((b for b in eligible if b not in owner), key=lambda b: (placer.usage.fullness(b), b))
        broker = next((b for b in free if placer.can_join(i, b) is not None), None)
        if broker is None:
            problems.append(f"{names[i]}: no free broker left to lead it apart from its anti-affinity group")
            continue
        owner[broker], match[i] = i, broker
    for i in group:
        if i in match and i not in fixed:
            if placer.lead(i, match[i]):
                fixed[i] = match[i]
            else:
                problems.append(f"{names[i]}: broker {match[i]} has no room to lead it apart from its group")
    return problems


def _augment(start: int, candidates: Callable[[int], list[int]], owner: dict[int, int], match: dict[int, int]) -> bool:
    """Shortest augmenting path from partition ``start`` to a broker no group member leads on."""
    parent: dict[int, int] = {}
    queue = deque([start])
    while queue:
        p = queue.popleft()
        for b in candidates(p):
            if b in parent:
                continue
            parent[b] = p
            if b not in owner:
                while True:  # flip the path: each partition takes the broker it reached
                    p = parent[b]
                    previous = match.get(p)
                    owner[b], match[p] = p, b
                    if p == start:
                        return True
                    b = previous  # type: ignore[assignment]  # set: every partition on the path but start is matched
            if owner[b] != p:
                queue.append(owner[b])
    return False


def _colocate(group: list[int], fixed: dict[int, int], placer: _Placer) -> bool:
    """Lead every partition of an affinity hint from one broker if the hard rules allow; in place.

    Fixed leaders (pins, anti-affinity) are hard, so a group with one decides
    the broker. Brokers that already replicate most of the group go first.
    """
    pinned = {fixed[i] for i in group if i in fixed}
    if len(pinned) > 1:
        return False
    holders = Counter(b for i in group for b in placer.assignment[i])
    for broker in sorted(pinned or holders, key=lambda b: (-holders[b], placer.led[b], b)):
        before = {i: list(placer.assignment[i]) for i in group if i not in fixed}
        if all(placer.lead(i, broker) for i in before):
            fixed.update(dict.fromkeys(before, broker))
            return True
        for i, replicas in before.items():  # a cap filled up half way: undo this broker's attempt
            placer.restore(i, replicas)
    return False
