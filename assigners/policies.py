"""Placement rules by topic, the hard part: required tags, taints and tolerations, frozen topics.

``[[constraints.placement]]`` rules (:class:`assigners.model.PlacementRule`)
name topics by a regular expression; the first rule matching a topic
applies to it. A topic may use the eligible brokers that carry every tag
its rule requires (a broker set: Cruise Control's ``BrokerSetAwareGoal``)
and whose every taint it tolerates (Redpanda's taints and tolerations, with
Kubernetes' meaning: a toleration ``"key=value"`` tolerates that taint, a
bare ``"key"`` any taint with that key; a topic without a rule tolerates
none). A frozen topic's replicas stay where they are (Cruise Control's
``topics.excluded.from.partition.movement``), except those on a broker the
topic may not keep, which move with the fewest moves.

``balanced`` plans within the rules (its search and count balancing ask
:meth:`Placement.may_move`, its bands and bounds come from
:func:`placement_shares` and :func:`placement_floor`); every other strategy
plans as it does, and :func:`enforce_placement` then puts each replica a
rule forbids on the allowed broker holding the fewest replicas per weight
(keeping the rack rule and the caps) and resets frozen partitions.
:func:`placement_violations` is part of every plan's validation, as the
rack rule is. A snapshot no plan can meet fails before
planning (:func:`check_placement`), naming the topic, the rule and the
brokers that qualify.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd

from assigners.errors import CapacityExhaustedError, InsufficientBrokersError, InvalidInputError
from assigners.model import (
    PAD,
    ClusterView,
    Constraints,
    PlacementRule,
    distinct_per_row,
    live_matrix,
    pad_to,
    replica_matrix,
    row_all,
    row_sum,
    same_sets,
)
from assigners.placement import Usage, keep_valid, kept_whole

NO_RULE = -1  # a topic no rule matches: it may use every untainted eligible broker
LISTED = 6  # brokers a note lists per rule
UNION_SETS = 8  # distinct broker sets up to which placement_floor tries every union of them (2^8 - 1)


@dataclass(frozen=True)
class Placement:
    """One cluster's rules resolved: per partition its rule, per rule the brokers its topics may use."""

    rules: tuple[PlacementRule, ...]
    rule_of: np.ndarray  # per partition: the index of its rule, NO_RULE where none matches
    allowed: dict[int, frozenset[int]]  # per rule index: the eligible brokers its topics may use
    frozen: np.ndarray  # per partition: its topic's rule freezes it
    caps: dict[int, int]  # per eligible broker: the most replicas the rules let it hold (replica_caps)
    preferred: dict[int, frozenset[int]] = field(default_factory=dict)  # per rule with soft prefer_tags

    @cached_property
    def confines(self) -> bool:
        """Does a rule keep some replica off an eligible broker or in place (a broker set, a taint, a frozen
        topic), not only prefer (soft rules alone)?"""
        eligible = frozenset(self.caps)  # one cap per eligible broker
        return bool(self.frozen.any()) or any(allowed != eligible for allowed in self.allowed.values())

    def allowed_of(self, i: int) -> frozenset[int]:
        return self.allowed[int(self.rule_of[i])]

    def may_move(self, i: int, new: int) -> bool:
        """May a replica of partition ``i`` move onto broker ``new`` (not frozen, and allowed there)?"""
        return not self.frozen[i] and new in self.allowed[int(self.rule_of[i])]

    def movable_to(self, parts: np.ndarray, new: int) -> np.ndarray:
        """:meth:`may_move` of many partitions at once."""
        if new >= self._table.shape[1]:  # above every allowed broker id: allowed to none
            return np.zeros(len(parts), dtype=bool)
        ok: np.ndarray = ~self.frozen[parts] & self._table[:, new][self._codes[parts]]
        return ok

    def may_move_each(self, parts: np.ndarray, brokers: np.ndarray) -> np.ndarray:
        """:meth:`may_move` of each partition of ``parts`` onto the broker beside it in ``brokers``."""
        span = self._table.shape[1]
        inside = brokers < span
        ok = np.zeros(len(parts), dtype=bool)
        ok[inside] = self._table[self._codes[parts[inside]], brokers[inside]]
        allowed: np.ndarray = ok & ~self.frozen[parts]
        return allowed

    def breaks(self, matrix: np.ndarray) -> np.ndarray:
        """Per partition (a replica matrix's rows): does it hold a replica on a broker its rule forbids?"""
        bad: np.ndarray = np.asarray(self.forbidden_cells(matrix).any(axis=1))
        return bad

    def forbidden_cells(self, matrix: np.ndarray, parts: np.ndarray | None = None) -> np.ndarray:
        """Per cell of a replica matrix (its rows the partitions ``parts``, else every partition in order): a
        replica on a broker its partition's rule forbids?"""
        cells = matrix != PAD
        span = self._table.shape[1]
        inside = cells & (matrix < span)
        ok = np.zeros(matrix.shape, dtype=bool)
        rows, cols = np.nonzero(inside)
        codes = self._codes if parts is None else self._codes[parts]
        ok[rows, cols] = self._table[codes[rows], matrix[rows, cols]]
        forbidden: np.ndarray = cells & ~ok
        return forbidden

    @cached_property
    def _codes(self) -> np.ndarray:
        """Each partition's rule as a row of :meth:`_table`."""
        rules = sorted(self.allowed)
        return np.searchsorted(np.asarray(rules, dtype=np.int64), self.rule_of)

    @cached_property
    def _table(self) -> np.ndarray:
        """Per rule (in index order) and broker id: may its topics use the broker?"""
        rules = sorted(self.allowed)
        span = max((max(a, default=0) for a in self.allowed.values()), default=0) + 1
        table = np.zeros((len(rules), span + 1), dtype=bool)
        for n, r in enumerate(rules):
            table[n, sorted(self.allowed[r])] = True
        return table

    def frozen_cells(self, current: list[list[int]], brokers: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each frozen partition's live replicas (``current``: the live layout) on one of ``brokers``, in
        partition and replica order: the partition, the replica's position (0 leads) and the broker's index
        in ``brokers``. Kept for the same layout and brokers: a search's floors ask ten times or more (one
        per goal and floor; ~0.4 ms each on 10k partitions)."""
        key = tuple(brokers)
        kept = self._frozen_cells.get(key)
        if kept is not None and kept[0] is current:
            return kept[1]
        rows = np.flatnonzero(self.frozen)
        live = replica_matrix([current[i] for i in rows.tolist()])
        ids = np.asarray(brokers, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        at = np.minimum(np.searchsorted(ids[order], live), len(ids) - 1)
        part, position = np.nonzero((live != PAD) & (ids[order][at] == live))
        cells = rows[part], position, order[at[part, position]]
        self._frozen_cells[key] = (current, cells)
        return cells

    @cached_property
    def _frozen_cells(self) -> dict[tuple[int, ...], tuple[list[list[int]], tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        return {}  # see frozen_cells: per brokers, the layout asked about (the same object) and its cells

    @cached_property
    def leader_racks(self) -> list[tuple[str, ...] | None] | None:
        """:func:`leader_racks_of`, listed once: a 10k plan with a ``leader_racks`` rule asks it three to six
        times (~0.35 ms each). The placement's own list: read, never changed."""
        if not any(rule.leader_racks and not rule.frozen for rule in self.rules):
            return None
        racks = [rule.leader_racks if rule.leader_racks and not rule.frozen else None for rule in self.rules]
        return [None if r < 0 else racks[r] for r in self.rule_of.tolist()]

    def describe(self, r: int) -> str:
        """A rule as the errors and notes name it: its number in the config and its pattern."""
        if r == NO_RULE:
            return "no placement rule (untainted brokers only)"
        rule = self.rules[r]
        parts = [f'topics "{rule.topics}"']
        if rule.require_tags:
            parts.append("require_tags " + ", ".join(f"{k}={v}" for k, v in sorted(rule.require_tags.items())))
        if rule.tolerations:
            parts.append("tolerations " + ", ".join(rule.tolerations))
        return f"placement rule {r + 1} ({'; '.join(parts)})"


