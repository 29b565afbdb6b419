"""Soft placement preferences (``prefer_tags`` below strength 1.0): swaps onto preferred brokers that every
goal accepts.

LaminarDB's affinity hints carry a strength from 0.0 (ignore) to 1.0 (must);
here 1.0 makes ``prefer_tags`` a requirement (:mod:`assigners.policies`), and
below it the rules are tried in order of strength: a replica of a preferring
topic on a broker without the tags is swapped, same role, with a replica on a
broker of its rack that carries them (so the rack rule holds) whose topic
does not prefer that broker (each keeps its role), where :meth:`GoalSearch.harmless` accepts the
swap (no goal pushed above its threshold or its peak, counts in their bands,
every rule kept). Each swap costs two moves, so this runs after the goals,
which keep their rank.
"""

from __future__ import annotations

import numpy as np

from assigners.balanced.state import GoalSearch

PARTNERS = 8  # replicas of each preferred broker tried per replica to place
TRIES = 20_000  # swaps judged in all (a large cluster: the rest is noted, not searched)


def prefer_tagged(search: GoalSearch) -> tuple[int, list[str]]:
    """Swap replicas onto their rules' preferred brokers where every goal accepts; in place. Returns the swaps
    made and a note per rule still short (how many of its replicas sit elsewhere)."""
    placement = search.placement
    if placement is None or not placement.preferred:
        return 0, []
    swaps, tries, notes = 0, 0, []
    order = sorted(placement.preferred, key=lambda r: (-placement.rules[r].prefer_strength, r))
    for r in order:
        preferred = placement.preferred[r]
        slots = [s for s, b in enumerate(search.broker_ids) if b in preferred]
        mine = np.flatnonzero((placement.rule_of[search.part] == r) & ~placement.frozen[search.part])
        for row in mine.tolist():
            if search.broker_ids[int(search.slot[row])] in preferred or tries >= TRIES:
                continue
            made, tried = _swap_onto(search, row, slots, r)
            swaps, tries = swaps + made, tries + tried
        away = int(sum(search.broker_ids[int(search.slot[row])] not in preferred for row in mine.tolist()))
        if away:
            rule = placement.rules[r]
            wanted = ", ".join(f"{k}={v}" for k, v in sorted(rule.prefer_tags.items()))
            notes.append(
                f'prefer_tags not met: {away} of {len(mine)} replicas of topics "{rule.topics}" sit on brokers '
                f"without {wanted} (strength {rule.prefer_strength:g}; no swap every goal accepts)"
            )
    return swaps, notes


def _swap_onto(search: GoalSearch, row: int, slots: list[int], rule: int) -> tuple[int, int]:
    """One accepted swap of ``row`` onto a preferred broker of its rack (1, tries), else (0, tries)."""
    assert search.placement is not None
    here, lead = int(search.slot[row]), bool(search.lead[row])
    i, here_id = int(search.part[row]), search.broker_ids[here]
    tries = 0
    for c in sorted((s for s in slots if search.rack_of[s] == search.rack_of[here]), key=lambda s: search.count[s]):
        if search.broker_ids[c] in search.replicas[i] or not search.may_step(row, c):
            continue  # no swap could send it there (the racks, the topic rule): its partners go untried
        others = search.rows_on(c)
        parts = search.part[others]  # of another rule, and one the rules let onto ``here`` (or none are tried)
        others = others[(search.placement.rule_of[parts] != rule) & search.placement.movable_to(parts, here_id)]
        # the same role first (leader counts stay), then the other (harmless keeps them in their bands)
        others = others[np.argsort(search.lead[others] != lead, kind="stable")]
        for other in others[:PARTNERS].tolist():
            tries += 1
            change = ((row, c, lead, True), (other, here, bool(search.lead[other]), True))
            if search.legal(change) and search.harmless(change):
                search.apply(change)
                return 1, tries
    return 0, tries
