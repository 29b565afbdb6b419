"""The actions of a goal search, listed as options with their cost (Cruise Control's ``ActionType``).

Leadership transfer (alone, paired, or passed along three brokers: no data
moves), single replica move, and replica swap between two brokers (counts
unchanged). An option's key ranks it: first whether it brings the broker
under the goal's threshold, then the replica moves it adds against the live
layout (sending a moved replica back home saves one), then the bytes it
moves (per unit of gain when it does not fix the goal). Options are scored
on the goal's loads alone, in bulk; :mod:`assigners.balanced.goals` checks
the rules down the sorted list.
"""

from __future__ import annotations

import itertools

import numpy as np

from assigners.balanced.state import Change, GoalSearch
from assigners.model import argsort_small

# An action with its sort key: (not fixing the goal, replica moves it adds (negative: it undoes some),
# bytes moved (per gain when not fixing), kind, tie-break)
Option = tuple[float, int, float, int, int, Change]
# A partner broker of one round: its slot; per role (follower, leader) its replica rows and their amounts of the
# goal, ascending by amount (then row); per role, those the plan moved away from the round's top broker
# (swapping one back undoes a move) in row order, with their amounts, as lists (a few each, filtered per
# replica of top); per row asked about, the row's step onto the top broker as a swap's return (its
# amount and cost; None: a rule forbids it); and per role, whether the counts let one of top's replicas
# move there (asked of every replica the round tries, the same answer for each: the counts hold still
# while a round lists its options)
Pairs = tuple[np.ndarray, np.ndarray]
Returns = dict[int, tuple[float, tuple[int, int]] | None]
Held = tuple[int, tuple[Pairs, ...], tuple[tuple[list[int], list[float]], ...], Returns, dict[bool, bool]]

CANDIDATES = 5  # replicas of the top broker tried per round: the heaviest, then the lightest that could fix it