def capped_shares(total: float, weight: dict[int, float], caps: dict[int, int]) -> dict[int, float]:
    """``total`` shared by weight with no broker above its cap (water filling): each broker takes
    min(cap, level x weight), the level set so the shares add up to ``total`` (or every cap, if less)."""
    free = dict(weight)
    shares: dict[int, float] = {}
    left = float(total)
    while free:
        level = left / sum(free.values()) if sum(free.values()) > 0 else 0.0
        full = [b for b, w in free.items() if caps[b] <= level * w]
        if not full:
            shares.update({b: level * w for b, w in free.items()})
            break
        for b in full:
            shares[b] = float(caps[b])
            left -= caps[b]
            del free[b]
    return shares


def placement_shares(
    view: ClusterView, rf: np.ndarray, rack_totals: dict[str, float], caps: dict[int, int]
) -> tuple[dict[int, float], bool]:
    """Each eligible broker's share of the replicas under the placement rules' ``caps`` (water filling,
    :func:`capped_shares`), and whether the rack rule pins the racks' totals: then within each rack, of its
    total (``rack_totals``: each partition has a replica in every rack, so a rack whose broker the rules
    keep short has its other brokers take the rest), else of the cluster's.
    """
    weight = {b: view.weight_of[b] for b in view.eligible}
    pinned = view.pins_racks(rf)
    if not pinned:
        return capped_shares(sum(rack_totals.values()), weight, caps), False
    shares: dict[int, float] = {}
    for rack, total in sorted(rack_totals.items()):
        mine = {b: w for b, w in weight.items() if view.domain_of[b] == rack}
        shares.update(capped_shares(total, mine, caps))
    return shares, True


