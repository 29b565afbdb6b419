"""Count balancing shared by the strategies: replicas per broker, then leaders.

Both passes edit a list of replica lists in place and only make moves that
keep every rule the plan already satisfies (eligible brokers, distinct
brokers, the rack rule), so they can follow any strategy.
"""

from __future__ import annotations

from collections import deque

from assigners.model import ClusterView


def _keeps_rack_rule(replicas: list[int], old: int, new: int, view: ClusterView) -> bool:
    domains = [view.domain_of[b] for b in replicas if b != old] + [view.domain_of[new]]
    return len(set(domains)) >= view.required_domains(len(replicas))


def balance_replica_counts(assignment: list[list[int]], view: ClusterView) -> int:
    """Move replicas from the fullest to the emptiest brokers until counts differ by <= 1.

    Followers move first (a leader move also shifts leadership); a pass stops
    when no legal move narrows the spread. Returns the number of moves made.

    Notes
    -----
    Each move takes one replica off a broker holding ``max`` and puts it on
    one holding ``<= max - 2``, so the sum of squared counts falls strictly
    and the loop ends.
    """
    eligible = view.eligible
    if len(eligible) < 2:
        return 0
    holding: dict[int, set[int]] = {b: set() for b in eligible}
    for i, replicas in enumerate(assignment):
        for b in replicas:
            if b in holding:
                holding[b].add(i)
    moves = 0
    while True:
        by_count = sorted(eligible, key=lambda b: (len(holding[b]), b))
        top = len(holding[by_count[-1]])
        if top - len(holding[by_count[0]]) <= 1:
            return moves
        move = _find_count_move(assignment, holding, by_count, top, view)
        if move is None:
            return moves
        i, old, new = move
        replicas = assignment[i]
        replicas[replicas.index(old)] = new
        holding[old].discard(i)
        holding[new].add(i)
        moves += 1


def _find_count_move(
    assignment: list[list[int]], holding: dict[int, set[int]], by_count: list[int], top: int, view: ClusterView
) -> tuple[int, int, int] | None:
    donors = [b for b in reversed(by_count) if len(holding[b]) == top]
    receivers = [b for b in by_count if len(holding[b]) <= top - 2]
    for leader_ok in (False, True):
        for old in donors:
            for new in receivers:
                for i in sorted(holding[old]):
                    replicas = assignment[i]
                    if new in replicas or (replicas[0] == old and not leader_ok):
                        continue
                    if _keeps_rack_rule(replicas, old, new, view):
                        return i, old, new
    return None


def balance_leaders(assignment: list[list[int]], view: ClusterView) -> int:
    """Reorder replica lists so leader counts per broker differ by <= 1 where possible.

    No data moves: a partition's leader becomes another of its replicas. Uses
    shortest augmenting paths (like bipartite matching): from a broker with
    the most leaderships, follow "a leads a partition that b replicates"
    edges to a broker with at least two fewer, and shift leadership along the
    path. Returns the number of leadership changes.
    """
    eligible = set(view.eligible)
    led: dict[int, set[int]] = {b: set() for b in eligible}
    for i, replicas in enumerate(assignment):
        if replicas and replicas[0] in led:
            led[replicas[0]].add(i)
    changes = 0
    while True:
        ordered = sorted(led, key=lambda b: (-len(led[b]), b))
        top = len(led[ordered[0]])
        if top - len(led[ordered[-1]]) <= 1:
            return changes
        path = None
        for source in (b for b in ordered if len(led[b]) == top):
            path = _leader_path(assignment, led, source, top)
            if path:
                break
        if not path:
            return changes
        for i, new_leader in path:
            replicas = assignment[i]
            old_leader = replicas[0]
            replicas.remove(new_leader)
            replicas.insert(0, new_leader)
            led[old_leader].discard(i)
            led[new_leader].add(i)
            changes += 1


def _leader_path(
    assignment: list[list[int]], led: dict[int, set[int]], source: int, top: int
) -> list[tuple[int, int]] | None:
    """Breadth-first search for a chain of leadership hand-overs ending on a light broker."""
    parent: dict[int, tuple[int, int]] = {}
    seen = {source}
    queue = deque([source])
    while queue:
        a = queue.popleft()
        for i in sorted(led[a]):
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
    return None
