"""Shedding: a broker far above a goal's threshold trades many replicas in one pass, without a round for each.

A broker holding a partition several times the size of the rest must
trade most of its other replicas for the lightest ones elsewhere (the
10k bench cluster's rank-Zipf rates: the hottest partition is 2.5 times a
broker's fair share, and its three brokers need about 110 swaps each). A
round of :func:`assigners.balanced.goals.improve` lists some thirty
options for the top broker and applies three or four of them, so those
brokers took 124 rounds, 105 ms of a 220 ms plan. Shedding walks the
broker's replicas heaviest first and swaps each for the lightest replica of
its role on one of the least loaded brokers (or on a broker it was moved
away from, which saves a move), checking each swap as a round does (legal,
accepted by the earlier goals, the partner kept under the threshold), the
fewest moves first. It is kafka-kit topicmappr's storage rebalance ("relocate
data from the most to least utilized brokers"), one swap at a time so the
replica counts stay where the count balancing put them.

It stops while the broker is still :data:`ENDGAME` times the best swap's
gain above the threshold: the last few actions are the rounds', which
choose the cheapest one that fixes the broker. Shedding to the end made a
rule-bound cluster churn (seed 12 with five placement rules: 8,000 swaps
of tiny gain, two goals missed, 11 s); at 4, over six seeds of the bench
cluster, no goal is lost and moves change by -3 % to +0.7 % (with five
placement rules, up to +1.6 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assigners.balanced.actions import movable, open_to
from assigners.balanced.state import GoalSearch

PARTNERS = 10  # least loaded brokers whose lightest replicas the shed trades for
POOL = 40  # lightest replicas per partner and role looked at
ENDGAME = 4  # shed while the broker stays this many times its best swap's gain above the threshold


def worth_shedding(search: GoalSearch, k: int, top: int) -> bool:
    """Is broker ``top`` at least :data:`ENDGAME` of its heaviest replicas above goal ``k``'s threshold, counting
    only replicas the least loaded broker open to them has room for, and could it get under it by trading the
    rest for the cluster's lightest replicas?

    A round's worth of work per action is left to the rounds: on a goal the
    racks put out of reach (the threshold is only a floor there), wherever
    the excess is a few replicas' worth (uneven racks at 10k: every round
    asked, none shed, 0.9 -> 1.4 s), and where the broker could not reach the
    threshold holding the lightest replicas there are (a partition 2.5 times
    a broker's share among others of a size: shedding there only spent
    moves, 688 -> 1,108 for a disk ratio of 1.213 -> 1.181). The least
    loaded broker is one the rules let ``top``'s replicas onto: two tainted
    brokers, empty, took every replica into their room, so each check saw
    its endgame and no shed ran (the bench cluster with the taints alone:
    174 rounds, 890 ms against 345 without them on a slow day; 473 ms
    once they are passed over).
    """
    if search.forced(k):
        return False
    load, cap, target = search.load[k], search.capacity[k], search.target(k)
    excess = (float(load[top]) - target) * float(cap[top])
    rows = search.rows_on(top)
    open_brokers = open_to(search, movable(search, rows).tolist(), np.argsort(load, kind="stable"), top, 1)
    if not open_brokers:
        return False
    low = open_brokers[0]
    room = (target - float(load[low])) * float(cap[low])
    amounts = search.amount(k, rows)
    fits = amounts <= room
    if not fits.any() or float(amounts[fits].max()) * ENDGAME >= excess:
        return False
    lightest = _lightest_sums(search, k)
    floor = float(amounts[~fits].sum()) + float(lightest[min(int(fits.sum()), len(lightest) - 1)])
    return floor <= target * float(cap[top])


def _lightest_sums(search: GoalSearch, k: int) -> np.ndarray:
    """The sums of goal ``k``'s ``n`` lightest replica amounts in the cluster, for each ``n`` (from 0); built
    once per search: a floor, which a leadership changing hands since only shifts a little."""
    sums = search.lightest_sums.get(k)
    if sums is None:
        sums = search.lightest_sums[k] = np.concatenate(([0.0], np.cumsum(np.sort(search.row_amount[k]))))
    return sums


def shed(search: GoalSearch, k: int, top: int) -> int:
    """Swap broker ``top``'s replicas, heaviest first, for lighter ones of the same role on the least loaded
    brokers, while it stays :data:`ENDGAME` swaps' gain above goal ``k``'s threshold; how many were applied."""
    load, cap = search.load[k], search.capacity[k]
    limit = search.target(k) * (1 + 1e-9)
    mine = movable(search, search.rows_on(top))
    amounts = search.amount(k, mine)
    order = np.argsort(-amounts, kind="stable")
    mine, amounts = mine[order], amounts[order]
    by_load = np.argsort(load, kind="stable")
    partners = [c for c in open_to(search, mine[:POOL].tolist(), by_load, top, PARTNERS) if load[c] < limit]
    pools = _Pools(search, k, top)
    applied = 0
    # per role and partners, the lightest replica their pools offer: until the next swap changes the pools, a
    # replica no heavier gets no offer from them (a 6-broker 10k cluster's top walks ~5,000 replicas a shed,
    # most lighter than anything offered: the 1M fleet's cluster-10 listed ~17k empty offers, a quarter of
    # its plan; now 25, the plan the same)
    floors: dict[tuple[bool, tuple[int, ...]], float] = {}
    for r, mine_amount in zip(mine.tolist(), amounts.tolist()):
        excess = (float(load[top]) - search.target(k)) * float(cap[top])
        if excess <= 0:
            break
        if search.part_of[r] in pools.touched:
            continue
        its_partners = _partners_of(search, r, top, partners)
        key = (bool(search.lead[r]), tuple(its_partners))
        if mine_amount <= floors.get(key, -np.inf):
            continue
        offers = _offers(search, k, r, mine_amount, its_partners, pools, limit)
        if not offers:
            floors[key] = pools.floor(its_partners, key[0])
        gain = _best_gain(search, r, offers)
        if gain is None:
            continue
        if gain * ENDGAME >= excess:
            break  # the endgame: the rounds take the cheapest action that fixes top
        change = _cheapest(search, k, r, top, offers)
        if change is not None:
            search.apply(change)
            pools.touched.update((search.part_of[r], search.part_of[change[1][0]]))
            floors.clear()
            applied += 1
    return applied


@dataclass
class _Pool:
    """Replica rows of one partner and role with their amounts, lightest first, and how far they are used up."""

    rows: list[int]
    amounts: list[float]
    at: int = 0


class _Pools:
    """Per partner broker and role, the replicas ``top`` may take in a swap, lightest first, read lazily: the
    lightest of all (:meth:`lightest`), and those the plan moved away from ``top`` (:meth:`homeward`: a swap
    sending one back undoes a move). ``touched``: the partitions this shed has swapped, never offered again."""

    def __init__(self, search: GoalSearch, k: int, top: int) -> None:
        self.search, self.k, self.top = search, k, top
        self.touched: set[int] = set()
        self._light: dict[tuple[int, bool], _Pool] = {}
        self._home: dict[tuple[int, bool], _Pool] = {}
        away = search.moved_from(top)
        away = away[search.slot[away] != top]
        away_amounts = search.row_amount[k][away]
        order = np.lexsort((away, away_amounts))
        for row, amount in zip(away[order].tolist(), away_amounts[order].tolist()):
            pool = self._home.setdefault((int(search.slot[row]), bool(search.lead[row])), _Pool([], []))
            pool.rows.append(row)
            pool.amounts.append(amount)

    def lightest(self, c: int, role: bool) -> tuple[float, int] | None:
        pool = self._light.get((c, role))
        if pool is None:
            rows, amounts = self.search.by_role(self.k, c)[int(role)]
            pool = self._light[c, role] = _Pool(rows[:POOL].tolist(), amounts[:POOL].tolist())
        return self._first(pool, c)

    def floor(self, partners: list[int], role: bool) -> float:
        """The lightest replica of ``role`` these partners' pools offer now (inf: none): what :func:`_offers`
        reads, so asking it changes nothing."""
        firsts = (offer for c in partners for offer in (self.lightest(c, role), self.homeward(c, role)))
        return min((offer[0] for offer in firsts if offer is not None), default=np.inf)

    def homeward(self, c: int, role: bool) -> tuple[float, int] | None:
        pool = self._home.get((c, role))
        return None if pool is None else self._first(pool, c)

    def _first(self, pool: _Pool, c: int) -> tuple[float, int] | None:
        """The pool's first replica still on ``c``, untouched, that may step onto ``top``; the pool skips the
        others for good (what rules a step out stays so while a shed runs: only its own swaps change)."""
        search, part_of, rows = self.search, self.search.part_of, pool.rows
        while pool.at < len(rows):
            row = rows[pool.at]
            if part_of[row] not in self.touched and search.slot[row] == c and search.may_step(row, self.top):
                return pool.amounts[pool.at], row
            pool.at += 1
        return None


def _partners_of(search: GoalSearch, r: int, top: int, partners: list[int]) -> list[int]:
    """``partners``, and for a replica the plan moved onto ``top`` its live brokers under the threshold too
    (sending it home saves a move; :func:`_offers` keeps only those with room)."""
    if not search.moved_in[r]:
        return partners
    i = search.part_of[r]
    homes = (search.slot_of(b) for b in sorted(search.live[i] - set(search.replicas[i])))
    extra = [c for c in homes if c is not None and c != top and c not in partners]
    return partners + extra if extra else partners


def _offers(
    search: GoalSearch, k: int, r: int, amount: float, partners: list[int], pools: _Pools, limit: float
) -> list[tuple[float, int, int]]:
    """(gain, partner, its row) of the swaps for ``r`` worth checking, largest gain first (ties in partner
    order): per partner its lightest replica of ``r``'s role and the lightest sent back home, where the
    partner stays under the threshold after. Whether ``r`` may step onto the partner is left to
    :func:`_best_gain` and :func:`_cheapest`, which ask it of the few they reach (asked of every partner, it
    cost a fifth of a shed)."""
    load, cap, role = search.load[k], search.capacity[k], bool(search.lead[r])
    offers = []
    for c in partners:
        c_load, c_cap = float(load[c]), float(cap[c])
        offers += [
            (amount - offer[0], c, offer[1])
            for offer in (pools.lightest(c, role), pools.homeward(c, role))
            if offer is not None and amount - offer[0] > 0 and c_load + (amount - offer[0]) / c_cap <= limit
        ]
    return sorted(offers, key=lambda offer: -offer[0])


def _best_gain(search: GoalSearch, r: int, offers: list[tuple[float, int, int]]) -> float | None:
    """The largest gain of ``offers`` (:func:`_offers`: largest first) onto a partner ``r`` may step onto (None:
    there is none)."""
    for gain, c, _ in offers:
        if search.may_step(r, c):
            return gain
    return None


def _cheapest(
    search: GoalSearch, k: int, r: int, top: int, offers: list[tuple[float, int, int]]
) -> tuple[tuple[int, int, bool, bool], ...] | None:
    """Of ``offers`` (:func:`_offers`: largest gain first), the legal swap the earlier goals accept that adds the
    fewest moves, then moves the fewest bytes per unit of gain (as a round ranks the options that do not fix
    its broker); None: none is. An offer onto a partner ``r`` may not step onto is ranked, never taken
    (legal() refuses it), and ranks the others as before: ``at`` keeps their order."""
    role = bool(search.lead[r])
    ranked = []
    for at, (gain, c, s) in enumerate(offers):
        there, back = search.cost(r, c), search.cost(s, top)
        ranked.append((there[0] + back[0], (there[1] + back[1]) / gain, at, c, s))
    # ranked first, the rules checked down the ranking: the first that passes is the cheapest that does (a
    # shed's swaps nearly all pass, and checking each of ~6 offers cost a third of the shed)
    for _, _, _, c, s in sorted(ranked):
        change = ((r, c, role, True), (s, top, role, True))
        if search.legal(change) and search.accepted_after(k, change) is not None:
            return change
    return None