class LedHere:
    """For one round on broker ``top`` and goal ``k``: which partitions ``top`` holds, and per broker the
    replicas it leads, with the amount each passes on with its leadership (all of them, and those of
    partitions ``top`` holds: the ones a leadership pair or cycle can hand back to ``top``). Built once per
    broker a round asks for (it asks for the same few many times)."""

    def __init__(self, search: GoalSearch, top: int, k: int) -> None:
        self.search, self.top, self.k = search, top, k
        self._mine = search.rows_on(top)
        self._mine_parts = search.part[self._mine]  # ascending: a partition's rows are contiguous
        self.holds = np.zeros(len(search.first_row) - 1, dtype=bool)  # per partition
        self.holds[self._mine_parts] = True
        self._here: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._span: dict[int, tuple[float, float] | None] = {}
        self._away: tuple[np.ndarray, np.ndarray, list[int]] | None = None

    def moved_away(self, c: int) -> tuple[Pairs, ...]:
        """Per role (follower, leader), the rows the plan moved away from ``top`` that sit on broker slot
        ``c`` and whose partition ``top`` no longer holds, in row order, with their amounts of goal ``k``
        (a swap sending one back undoes a move). Grouped by slot once per round: each partner then takes
        its slice (filtering the rows per partner cost a round more than listing its swaps)."""
        if self._away is None:
            search = self.search
            away = search.moved_from(self.top)
            away = away[~self.holds[search.part[away]]]
            key = search.slot[away] * 2 + search.lead[away]  # by slot, then role
            order = argsort_small(key)  # stable: each slot's rows of a role in row order
            ends = np.searchsorted(key[order], np.arange(2 * len(search.brokers) + 1)).tolist()
            self._away = (away[order], search.amount(self.k, away[order]), ends)
        rows, amounts, ends = self._away
        return tuple((rows[ends[at] : ends[at + 1]], amounts[ends[at] : ends[at + 1]]) for at in (2 * c, 2 * c + 1))

    def leads(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows broker slot ``c`` leads, in row order, and the amount of goal ``k`` each passes on."""
        return self.search.led_by(self.k, c)

    def on(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`leads` of broker slot ``c`` of the partitions ``top`` holds (a follower on ``top``), with each
        one's row on ``top`` (the row a pair or cycle hands the leadership back to)."""
        if c not in self._here:
            search = self.search
            rows, passed = self.leads(c)
            parts = search.part[rows]
            here = self.holds[parts]
            self._here[c] = rows[here], passed[here], self._mine[self._mine_parts.searchsorted(parts[here])]
        return self._here[c]

    def span(self, c: int) -> tuple[float, float] | None:
        """The least and the most amount one of :meth:`on`'s rows passes on (None: there are none)."""
        if c not in self._span:
            back = self.on(c)[1]
            self._span[c] = (float(back.min()), float(back.max())) if len(back) else None
        return self._span[c]


def lowest(values: np.ndarray, k: int) -> list[int]:
    """Indexes of the ``k`` lowest values, lowest first, ties in index order: a stable argsort's first ``k``
    without sorting the whole array (a partner broker holds tens of thousands of replicas)."""
    if len(values) > 4 * k:
        near = np.flatnonzero(values <= np.partition(values, k - 1)[k - 1])
        order = near[np.argsort(values[near], kind="stable")]
    else:  # short: sorting it all is as cheap
        order = np.argsort(values, kind="stable")
    picked: list[int] = order[:k].tolist()
    return picked


def option_key(
    search: GoalSearch, k: int, top: int, c: int, new_top: float, new_c: float, cost: tuple[int, int] = (0, 0)
) -> tuple[float, int, float] | None:
    """(not fixing, moves added, bytes) of an option leaving ``top`` at ``new_top`` and ``c`` at ``new_c``,
    given its ``cost`` (moves added, bytes moved); None: no gain."""
    peak, new_peak = float(search.load[k][top]), max(new_top, new_c)
    if new_peak >= peak * (1 - 1e-9):
        return None
    moves, moved = cost
    fixes = new_peak <= search.target(k) * (1 + 1e-9)
    return (0.0, moves, float(moved)) if fixes else (1.0, moves, moved / (peak - new_peak))


def transfers(search: GoalSearch, k: int, r: int, top: int, led_here: LedHere) -> list[Option]:
    """Leadership of ``r``'s partition from ``top`` to one of its followers, alone (kind 0) or
    paired with a partition led there that ``top`` follows (kind 0 too: leader counts stay, no data moves).
    """
    if not search.lead[r]:
        return []
    i, out = int(search.part[r]), list[Option]()
    load, cap = search.load[k], search.capacity[k]
    delta = search.as_leader[k][i] - search.as_follower[k][i]
    if delta <= 0:
        return []
    floor = float(load[top]) * (1 - 1e-9)  # as option_key has it
    for row in range(int(search.first_row[i]), int(search.first_row[i + 1])):
        c = int(search.slot[row])
        if row == r:
            continue
        key = option_key(search, k, top, c, load[top] - delta / cap[top], load[c] + delta / cap[c])
        if key is not None:
            out.append((*key, 0, row, ((r, top, False, False), (row, c, True, False))))
        span = led_here.span(c)
        # every pair's peak is at least this (rounding is monotone): where that gains nothing, none can
        if span is None or max(load[top] - (delta - span[0]) / cap[top], load[c] + (delta - span[1]) / cap[c]) >= floor:
            continue
        led, back, tops = led_here.on(c)
        fewer = back < delta
        led, back, tops = led[fewer], back[fewer], tops[fewer]
        if not len(led):
            continue
        new_top, new_c = load[top] - (delta - back) / cap[top], load[c] + (delta - back) / cap[c]
        for n in lowest(np.maximum(new_top, new_c), CANDIDATES):
            j_lead = int(led[n])
            key = option_key(search, k, top, c, float(new_top[n]), float(new_c[n]))
            if key is not None:
                j_top = int(tops[n])
                steps = (
                    (r, top, False, False),
                    (row, c, True, False),
                    (j_lead, c, False, False),
                    (j_top, top, True, False),
                )
                out.append((*key, 0, j_lead, steps))
    return out


def transfer_chains(search: GoalSearch, k: int, r: int, top: int, led_here: LedHere) -> list[Option]:
    """Leadership passed along ``top`` -> c -> d (kind 0): ``r``'s partition to its follower c, one
    that c leads to its follower d, and, closing the cycle, one that d leads back to ``top``.

    The path leaves c's leader count as it was, the cycle every count:
    where the leader counts sit at their band, these reach loads that a
    single transfer or a pair cannot without moving data.
    """
    i = int(search.part[r])
    delta = search.as_leader[k][i] - search.as_follower[k][i]
    if not search.lead[r] or delta <= 0:
        return []
    load, cap, out = search.load[k], search.capacity[k], list[Option]()
    floor = float(load[top]) * (1 - 1e-9)  # as option_key has it: an option must end every broker below
    for row in search.rows_of(i):
        c = int(search.slot[row])
        if row == r:
            continue
        led, passed = led_here.leads(c)  # none of partition i: top leads it
        for n in lowest(np.abs(delta - passed), CANDIDATES):
            j_c, j_passed = int(led[n]), float(passed[n])
            new_top, new_c = load[top] - delta / cap[top], load[c] + (delta - j_passed) / cap[c]
            if new_c >= floor:
                continue  # c ends no lower than top is now: neither the path nor any cycle through it gains
            j = int(search.part[j_c])
            for j_d in search.rows_of(j):
                d = int(search.slot[j_d])
                if d in (top, c):
                    continue
                new_d = load[d] + j_passed / cap[d]
                path = ((r, top, False, False), (row, c, True, False), (j_c, c, False, False), (j_d, d, True, False))
                if (key := option_key(search, k, top, c, new_top, max(new_c, new_d))) is not None:
                    out.append((*key, 0, j_d, path))
                out += close_cycle(search, k, top, d, led_here, path, (new_top, new_c, new_d), floor)
    return out


def close_cycle(
    search: GoalSearch,
    k: int,
    top: int,
    d: int,
    led_here: LedHere,
    path: Change,
    loads: tuple[float, float, float],
    floor: float,
) -> list[Option]:
    """The two partitions ``d`` leads and ``top`` follows whose leadership handed back to ``top`` after ``path``
    leaves the lowest peak (neither is one of the path's: ``top`` leads the first, c the second); ``floor``: the
    peak an option must end below (as :func:`option_key` has it)."""
    cap = search.capacity[k]
    new_top, new_c, new_d = loads
    span = led_here.span(d)
    if span is None:
        return []
    # every cycle's peak is at least this (rounding is monotone): where that gains nothing, none can
    least = max(new_c, new_top + span[0] / cap[top], new_d - span[1] / cap[d])
    if least >= floor:
        return []
    led, back, tops = led_here.on(d)
    peaks = np.maximum(new_top + back / cap[top], new_d - back / cap[d])
    fixed, out = search.target(k) * (1 + 1e-9), list[Option]()
    for n in _two_lowest(peaks):
        # option_key, inline (no move, no byte: only whether it fixes the goal ranks it)
        new_peak = max(float(new_top + back[n] / cap[top]), new_c, float(new_d - back[n] / cap[d]))
        if new_peak < floor:
            l_d = int(led[n])
            steps = (*path, (l_d, d, False, False), (int(tops[n]), top, True, False))
            out.append((0.0 if new_peak <= fixed else 1.0, 0, 0.0, 0, l_d, steps))
    return out


def _two_lowest(values: np.ndarray) -> list[int]:
    """:func:`lowest` of ``values`` for two, from two scans (the first scan's pick is overwritten: ``values`` is
    scratch). Where the least value is tied, ``argmin`` gives the first index, as a stable sort does."""
    if len(values) < 2:
        return list(range(len(values)))
    first = int(values.argmin())
    values[first] = np.inf
    return [first, int(values.argmin())]


def moves_and_swaps(search: GoalSearch, k: int, r: int, top: int, held: list[Held], free: bool = False) -> list[Option]:
    """Replica ``r`` (on ``top``) to a partner broker (kind 1), or for a lighter one of the same role there (kind 2).
    ``free``: only those adding no replica move (a free round drops the others): a swap whose two steps add
    a move in all is passed over before its rules are asked.
    """
    lead, mine, amount = bool(search.lead[r]), float(search.row_amount[k][r]), search.row_amount[k]
    out = list[Option]()
    # plain floats: the same arithmetic as numpy's scalars, at a fraction of their cost per operation
    top_load, top_cap = float(search.load[k][top]), search.capacity[k][top]
    floor, fixed = top_load * (1 - 1e-9), search.target(k) * (1 + 1e-9)  # as option_key has them
    for c, by_role, from_top, returns, allowed in held:
        if not search.may_step(r, c):
            continue  # the move and every swap sending r to c would break a rule: never listed
        there = search.cost(r, c)
        c_load, c_cap = float(search.load[k][c]), search.capacity[k][c]
        if not free or there[0] <= 0:
            out += _move(search, k, r, top, c, allowed, there)
        back_rows, back_amounts = from_top[int(lead)]
        homeward = [row for row, back in zip(back_rows, back_amounts) if back < mine][:CANDIDATES]
        if free and there[0] > 0 and not homeward:
            # r leaving its live broker adds a move: a free swap must send home one of the replicas the plan
            # moved from top to c (the only rows whose step onto top saves one), and c holds none lighter
            continue
        rows, amounts = by_role[int(lead)]
        lighter = int(amounts.searchsorted(mine, "left"))  # ascending: the same role's lighter ones
        rows, amounts, lighter = _onto(search, rows, amounts, lighter, top)
        if not lighter:
            continue
        best = _lowest_peaks(rows, amounts, lighter, mine, (top_load, top_cap, c_load, c_cap))
        for s_row in dict.fromkeys([*best, *homeward]) if homeward else best:
            if free and there[0] + search.cost(s_row, top)[0] > 0:
                continue
            if s_row not in returns:  # the same few return steps serve every replica of top a round tries
                legal = search.may_step(s_row, top)
                returns[s_row] = (float(amount[s_row]), search.cost(s_row, top)) if legal else None
            if (step := returns[s_row]) is None:
                continue
            # option_key, inline: the round's most frequent option
            delta, back = mine - step[0], step[1]
            new_peak = max(top_load - delta / top_cap, c_load + delta / c_cap)
            if new_peak >= floor:
                continue
            moves, moved = there[0] + back[0], there[1] + back[1]
            swap = ((r, c, lead, True), (s_row, top, lead, True))
            if new_peak <= fixed:
                out.append((0.0, moves, float(moved), 2, s_row, swap))
            else:
                out.append((1.0, moves, moved / (top_load - new_peak), 2, s_row, swap))
    return out


def _move(
    search: GoalSearch, k: int, r: int, top: int, c: int, allowed: dict[bool, bool], there: tuple[int, int]
) -> list[Option]:
    """Replica ``r`` moved from ``top`` to ``c`` (kind 1), where the counts allow it (``allowed``: per role, asked
    once per partner and round), and it lowers the peak; ``there``: its cost."""
    lead = bool(search.lead[r])
    if lead not in allowed:
        allowed[lead] = search.counts_allow_move(r, c, lead)
    if not allowed[lead]:  # seldom, once the counts are even
        return []
    load, cap, mine = search.load[k], search.capacity[k], float(search.row_amount[k][r])
    key = option_key(search, k, top, c, float(load[top]) - mine / cap[top], float(load[c]) + mine / cap[c], there)
    return [] if key is None else [(*key, 1, c, ((r, c, lead, True),))]


def _onto(
    search: GoalSearch, rows: np.ndarray, amounts: np.ndarray, lighter: int, top: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Of the first ``lighter`` of ``rows`` (with their ``amounts``), those the placement rules let onto broker
    slot ``top``, and how many (all of them, as they are, without the rules)."""
    if search.placement is None:
        return rows, amounts, lighter
    may = search.placement.movable_to(search.part[rows[:lighter]], search.broker_ids[top])
    return rows[:lighter][may], amounts[:lighter][may], int(may.sum())


def _lowest_peaks(
    rows: np.ndarray, amounts: np.ndarray, lighter: int, mine: float, loads: tuple[float, float, float, float]
) -> list[int]:
    """Of the first ``lighter`` rows, those of the :data:`CANDIDATES` swaps with the lowest peak of the two
    brokers' loads after (``loads``: the top broker's and the partner's, each with its capacity), ties in row
    order; ``amounts`` ascending.

    The peak is the larger of a load rising and one falling with the
    amount swapped back, so along ascending amounts it falls, then rises:
    the lowest lie in a window around where the two cross. The window
    grows until both its ends are on their slopes and above the lowest
    ones, so the result is the one a full sort gives.
    """
    top_load, top_cap, c_load, c_cap = loads
    cross = mine - (top_load - c_load) / (1 / top_cap + 1 / c_cap)
    middle = min(int(amounts.searchsorted(cross)), lighter)  # within the first ``lighter``, as they ascend
    if middle in (0, lighter):  # every lighter replica on one slope (three swaps in four on the 10k bench)
        slope = _on_one_slope(rows, amounts, lighter, mine, loads, rising=middle == 0)
        if slope is not None:
            return slope
    width = 2 * CANDIDATES
    while True:
        lo, hi = max(0, middle - width), min(lighter, middle + width)
        delta = mine - amounts[lo:hi]
        new_top, new_c = top_load - delta / top_cap, c_load + delta / c_cap
        peaks = np.maximum(new_top, new_c)
        order = np.lexsort((rows[lo:hi], peaks))[:CANDIDATES]
        kth = peaks[order[-1]]
        left_ok = lo == 0 or (new_c[0] >= new_top[0] and peaks[0] > kth)
        right_ok = hi == lighter or (new_top[-1] >= new_c[-1] and peaks[-1] > kth)
        if left_ok and right_ok:
            picked: list[int] = rows[lo + order].tolist()
            return picked
        width *= 4


def _on_one_slope(
    rows: np.ndarray,
    amounts: np.ndarray,
    lighter: int,
    mine: float,
    loads: tuple[float, float, float, float],
    rising: bool,
) -> list[int] | None:
    """:func:`_lowest_peaks` where every peak lies on one slope: rising (the top broker's load decides it), the
    first rows, or falling (the partner's), the last rows, heaviest first; from a few peaks in plain floats.
    None where a tie among them (or the slope's end) leaves the order to the full ranking."""
    top_load, top_cap, c_load, c_cap = loads
    n = min(lighter, CANDIDATES + 1)
    ends = (amounts[:n] if rising else amounts[lighter - n : lighter][::-1]).tolist()
    peaks = []
    for amount in ends:
        new_top, new_c = top_load - (mine - amount) / top_cap, c_load + (mine - amount) / c_cap
        if (new_top < new_c) if rising else (new_c < new_top):
            return None  # not on the slope after all (the crossing, in rounding)
        peaks.append(new_top if rising else new_c)
    if any(a >= b for a, b in itertools.pairwise(peaks)):
        return None
    picked: list[int] = (rows[:n] if rising else rows[lighter - n : lighter][::-1]).tolist()
    return picked[:CANDIDATES]


def partner(search: GoalSearch, k: int, c: int, led_here: LedHere) -> Held:
    """Broker slot ``c`` as a partner of the round's top broker for goal ``k``'s options (see :data:`Held`)."""
    away = tuple((rows.tolist(), amounts.tolist()) for rows, amounts in led_here.moved_away(c))
    return c, search.by_role(k, c), away, {}, {}


def movable(search: GoalSearch, rows: np.ndarray) -> np.ndarray:
    """``rows`` but those of frozen partitions (the placement rules): never a candidate to move."""
    if search.placement is None:
        return rows
    kept: np.ndarray = rows[~search.placement.frozen[search.part[rows]]]
    return kept


def open_to(search: GoalSearch, picks: list[int], candidates: np.ndarray, top: int, n: int) -> list[int]:
    """The first ``n`` of ``candidates`` (broker slots, ``top`` aside) that the placement rules let one of
    ``picks`` onto (any, without rules).

    The least loaded brokers are often those the rules keep light (two
    tainted brokers taking one rule's topics): as partners they offered
    nothing, and the round fell back to its rack mates (10k partitions, five
    rules: 437 rounds, 296 actions).
    """
    if search.placement is None:
        return [c for c in candidates[: n + 1].tolist() if c != top][:n]
    parts, ids, may = search.part[picks], search.broker_ids, search.placement.movable_to
    open_to = []
    for c in candidates.tolist():
        if c != top and may(parts, ids[c]).any():
            open_to.append(c)
            if len(open_to) == n:
                break
    return open_to


def later_excess(search: GoalSearch, k: int, after: list[dict[int, float]]) -> float:
    """How much an option raises the goals after ``k`` above their thresholds on the brokers it touches
    (negative: how much it brings them down), each per its own bound.

    Among equally cheap options the one that helps the goals still to
    come saves the moves they would spend on its side effects; this only
    breaks ties, it never makes an option cheaper or a goal blended.
    """
    excess = 0.0
    for j in range(k + 1, len(search.resources)):
        if search.bounds[j] <= 0:
            continue
        target = search.target(j)
        before = max(float(search.load[j][b]) for b in after[j])
        excess += (max(0.0, max(after[j].values()) - target) - max(0.0, before - target)) / search.bounds[j]
    return excess
