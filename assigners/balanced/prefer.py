"""The soft placement rules in ``balanced``: ``prefer_tags`` below strength 1.0, and ``leader_racks``' data
part (a replica in one of the racks, so the planner can lead the partition from there).

LaminarDB's affinity hints carry a strength from 0.0 (ignore) to 1.0 (must);
here 1.0 makes ``prefer_tags`` a requirement (:mod:`assigners.policies`),
0.0 ignores it, and between the rules are tried strongest first. Redpanda
pins leaders to racks. The soft rules rank after the goals' thresholds
(never pushing a broker above one the plan meets without them) and before
fewer moves; the exact solver ranks them the same way
(``tests/unit/oracle.py``, ``soft_goals``). In order:

1. :func:`search_preferring`: the goal search with the preferences
   required, kept where it meets as many goals as with them soft;
2. :func:`prefer_tagged`, :func:`into_leader_racks`: moves and swaps onto
   preferred brokers and into the leader racks that every goal accepts
   (:meth:`GoalSearch.harmless`);
3. on a small cluster, :func:`prefer_searched`, :func:`leader_racks_searched`:
   one at a time, a placement the rules allow, then the goals searched again
   with every soft placement kept (:attr:`GoalSearch.keep_soft`).

docs/placement.md has the figures against the solver.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from assigners.balanced.goals import NOT_MET
from assigners.balanced.searches import Plan, judgement, reach_goals, settle_and_search
from assigners.balanced.state import GoalSearch, Resource
from assigners.errors import PlanningError
from assigners.model import ClusterView, Constraints
from assigners.policies import (
    Placement,
    check_placement,
    leader_racks_of,
    pinned_rack,
    repair_placement,
    resolve_placement,
)

PARTNERS = 8  # replicas of each preferred broker tried per replica to place, on a large cluster (a small one: all)
SMALL = 600  # replicas: a cluster this small tries every partner
PASSES = 3  # passes over a rule's replicas while one still places some (a swap can open the way for another)
TRIES = 20_000  # moves and swaps judged in all (a large cluster: the rest is noted, not searched)


def search_preferring(
    replicas: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
) -> tuple[Plan, GoalSearch | None]:
    """:func:`settle_and_search`, first with the soft ``prefer_tags`` rules required: that plan where it meets
    as many goals (in priority order) as the plan with them soft, which is then searched as well; the
    goals judged by the rules as they are. With the plan, the search that judged it (where one did), for
    :func:`soft_rules` to start from.

    Soft swaps after the goals reach only what one harmless swap can:
    where the goals sit at their thresholds, a replica onto its preferred
    broker needs others moved around it, which the goal search does when the
    preference is one of its rules (small clusters against the exact solver:
    drifted/9/36/5, 7 of 12 replicas off their preferred brokers, the solver
    0 with every threshold met).
    """
    required = _preferences_required(options)
    if required is None:
        return settle_and_search(replicas, partitions, view, resources, options), None
    strict = resolve_placement(required, partitions, view)
    assert strict is not None
    try:
        check_placement(strict, partitions, view)
    except PlanningError:  # too few preferred brokers for some partition: the preferences stay soft
        return settle_and_search(replicas, partitions, view, resources, options), None
    kept = [list(r) for r in replicas]
    repair_placement(kept, partitions, view, strict)
    preferring, _ = settle_and_search(kept, partitions, view, resources, required)
    judge = GoalSearch(preferring, partitions, view, resources, options)
    reached = judgement(judge)
    if all(_standing(reached)):
        return (preferring, reached), judge
    soft = settle_and_search(replicas, partitions, view, resources, options)
    return ((preferring, reached), judge) if _standing(reached) >= _standing(soft[1]) else (soft, None)


def _standing(reached: tuple[list[str], list[bool]]) -> list[bool]:
    """The goals a plan meets in priority order (lists of bools compare so): the replica and leader counts in
    their bands (as its notes say), then the load goals."""
    notes, met = reached
    counts = [not any(n.startswith(f"{what} count {NOT_MET}") for n in notes) for what in ("replicas", "leaders")]
    return [*counts, *met]


def _preferences_required(options: Constraints) -> Constraints | None:
    """``options`` with every soft ``prefer_tags`` rule (strength above 0.0, below 1.0, not frozen) at strength
    1.0, which makes it a requirement; None where there is none."""
    rules = tuple(
        replace(rule, prefer_strength=1.0)
        if rule.prefer_tags and 0 < rule.prefer_strength < 1 and not rule.frozen
        else rule
        for rule in options.placement
    )
    return None if rules == options.placement else replace(options, placement=rules)


def soft_rules(
    plan: Plan,
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
    search: GoalSearch | None = None,
) -> Plan:
    """The soft rules after the goals, which keep their rank: replicas onto their ``prefer_tags`` brokers
    (:func:`prefer_tagged`, then on a small cluster :func:`prefer_searched`), then into their
    ``leader_racks`` (:func:`into_leader_racks`, then on a small cluster :func:`leader_racks_searched`);
    the plan with a note per ``prefer_tags`` rule still short. ``search``: one built on the plan's replicas
    with ``options`` that has applied nothing, where the caller has it (a 10k cluster's costs ~15 ms)."""
    replicas, (notes, met) = plan
    if search is None or search.replicas is not replicas:
        search = GoalSearch(replicas, partitions, view, resources, options)
    placement = search.placement
    assert placement is not None
    prefer_tagged(search)
    if _away(replicas, placement):
        replicas, (notes, met) = prefer_searched((replicas, (notes, met)), partitions, view, resources, options)
        search = GoalSearch(replicas, partitions, view, resources, options)
    into_leader_racks(search)
    if _lacking_leader_racks(replicas, placement, view):
        replicas, (notes, met) = leader_racks_searched((replicas, (notes, met)), partitions, view, resources, options)
    return replicas, ([*notes, *_prefer_notes(replicas, placement)], met)


def prefer_tagged(search: GoalSearch) -> int:
    """Move or swap replicas onto their rules' preferred brokers where every goal accepts; in place. Returns
    the changes made."""
    placement = search.placement
    if placement is None or not placement.preferred:
        return 0
    made, tries = 0, 0
    partners = len(search.part) if len(search.part) <= SMALL else PARTNERS
    order = sorted(placement.preferred, key=lambda r: (-placement.rules[r].prefer_strength, r))
    for r in order:
        preferred = placement.preferred[r]
        slots = [s for s, b in enumerate(search.broker_ids) if b in preferred]
        mine = np.flatnonzero((placement.rule_of[search.part] == r) & ~placement.frozen[search.part])
        for _ in range(PASSES):
            placed = 0
            for row in mine.tolist():
                if search.broker_ids[int(search.slot[row])] in preferred or tries >= TRIES:
                    continue
                done, tried = _place_onto(search, row, slots, r, partners)
                placed, tries = placed + done, tries + tried
            made += placed
            if not placed:
                break
    return made


def _prefer_away(replicas: list[list[int]], placement: Placement) -> dict[int, tuple[int, int]]:
    """Per soft ``prefer_tags`` rule: how many of its replicas (frozen ones aside) sit off its preferred
    brokers, of how many."""
    out = {}
    for r, preferred in placement.preferred.items():
        mine = [replicas[i] for i in np.flatnonzero((placement.rule_of == r) & ~placement.frozen).tolist()]
        out[r] = (sum(b not in preferred for reps in mine for b in reps), sum(len(reps) for reps in mine))
    return out


def _away(replicas: list[list[int]], placement: Placement) -> int:
    """Replicas of the soft ``prefer_tags`` rules (frozen ones aside) on brokers without their tags."""
    return sum(away for away, _ in _prefer_away(replicas, placement).values())


def _prefer_notes(replicas: list[list[int]], placement: Placement) -> list[str]:
    """A note per soft ``prefer_tags`` rule still short, the strongest first."""
    rules, notes = placement.rules, []
    short = _prefer_away(replicas, placement).items()
    for r, (away, total) in sorted(short, key=lambda kv: (-rules[kv[0]].prefer_strength, kv[0])):
        if away:
            wanted = ", ".join(f"{k}={v}" for k, v in sorted(rules[r].prefer_tags.items()))
            notes.append(
                f'prefer_tags not met: {away} of {total} replicas of topics "{rules[r].topics}" sit on brokers '
                f"without {wanted} (strength {rules[r].prefer_strength:g}; no move or swap every goal accepts)"
            )
    return notes


def _lacking_leader_racks(replicas: list[list[int]], placement: Placement, view: ClusterView) -> int:
    """How many partitions of a ``leader_racks`` rule (frozen ones aside) have no replica in those racks."""
    racks = leader_racks_of(placement) or []
    return sum(r is not None and pinned_rack(replicas[i], r, view.domain_of) is None for i, r in enumerate(racks))


def _place_onto(
    search: GoalSearch,
    row: int,
    slots: list[int],
    rule: int,
    partners: int,
    harmless: bool = True,
    emptiest: int | None = None,
) -> tuple[int, int]:
    """One accepted move or swap of ``row`` onto one of ``slots`` (1, tries), else (0, tries); accepted: legal,
    and (``harmless``) no goal pushed up (:meth:`GoalSearch.harmless`).

    The brokers of its rack first (a replica changing racks keeps the
    rack rule only where its partition has none in the new one), the
    emptiest first (by replicas, or by goal ``emptiest``'s load); on each, the move alone (where the counts have room),
    then swaps with replicas of other rules, the same role first (leader
    counts stay), then those closest in size (the loads change least).
    """
    assert search.placement is not None
    here, lead = int(search.slot[row]), bool(search.lead[row])
    i, here_id = int(search.part[row]), search.broker_ids[here]
    size = search.row_amount[0][row]
    tries = 0
    fill = search.count if emptiest is None else search.load[emptiest]
    ranked = sorted(slots, key=lambda s: (search.rack_of[s] != search.rack_of[here], fill[s], s))
    for c in ranked:
        if search.broker_ids[c] in search.replicas[i] or not search.may_step(row, c):
            continue  # no move or swap could send it there (the racks, the topic rule): its partners go untried
        tries += 1
        alone = ((row, c, lead, True),)
        if search.legal(alone) and (not harmless or search.harmless(alone)):
            search.apply(alone)
            return 1, tries
        others = search.rows_on(c)
        parts = search.part[others]  # of another rule, and one the rules let onto ``here`` (or none are tried)
        keep = (search.placement.rule_of[parts] != rule) & search.placement.movable_to(parts, here_id)
        others = others[keep & ~_soft_kept(search, parts, c, here)]
        closest = np.lexsort((others, np.abs(search.row_amount[0][others] - size), search.lead[others] != lead))
        for other in others[closest[:partners]].tolist():
            tries += 1
            change = ((row, c, lead, True), (other, here, bool(search.lead[other]), True))
            if search.legal(change) and (not harmless or search.harmless(change)):
                search.apply(change)
                return 1, tries
    return 0, tries


def _soft_kept(search: GoalSearch, parts: np.ndarray, c: int, here: int) -> np.ndarray:
    """Per partition of ``parts`` (their replicas on broker slot ``c``): would its replica leaving ``c`` for
    ``here`` give up a soft rule it meets there (a preferred broker for one that is not, a leader rack for
    a rack outside them)?"""
    assert search.placement is not None
    placement, out = search.placement, np.zeros(len(parts), dtype=bool)
    c_id, here_id = search.broker_ids[c], search.broker_ids[here]
    c_rack, here_rack = search.racks[search.rack_of[c]], search.racks[search.rack_of[here]]
    for r in np.unique(placement.rule_of[parts]).tolist():
        rule = placement.rules[r] if r >= 0 else None
        preferred = placement.preferred.get(r, frozenset())
        gives_up = c_id in preferred and here_id not in preferred
        gives_up |= rule is not None and c_rack in rule.leader_racks and here_rack not in rule.leader_racks
        if gives_up:
            out |= placement.rule_of[parts] == r
    return out


def prefer_searched(
    plan: Plan, partitions: pd.DataFrame, view: ClusterView, resources: list[Resource], options: Constraints
) -> Plan:
    """Where ``prefer_tags`` replicas still sit off their preferred brokers once no harmless move or swap is
    left, on a small cluster: one replica at a time (the stronger rules first), a move or swap onto a
    preferred broker the rules allow (counts kept, loads not asked), then the goals searched again with
    every replica the soft rules place kept there (:attr:`GoalSearch.keep_soft`); kept where every goal the
    plan met is still met.

    As for the leader racks (:func:`leader_racks_searched`): the solver
    reaches the preferred brokers by moving other replicas around them.
    """
    if int(partitions["rf"].sum()) > SMALL:
        return plan
    search = GoalSearch(plan[0], partitions, view, resources, options)
    placement = search.placement
    assert placement is not None
    for r in sorted(placement.preferred, key=lambda r: (-placement.rules[r].prefer_strength, r)):
        preferred = placement.preferred[r]
        slots = [s for s, b in enumerate(search.broker_ids) if b in preferred]
        for i in np.flatnonzero((placement.rule_of == r) & ~placement.frozen).tolist():
            for b in [b for b in plan[0][i] if b not in preferred]:
                trial = [list(reps) for reps in plan[0]]
                moved = GoalSearch(trial, partitions, view, resources, options)
                row = next(row for row in moved.rows_of(i) if moved.broker_ids[int(moved.slot[row])] == b)
                if not _place_onto(moved, row, slots, r, len(moved.part), harmless=False)[0]:
                    continue
                again = reach_goals(trial, partitions, view, resources, options, keep_soft=True)
                if _standing(again) >= _standing(plan[1]) and _away(trial, placement) < _away(plan[0], placement):
                    plan = trial, again
    return plan


def leader_racks_searched(
    plan: Plan, partitions: pd.DataFrame, view: ClusterView, resources: list[Resource], options: Constraints
) -> Plan:
    """Where partitions of a ``leader_racks`` rule still have no replica in those racks once no harmless move
    or swap is left (:func:`into_leader_racks`), on a small cluster: each given one by a move or swap the
    rules allow (counts kept, loads not asked), then the goals searched again with those replicas kept in
    the racks; that plan where it meets as many goals in priority order.

    The exact solver places a replica in the leader racks for every
    partition with every threshold met where the harmless swaps leave
    some without (drifted, 10 brokers over 5 racks, 30 partitions: 1-4
    left); its way there moves other replicas around them, which is what
    the goal search does once they are placed and kept.
    """
    if int(partitions["rf"].sum()) > SMALL:
        return plan
    placement = resolve_placement(options, partitions, view)
    assert placement is not None
    away = _prefer_away(plan[0], placement)
    for i, racks in enumerate(leader_racks_of(placement) or []):  # one at a time: each kept where it may be
        if not racks or pinned_rack(plan[0][i], racks, view.domain_of) is not None:
            continue
        for emptiest in (None, *range(len(resources))):  # the brokers to fill first: by replicas, by each goal
            trial = [list(r) for r in plan[0]]
            if not into_leader_racks(GoalSearch(trial, partitions, view, resources, options), False, emptiest, i):
                continue
            again = reach_goals(trial, partitions, view, resources, options, keep_soft=True)
            prefer_tagged(GoalSearch(trial, partitions, view, resources, options))  # the search may have moved
            if any(now > away[r][0] for r, (now, _) in _prefer_away(trial, placement).items()):  # some off theirs
                continue  # a stronger soft rule gives way: not for this one
            lacking = _lacking_leader_racks(trial, placement, view)
            if _standing(again) >= _standing(plan[1]) and lacking < _lacking_leader_racks(plan[0], placement, view):
                plan = trial, again
                break
    return plan


def into_leader_racks(
    search: GoalSearch, harmless: bool = True, emptiest: int | None = None, only: int | None = None
) -> int:
    """For each partition of a rule with ``leader_racks`` that has no replica in any of them, one accepted move
    or swap of a replica into one (its leader first: it leads from there as it is; then a follower, which
    the planner's ``leader_racks`` pass makes the leader); in place. Returns how many partitions it placed.

    Redpanda pins leaders to racks; a partition with no replica in the
    pinned racks can only be led from there after a move. The move keeps
    the rack rule (the replica leaves a rack the partition then no longer
    uses for one it did not use) and is taken only where every goal
    accepts it (:meth:`GoalSearch.harmless`), as ``prefer_tags``' are.
    Without ``harmless``: any legal one (the brokers filled first ``emptiest``, see :func:`_place_onto`);
    ``only``: that partition alone.
    """
    placement = search.placement
    if placement is None:
        return 0
    placed, tries = 0, 0
    partners = len(search.part) if len(search.part) <= SMALL else PARTNERS
    for r, rule in enumerate(placement.rules):
        if not rule.leader_racks or rule.frozen:
            continue
        inside = [s for s in range(len(search.brokers)) if search.racks[search.rack_of[s]] in rule.leader_racks]
        for i in np.flatnonzero(placement.rule_of == r).tolist():
            rows = search.rows_of(i)
            racks = {search.racks[search.rack_of[int(search.slot[row])]] for row in rows}
            if tries >= TRIES or racks & set(rule.leader_racks) or only not in (None, i):
                continue
            for row in sorted(rows, key=lambda row: (not search.lead[row], row)):
                # partners of the same rule stay: one may be its partition's only replica in the racks
                done, tried = _place_onto(search, row, inside, r, partners, harmless, emptiest)
                tries += tried
                if done:
                    placed += 1
                    break
    return placed
