"""Offload mode: only the brokers above a threshold give up replicas (``[planner.balanced] mode = "offload"``).

topicmappr's ``rebalance --storage-threshold`` moves partitions off the brokers
above a storage threshold and touches no other broker's data; Cruise Control
users ask for the same (linkedin/cruise-control#2228). Here every load goal
counts: a broker above ``offload_ratio`` times a goal's reachable bound (disk,
bytes in, bytes out, the combined load, leader bytes in) is offloaded. It
first passes leadership to a follower on a broker that is not offloaded (no
data moves), then moves replicas to the least loaded broker that stays
within every threshold (a leader's replica as a follower, its leadership
passing to another of its replicas, where the receiver cannot take the
leader's load), fewest bytes first: the smallest replica that brings the
broker under on its own, else the one that lowers it most per byte. No
broker below the threshold loses a replica; every rule the goal search keeps
holds (racks, caps, placement rules, one move per replica, the topic rule).
"""

from __future__ import annotations

import numpy as np

from assigners.balanced.actions import movable, open_to
from assigners.balanced.state import Change, GoalSearch

RECEIVERS = 8  # least loaded brokers tried as receivers per candidate replica
CANDIDATES = 16  # replicas of the offloaded broker tried per step


def offload(search: GoalSearch, ratio: float) -> tuple[list[int], list[str]]:
    """Offload every broker above ``ratio`` times a goal's reachable bound; in place. Returns the offloaded
    brokers' ids and the notes (what they gave, and any left above)."""
    limits = [ratio * search.reachable[k] * (1 + 1e-9) for k in range(len(search.resources))]
    goals = [k for k in range(len(search.resources)) if search.bounds[k] > 0]
    donors = sorted({b for k in goals for b in np.flatnonzero(search.load[k] > limits[k]).tolist()})
    if not donors:
        return [], []
    given, passed = dict.fromkeys(donors, 0), dict.fromkeys(donors, 0)
    for moves in (False, True):  # leadership first everywhere: what it frees makes room for the moves
        stuck: set[int] = set()
        for k in goals:
            while True:
                above = [b for b in donors if search.load[k][b] > limits[k] and b not in stuck]
                if not above:
                    break
                top = max(above, key=lambda b: (search.load[k][b], -b))
                change = _transfer(search, k, top, limits) or (_move(search, k, top, limits) if moves else None)
                if change is None:
                    stuck.add(top)  # for this goal in this phase (named below if it stays above)
                    continue
                search.apply(change)
                moved = any(step[3] for step in change)
                given[top] += moved
                passed[top] += not moved
            stuck.clear()
    ids = [int(search.brokers[b]) for b in sorted(given) if given[b] or passed[b]]
    what = [
        f"{int(search.brokers[b])} "
        + " and ".join(
            ([f"gave {_count(given[b], 'replica')}"] if given[b] else [])
            + ([f"passed {_count(passed[b], 'leadership')}"] if passed[b] else [])
        )
        for b in sorted(given)
        if given[b] or passed[b]
    ]
    notes = [
        f"offload: brokers above {ratio:g}x a goal's bound: " + ", ".join(what) + "; no other broker lost a replica"
    ]
    still = [  # each over its reachable bound, as the threshold is
        f"{search.resources[k].name} on broker {int(search.brokers[b])} at "
        f"{search.load[k][b] / search.reachable[k]:.3f}x"
        for k in goals
        for b in sorted(given)
        if search.load[k][b] > limits[k]
    ]
    if still:
        notes.append("offload: no legal move brings these under the threshold: " + "; ".join(still))
    return ids, notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _transfer(search: GoalSearch, k: int, top: int, limits: list[float]) -> Change | None:
    """A leadership of ``top`` passed to a follower on a broker that stays within every threshold, the one
    lowering ``top`` most (no data moves)."""
    rows = movable(search, search.rows_on(top))
    led = rows[search.lead[rows]]
    best: tuple[float, Change] | None = None
    for row in led[np.argsort(-search.amount(k, led), kind="stable")][:CANDIDATES].tolist():
        i = int(search.part[row])
        for other in search.rows_of(i):
            c = int(search.slot[other])
            if other == row:
                continue
            change = ((row, top, False, False), (other, c, True, False))
            if search.legal(change) and _within(search, change, limits, top):
                gain = float(search.load[k][top]) - search.loads_after(change)[k][top]
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, change)
    return None if best is None else best[1]


def _move(search: GoalSearch, k: int, top: int, limits: list[float]) -> Change | None:
    """A replica of ``top`` moved to the least loaded broker that may take it: the smallest that brings
    ``top`` under on its own, else the one lowering it most per byte."""
    rows = movable(search, search.rows_on(top))
    amounts = search.amount(k, rows)
    rows, amounts = rows[amounts > 0], amounts[amounts > 0]
    if not len(rows):
        return None
    excess = (float(search.load[k][top]) - limits[k]) * search.capacity[k][top]
    sizes = search.sizes[search.part[rows]].astype(float)
    enough = amounts >= excess
    # enough alone: smallest first; else the most relief per byte (zero-size ones first, as they cost nothing)
    key = np.where(enough, sizes, np.inf), -amounts / np.maximum(sizes, 1.0)
    order = np.lexsort((rows, key[1], key[0]))[:CANDIDATES]
    # receivers the rules let one of the candidates onto: the least loaded are often brokers no topic here may
    # use (eight dedicated brokers, empty: every receiver refused and the hot brokers stayed above)
    receivers = open_to(search, rows[order].tolist(), np.argsort(search.load[k], kind="stable"), top, RECEIVERS)
    for row in rows[order].tolist():
        for c in receivers:
            if not search.may_step(row, c):
                continue
            for change in _ways(search, row, c):
                if _within(search, change, limits, top):
                    return change
    return None


def _ways(search: GoalSearch, row: int, c: int) -> list[Change]:
    """``row`` moved to broker slot ``c``: as it is; for a leader also as a follower, its leadership passing
    to each other replica of its partition (legal for the leader counts)."""
    if not search.lead[row]:
        return [((row, c, False, True),)]
    ways: list[Change] = [((row, c, True, True),)]
    for other in search.rows_of(int(search.part[row])):
        if other != row:
            change = ((row, c, False, True), (other, int(search.slot[other]), True, False))
            if search.legal(change[1:] + ((row, int(search.slot[row]), False, False),)):
                ways.append(change)
    return ways


def _within(search: GoalSearch, change: Change, limits: list[float], top: int) -> bool:
    """Does every broker ``change`` touches, but the offloaded ``top``, stay within every goal's threshold (or
    no higher than it was)?"""
    for k, loads in enumerate(search.loads_after(change)):
        for b, value in loads.items():
            if b != top and value > limits[k] and value > search.load[k][b] + 1e-12:
                return False
    return True