def absorbable(
    placement: Placement, leader: np.ndarray, follower: np.ndarray, current: list[list[int]], brokers: list[int]
) -> np.ndarray:
    """Per broker of ``brokers``, the most load the rules let it carry: a replica (leading, where that is more)
    of each partition it may hold, and the frozen replicas it holds."""
    most = np.maximum(leader, follower)
    loose = ~placement.frozen
    per_rule = {r: float(most[(placement.rule_of == r) & loose].sum()) for r in placement.allowed}
    out = np.array([sum(a for r, a in per_rule.items() if b in placement.allowed[r]) for b in brokers], dtype=float)
    _add_frozen(out, placement, leader, follower, current, brokers)
    return out


def _add_frozen(
    out: np.ndarray,
    placement: Placement,
    leader: np.ndarray,
    follower: np.ndarray,
    current: list[list[int]],
    brokers: list[int],
) -> None:
    """Add to ``out`` (per broker of ``brokers``) each frozen partition's live replicas there, ``leader`` for its
    first and ``follower`` for the others; in place, in partition and replica order as a loop adds them
    (``np.add.at`` adds one by one: the same floats)."""
    if not placement.frozen.any() or not len(brokers):
        return
    part, position, at = placement.frozen_cells(current, brokers)
    np.add.at(out, at, np.where(position == 0, leader[part], follower[part]).astype(float))


def water_floor(carried: float, capacity: np.ndarray, most: np.ndarray) -> float:
    """The least peak load per unit of capacity when brokers of ``capacity`` share ``carried``, none above
    ``most`` (what each may carry at all): those that cannot reach the level take all they can, the others
    share the rest."""
    full = np.zeros(len(capacity), dtype=bool)
    while True:
        room = float(capacity[~full].sum())
        level = (carried - float(most[full].sum())) / room if room > 0 else math.inf
        short = ~full & (most < level * capacity)
        if not short.any():
            return max(level, 0.0)
        full |= short


def placement_floor(
    placement: Placement,
    leader: np.ndarray,
    follower: np.ndarray,
    rf: np.ndarray,
    capacity: dict[int, float],
    current: list[list[int]],
) -> tuple[list[int], float]:
    """The brokers the rules confine the most load to per unit of ``capacity``, and that load (Hall's
    condition: the partitions whose topics may use only brokers of a set ``T`` put all their replicas
    there, and a frozen partition's stay where they are, so the most loaded broker of ``T`` carries at least
    their load over ``T``'s capacity). ``T`` ranges over the unions of the rules' broker sets (each set
    alone where there are more than :data:`UNION_SETS`) and each broker holding a frozen replica.
    """
    loose = ~placement.frozen
    amount = leader + (rf - 1) * follower  # a partition's replicas in all, one of them leading
    held = np.zeros(len(capacity), dtype=float)
    _add_frozen(held, placement, leader, follower, current, list(capacity))
    pinned = dict(zip(capacity, held.tolist()))
    by_set: dict[frozenset[int], float] = {}
    for r, brokers in placement.allowed.items():
        by_set[brokers] = by_set.get(brokers, 0.0) + float(amount[(placement.rule_of == r) & loose].sum())
    sets = sorted(by_set, key=sorted)
    unions = (
        {frozenset().union(*combo) for n in range(1, len(sets) + 1) for combo in itertools.combinations(sets, n)}
        if len(sets) <= UNION_SETS
        else set(sets)
    )
    unions |= {frozenset([b]) for b, load in pinned.items() if load > 0}
    best: tuple[list[int], float] = ([], 0.0)
    for brokers in sorted(unions, key=sorted):
        room = sum(capacity[b] for b in brokers)
        carried = sum(load for s, load in by_set.items() if s <= brokers) + sum(pinned[b] for b in brokers)
        floor = carried / room if room > 0 else 0.0
        if floor > best[1] * (1 + 1e-9):
            best = sorted(brokers), floor
    return best


