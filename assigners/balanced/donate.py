"""Which replicas the old brokers give when a cluster gains empty brokers (``balanced``'s scale-out plan).

Cruise Control's ``add_broker`` moves replicas only onto the added brokers. Here each old broker gives as many
replicas as its count is above its share, chosen so that its load lands near the mean (the closest-sum run of
its replicas sorted by load), and each goes onto the least loaded new broker the rack rule and the caps allow.
Pure: lists and numpy in, lists out.
"""

from __future__ import annotations

import math

import numpy as np

from assigners.balanced.state import Resource
from assigners.model import ClusterView
from assigners.placement import Usage, may_replace_with


def donation_amounts(resources: list[Resource]) -> list[tuple[int | None, tuple[np.ndarray, np.ndarray]]]:
    """What a replica weighs, as leader and as follower, when choosing donations, in the order tried: every
    resource's share of its total, summed (goal None); then each goal's resource alone."""
    scaled = [
        (k, (r.leader / total, r.follower / total))
        for k, r in enumerate(resources)
        if (total := float(r.leader.sum() + r.follower.sum())) > 0
    ]
    if not scaled:
        return []
    blended = (sum(a[0] for _, a in scaled), sum(a[1] for _, a in scaled))
    return [(None, blended), *scaled]  # type: ignore[list-item]


def donate(
    live: list[list[int]],
    view: ClusterView,
    new: frozenset[int],
    amounts: tuple[np.ndarray, np.ndarray],
    capacities: np.ndarray,
    usage: Usage,
) -> list[list[int]] | None:
    """Replica counts evened by moves from old brokers onto new ones only, choosing which replicas each
    old broker gives so that its load lands near the mean: of its replicas sorted by amount, the run of as
    many as it must give whose sum is closest to its excess. Largest first, each onto the least loaded new
    broker the rack rule and the caps allow. None when a count cannot reach its band that way.

    ``amounts`` (as leader, as follower) only pick donations; loads are per unit of ``capacities``."""
    weight = {b: view.weight_of[b] for b in view.eligible}
    total = sum(usage.count[b] for b in view.eligible)
    all_weight = sum(weight.values())
    share = {b: total * weight[b] / all_weight for b in view.eligible}
    take = {b: math.floor(share[b]) - usage.count[b] for b in sorted(new)}
    give = {b: usage.count[b] - math.ceil(share[b]) for b in view.eligible if b not in new}
    if _racks_fall_short(live, view, give, take):
        return None
    lead, follow = amounts
    replicas = [list(r) for r in live]
    capacity = dict(zip(view.eligible, capacities.tolist()))
    held: dict[int, list[tuple[float, int]]] = {b: [] for b in view.eligible}
    for i, reps in enumerate(replicas):
        for pos, b in enumerate(reps):
            if b in held:
                held[b].append((float(lead[i] if pos == 0 else follow[i]), i))
    load = {b: sum(a for a, _ in mine) for b, mine in held.items()}
    mean = sum(load.values()) / sum(capacity.values())
    givers = sorted(give, key=lambda b: (-load[b] / capacity[b], b))
    for old in givers:
        if give[old] <= 0:
            continue
        mine = sorted(held[old])
        prefix = np.concatenate([[0.0], np.cumsum([a for a, _ in mine])])
        runs = prefix[give[old] :] - prefix[: -give[old]]  # the sum of every run of as many consecutive replicas
        start = int(np.argmin(np.abs(runs - (load[old] - mean * capacity[old]))))
        for amount, i in sorted(mine[start : start + give[old]], key=lambda m: (-m[0], m[1])):
            open_to = may_replace_with(replicas[i], old, [b for b in take if take[b] > 0], view)
            legal = [b for b in open_to if usage.room_for(i, b)]
            if not legal:
                return None
            to = min(legal, key=lambda b: (load[b] / capacity[b], b))
            replicas[i][replicas[i].index(old)] = to
            usage.remove(i, old)
            usage.add(i, to)
            take[to] -= 1
            load[to] += amount
    return replicas


def _racks_fall_short(live: list[list[int]], view: ClusterView, give: dict[int, int], take: dict[int, int]) -> bool:
    """Where every partition has a replica in every rack (the rack rule pins them), a donation stays in its rack:
    does some rack's old brokers have more to give than its new brokers may take? Then :func:`donate` fails, as
    it would after thousands of donations (RF 3 over racks of 17, 17 and 16 brokers: the shares are the
    cluster's, which the smallest rack's brokers cannot come down to; 40 ms at 10k partitions)."""
    if not view.pins_racks(np.fromiter(map(len, live), dtype=np.int64, count=len(live))):
        return False
    short: dict[str, int] = {}
    for b, n in give.items():
        short[view.domain_of[b]] = short.get(view.domain_of[b], 0) + max(n, 0)
    for b, n in take.items():
        short[view.domain_of[b]] = short.get(view.domain_of[b], 0) - max(n, 0)
    return any(n > 0 for n in short.values())