def with_broker_rules(constraints: Constraints, brokers: pd.DataFrame) -> Constraints:
    """``constraints`` with the brokers table's ``tags`` and ``taints`` columns (``key=value;key=value``, a taint
    may be a bare ``key``) for the brokers the config does not name: ``[constraints.broker_tags]`` and
    ``[constraints.broker_taints]`` win per broker. Raises :class:`InvalidInputError` naming the rows of a
    malformed cell."""
    read: dict[str, dict[int, list[tuple[str, str]]]] = {"tags": {}, "taints": {}}
    bad = []
    for column, cells in read.items():
        if column not in brokers:
            continue
        for b, cell in zip(brokers["broker_id"].tolist(), brokers[column].tolist()):
            if not isinstance(cell, str) or not cell.strip():
                continue
            pairs = [(k.strip(), v.strip()) for k, _, v in (item.partition("=") for item in cell.split(";"))]
            if any(not k or (column == "tags" and not v) for k, v in pairs):
                bad.append(f"broker_id={int(b)} {column}={cell!r}")
            cells[int(b)] = pairs
    if bad:
        why = 'tags and taints must read "key=value;key=value" (a taint may be a bare key)'
        raise InvalidInputError(why, table="brokers", rows=bad)
    if not read["tags"] and not read["taints"]:
        return constraints
    tags = {b: dict(pairs) for b, pairs in read["tags"].items()}
    taints = {b: tuple(f"{k}={v}" if v else k for k, v in pairs) for b, pairs in read["taints"].items()}
    return replace(
        constraints,
        broker_tags={**tags, **constraints.broker_tags},
        broker_taints={**taints, **constraints.broker_taints},
    )


def resolve_placement(constraints: Constraints, partitions: pd.DataFrame, view: ClusterView) -> Placement | None:
    """The rules for ``partitions`` (prepared: ``topic``); None where no rule and no taint applies, so a
    cluster without them pays nothing. Kept on the view for the same constraints and frame
    (:meth:`ClusterView.derived`): a plan asks for them once per search, ~2 ms each on 10k partitions."""
    return view.derived("placement", (constraints, partitions), lambda: _resolved(constraints, partitions, view))


def _resolved(constraints: Constraints, partitions: pd.DataFrame, view: ClusterView) -> Placement | None:
    taints = {b: tuple(t) for b, t in constraints.broker_taints.items() if t and b in view.eligible_set}
    if not constraints.placement and not taints:
        return None
    rules = constraints.placement
    codes, uniques = pd.factorize(partitions["topic"], sort=False)
    topics = [str(t) for t in uniques]
    patterns = [re.compile(rule.topics) for rule in rules]  # PlacementRule.matches, compiled once per rule
    first_match = [next((r for r, p in enumerate(patterns) if p.fullmatch(t)), NO_RULE) for t in topics]
    rule_of = np.asarray(first_match, dtype=np.int64)[codes] if len(codes) else np.zeros(0, dtype=np.int64)
    used = np.unique(rule_of).tolist()
    allowed = {r: _allowed(None if r == NO_RULE else rules[r], constraints, taints, view) for r in used}
    frozen = np.asarray([rule.frozen for rule in rules] + [False], dtype=bool)[rule_of]  # NO_RULE: the last
    caps = _replica_caps(rule_of, allowed, frozen, partitions, view)
    preferred = {
        r: frozenset(b for b in allowed[r] if _carries(constraints.broker_tags.get(b, {}), rules[r].prefer_tags))
        for r in used
        if r != NO_RULE and rules[r].prefer_tags and 0.0 < rules[r].prefer_strength < 1.0
    }
    return Placement(rules, rule_of, allowed, frozen, caps, preferred)


def _carries(tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(tags.get(k) == v for k, v in wanted.items())


def _replica_caps(
    rule_of: np.ndarray,
    allowed: dict[int, frozenset[int]],
    frozen: np.ndarray,
    partitions: pd.DataFrame,
    view: ClusterView,
) -> dict[int, int]:
    """Per eligible broker, the most replicas it can hold under the rules: one per partition whose topic may
    use it (a frozen partition only where it is live)."""
    caps = dict.fromkeys(view.eligible, 0)
    span = max(allowed, default=NO_RULE) - NO_RULE + 1  # NO_RULE at 0
    loose = np.bincount(rule_of[~frozen] - NO_RULE, minlength=span).tolist()
    for r, brokers in allowed.items():
        for b in brokers:
            caps[b] += loose[r - NO_RULE]
    held = np.flatnonzero(frozen)
    if len(held):  # each frozen replica where it is live, on a broker its rule allows
        matrix = replica_matrix(partitions["current"].to_numpy()[held].tolist())
        rows, cols = np.nonzero(matrix != PAD)
        pairs = zip(rule_of[held[rows]].tolist(), matrix[rows, cols].tolist())
        for (r, b), n in Counter(pairs).items():
            if b in allowed[r]:
                caps[b] += n
    return caps


def _allowed(
    rule: PlacementRule | None, constraints: Constraints, taints: dict[int, tuple[str, ...]], view: ClusterView
) -> frozenset[int]:
    """The eligible brokers carrying every tag ``rule`` requires (and prefers at strength 1.0: a must) and
    whose every taint it tolerates."""
    needs = dict(rule.require_tags) if rule else {}
    if rule is not None and rule.prefer_strength >= 1.0:
        needs |= dict(rule.prefer_tags)
    tolerates = set(rule.tolerations) if rule else set()
    out = []
    for b in view.eligible:
        tags = constraints.broker_tags.get(b, {})
        if any(tags.get(k) != v for k, v in needs.items()):
            continue
        if all(t in tolerates or t.split("=", 1)[0] in tolerates for t in taints.get(b, ())):
            out.append(b)
    return frozenset(out)


def check_placement(placement: Placement, partitions: pd.DataFrame, view: ClusterView) -> None:
    """Fail, naming the topic, the rule and the brokers that qualify, where a rule leaves too few brokers or
    racks for a partition's replication factor (and the rack rule)."""
    rows = []
    for r, allowed in sorted(placement.allowed.items()):
        mine = placement.rule_of == r
        if not mine.any():
            continue
        rf = int(partitions["rf"].to_numpy()[mine].max())
        racks = len({view.domain_of[b] for b in allowed})
        needed = view.required_domains(rf)
        if len(allowed) >= rf and racks >= needed:
            continue
        topic = str(partitions["topic"].to_numpy()[mine][0])
        brokers = sorted(allowed)
        why = f" (the rack rule needs {needed})" if racks < needed else ""
        rows.append(
            f"topic {topic}: {placement.describe(r)} leaves {_plural(len(brokers), 'eligible broker')} {brokers} "
            f"in {_plural(racks, 'rack')} for replication factor {rf}{why}"
        )
    if rows:
        raise InsufficientBrokersError("placement rules leave too few brokers", table="config", rows=rows)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def enforce_placement(
    rows: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    placement: Placement,
    live: np.ndarray | None = None,
) -> tuple[list[str], frozenset[int]]:
    """Frozen partitions back to their live replicas, and every replica on a broker its rule forbids onto the
    allowed broker with the fewest replicas per weight; in place (:func:`repair_placement`). Returns the notes
    (the live replicas moved off, the frozen partitions kept) and the partitions whose change the rules force
    (the move budget never defers them). ``live``: the live layout's replica matrix, where the caller has it."""
    live = live_matrix(partitions) if live is None else live
    notes = _live_repairs(live, view, placement)
    frozen_kept, forced = repair_placement(rows, partitions, view, placement, live)
    if frozen_kept:
        noun = "partition" if frozen_kept == 1 else "partitions"
        notes.append(f"frozen topics: {frozen_kept} {noun} the strategy would move kept where they are")
    return notes, forced


def repair_placement(
    rows: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    placement: Placement,
    live: np.ndarray | None = None,
) -> tuple[int, frozenset[int]]:
    """:func:`enforce_placement` without its notes, for a strategy keeping the rules inside its own search (the
    notes are the planner's, from its own call: worked out again per search they cost ``balanced`` with five
    rules three of its four ~3 ms). Returns how many frozen partitions the plan would have moved were kept
    where they are, and the partitions whose change the rules force."""
    current = partitions["current"].tolist()
    rf = partitions["rf"].to_numpy(dtype=np.int64).tolist()
    frozen_kept, forced = 0, set()
    planned = replica_matrix(rows)
    todo = placement.breaks(planned)
    if placement.frozen.any():  # only frozen partitions are judged against the live layout
        live = live_matrix(partitions) if live is None else live
        todo |= _frozen_to_repair(planned, live, rf, view, placement)
    if todo.any():  # a plan that keeps the rules already (a check, as most calls are) builds nothing more
        usage = Usage(rows, partitions["size_bytes"].to_numpy(dtype=np.int64), view, planned)
        ranking = _Ranking(usage, view)
        required = {n: view.required_domains(n) for n in set(rf)}
    allowed_by, rule_of, frozen_of = placement.allowed, placement.rule_of.tolist(), placement.frozen.tolist()
    for i in np.flatnonzero(todo).tolist():
        allowed, frozen, row = allowed_by[rule_of[i]], frozen_of[i], rows[i]
        kept = keep_valid([b for b in (current[i] if frozen else row) if b in allowed], rf[i], view)
        if frozen and kept == list(current[i]):
            frozen_kept += row != kept
        else:
            forced.add(i)
        # keep_valid keeps the order: where the leader left, the next broker kept (or the first refill) leads
        try:
            new = _refilled(i, kept, row if frozen else [], rf[i], required[rf[i]], allowed, ranking)
        except _NoRoom as no_room:
            rule = placement.describe(rule_of[i])
            raise CapacityExhaustedError(
                f"no allowed broker with room (racks, caps) is left for a replica under {rule}",
                table="config",
                rows=[f"{partitions['topic'].iat[i]}-{partitions['partition'].iat[i]} replicas={no_room.args[0]}"],
            ) from None
        ranking.replace(i, row, new)
        rows[i] = new
    return frozen_kept, frozenset(forced)


def _frozen_to_repair(
    planned: np.ndarray, live: np.ndarray, rf: list[int], view: ClusterView, placement: Placement
) -> np.ndarray:
    """Per partition: is it a frozen one :func:`enforce_placement` changes, whether or not it breaks a rule?
    Where it is planned otherwise than live (its leader too), or its live replicas may not all stay."""
    width = max(live.shape[1], planned.shape[1])
    as_live = placement.frozen & row_all(pad_to(planned, width) == pad_to(live, width))
    todo: np.ndarray = placement.frozen & ~as_live
    rows = np.flatnonzero(as_live)
    todo[rows] = ~stays_each(live, rows, np.asarray(rf, dtype=np.int64), placement, view)
    return todo


def _live_repairs(live: np.ndarray, view: ClusterView, placement: Placement) -> list[str]:
    """The note naming the live replicas on brokers their topic may not use (the repairs), per rule and broker."""
    part, slot = np.nonzero(placement.forbidden_cells(live))  # cells, not a loop: ~1,800 partitions on 10k
    held = live[part, slot]
    mine = np.isin(held, np.asarray(view.eligible, dtype=np.int64))
    pairs = np.stack([placement.rule_of[part[mine]], held[mine]], axis=1)
    keys, counts = np.unique(pairs, axis=0, return_counts=True)
    moved_off = {(r, b): n for (r, b), n in zip(keys.tolist(), counts.tolist())}  # (rule, broker) -> replicas
    if not moved_off:
        return []
    by_rule: dict[int, list[str]] = {}
    for (r, b), n in sorted(moved_off.items()):
        by_rule.setdefault(r, []).append(f"{n} on broker {b}")
    listed = "; ".join(
        f"{placement.describe(r)}: "
        + ", ".join(on[:LISTED])
        + (f" and {len(on) - LISTED} more brokers" if len(on) > LISTED else "")
        for r, on in by_rule.items()
    )
    total = sum(moved_off.values())
    return [f"placement rules: {total} live replicas sit on brokers their topic may not use, moved off: {listed}"]


class _Ranking:
    """The eligible brokers by replicas per weight (then id), kept sorted as their counts change: a refill
    takes the first that fits without sorting them again (thousands of refills on a 10k cluster)."""

    def __init__(self, usage: Usage, view: ClusterView) -> None:
        self.usage, self.view, self.weight_of = usage, view, view.weight_of
        self.key = {b: (usage.fullness(b), b) for b in view.eligible}
        self.order = sorted(self.key.values())
        self.ids = [b for _, b in self.order]  # the same order, ids alone: read per refill, not built each time

    def brokers(self) -> list[int]:
        """The eligible brokers, fewest replicas per weight first (the ranking's own list: not to be changed)."""
        return self.ids

    def replace(self, i: int, old: list[int], new: list[int]) -> None:
        """Partition ``i``'s replicas changed from ``old`` to ``new``: usage and ranks with them."""
        for b in old:
            if b not in new:
                self._shift(i, b, -1)
        for b in new:
            if b not in old:
                self._shift(i, b, 1)

    def _shift(self, i: int, b: int, step: int) -> None:
        """Partition ``i``'s replica added to broker ``b`` (``step`` 1) or removed (-1): usage and rank with it."""
        old = self.key.get(b)
        if old is None:
            return  # not eligible: neither counted nor ranked
        usage, order = self.usage, self.order
        usage.count[b] += step
        usage.disk[b] += step * usage.sizes[i]
        at = bisect.bisect_left(order, old)
        del order[at], self.ids[at]
        self.key[b] = new = (usage.count[b] / self.weight_of[b], b)
        at = bisect.bisect_left(order, new)
        order.insert(at, new)
        self.ids.insert(at, b)


class _NoRoom(Exception):  # noqa: N818 (a signal caught inside this module, not an error users see)
    """No allowed broker has room for a partition's next replica (:func:`enforce_placement` names it)."""


def _refilled(
    i: int,
    kept: list[int],
    planned: list[int],
    rf: int,
    required: int,
    allowed: frozenset[int],
    ranking: _Ranking,
) -> list[int]:
    """``kept`` filled up to ``rf``: first with brokers of ``planned`` (the strategy's choice), then with the
    allowed broker holding the fewest replicas per weight that keeps the ``required`` racks reachable and has
    room (raises :class:`_NoRoom` with the replicas so far where none has)."""
    new, usage = list(kept), ranking.usage
    domain_of = ranking.view.domain_of
    capped = not usage.uncapped
    racks = {domain_of[b] for b in new}
    while len(new) < rf:
        short = len(racks) + (rf - len(new) - 1) < required  # the next replica must open a new rack
        choice = None
        # the strategy's brokers first, then the ranking's; one plain loop, no generator: thousands of refills on
        # a 10k cluster with the rules new, ~16 brokers asked each
        for b in planned + ranking.brokers() if planned else ranking.brokers():
            if (
                b in allowed
                and b not in new
                and (not short or domain_of[b] not in racks)
                and (not capped or usage.room_for(i, b))
            ):
                choice = b
                break
        if choice is None:
            raise _NoRoom(new)
        new.append(choice)
        racks.add(domain_of[choice])
    return new


def prefer_leader_racks(
    rows: list[list[int]], view: ClusterView, placement: Placement, live: list[list[int]] | None = None
) -> tuple[list[str], int]:
    """Each partition of a rule with ``leader_racks`` led from its replica in the first of those racks it has a
    replica in (Redpanda's leader pinning); in place. A soft rule: it moves no data and passes over leader
    counts (it ranks before them), a frozen partition keeps its leader, and the leader rules applied after it
    (pins, anti-affinity, hints) win. Returns the notes and how many partitions have no replica in any of
    their preferred racks (unmet). ``live``: the live layout, where the note counts only the leaderships
    passed that change the cluster's (not those a strategy moved away and this pass brings back)."""
    changed, unmet = 0, 0
    for i, racks in enumerate(leader_racks_of(placement) or []):
        if not racks:
            continue
        reps = rows[i]
        rack = pinned_rack(reps, racks, view.domain_of)
        if rack is None:
            unmet += 1
            continue
        best = next(n for n, b in enumerate(reps) if view.domain_of.get(b) == rack)
        if best != 0:
            reps.insert(0, reps.pop(best))
            changed += live is None or not live[i] or live[i][0] != reps[0]
    notes = []
    if changed:
        notes.append(f"leader_racks: {changed} leaderships passed to a replica in a preferred rack")
    if unmet:
        notes.append(f"leader_racks not met: {unmet} partitions have no replica in their preferred racks")
    return notes, unmet


def placement_violations(
    matrix: np.ndarray, partitions: pd.DataFrame, view: ClusterView, placement: Placement
) -> list[str]:
    """Replicas on brokers their topic's rule forbids, and frozen partitions moved although their live
    replicas were all allowed and legal, one line each."""
    out = []
    current = partitions["current"].tolist()
    rf = partitions["rf"].to_numpy(dtype=np.int64).tolist()
    topics, numbers = partitions["topic"].tolist(), partitions["partition"].tolist()
    moved = placement.frozen.copy()  # frozen partitions whose replicas changed (a vector compare first)
    stays = np.zeros(len(moved), dtype=bool)  # of those, where the live replicas could all have stayed
    if moved.any():
        live = live_matrix(partitions)
        moved &= ~same_sets(matrix, live)
        stays[moved] = stays_each(live, np.flatnonzero(moved), np.asarray(rf, dtype=np.int64), placement, view)
    for i in np.flatnonzero(placement.breaks(matrix) | moved).tolist():  # the rest keep every rule
        reps = [b for b in matrix[i].tolist() if b != PAD]
        name = f"{topics[i]}-{numbers[i]}"
        allowed = placement.allowed_of(i)
        forbidden = [b for b in reps if b not in allowed]
        if forbidden:
            rule = placement.describe(int(placement.rule_of[i]))
            out.append(f"{name}: replicas on brokers {forbidden} that {rule} forbids")
        elif moved[i] and stays[i]:
            out.append(f"{name}: frozen, but moved from {list(current[i])} to {reps}")
    return out


def stays_each(
    live: np.ndarray, rows: np.ndarray, rf: np.ndarray, placement: Placement, view: ClusterView
) -> np.ndarray:
    """Per partition of ``rows``: may its live replicas (``live``: the live layout's replica matrix) all stay,
    allowed by its rule (so eligible) and kept whole by :func:`assigners.placement.keep_valid` (none twice, at
    most its RF of ``rf``, the racks the rule asks still reachable)? For all at once: asked one by one, the
    ~1,000 frozen partitions of the 10k bench cluster with five rules cost each repair a few ms."""
    matrix, rf = live[rows], rf[rows]
    cells = matrix != PAD
    held: np.ndarray = row_sum(cells)
    ok: np.ndarray = ~placement.forbidden_cells(matrix, rows).any(axis=1) & (distinct_per_row(matrix, cells) == held)
    ok &= kept_whole(view.domain_matrix(matrix), cells, rf, view.required_domains_each(rf))
    return ok


def leader_racks_of(placement: Placement | None) -> list[tuple[str, ...] | None] | None:
    """Per partition, the racks a ``leader_racks`` rule pins its leader to (frozen ones aside: they keep
    theirs), for the balance score (:func:`assigners.metrics.quality`); None where no rule pins any."""
    return None if placement is None else placement.leader_racks


def leaders_pinned(rows: list[list[int]], view: ClusterView, placement: Placement | None) -> frozenset[int]:
    """The partitions whose leader ``leader_racks`` pins (:func:`prefer_leader_racks`: a replica in one of
    their rule's racks, frozen ones aside)."""
    racks = leader_racks_of(placement) or []
    return frozenset(i for i, r in enumerate(racks) if r and pinned_rack(rows[i], r, view.domain_of) is not None)


def pinned_rack(replicas: list[int], racks: tuple[str, ...], domain_of: Mapping[int, str]) -> str | None:
    """The first of ``racks`` one of ``replicas`` sits in: where ``leader_racks`` leads the partition from
    (None: it has no replica in them)."""
    held = {domain_of.get(b) for b in replicas}
    return next((r for r in racks if r in held), None)
