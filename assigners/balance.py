"""Count balancing shared by the strategies: replicas per broker, then leaders.

Both passes edit a list of replica lists in place and only make moves that
keep every rule the plan already satisfies (eligible brokers, distinct
brokers, the rack rule), so they can follow any strategy.
"""

from __future__ import annotations

from collections import deque

from assigners.model import ClusterView


class _ReplicaIndex:
    """Each broker's partitions grouped by (is leader, RF, failure domains of the *other* replicas).

    Whether a replica may move from ``old`` to ``new`` depends only on that
    group key and on ``new``'s domain, so a legal move is found by looking at
    a handful of groups instead of every partition the donor holds.
    """

    def __init__(self, assignment: list[list[int]], view: ClusterView) -> None:
        self.assignment = assignment
        self.view = view
        domains = sorted({view.domain_of[b] for b in view.domain_of})
        self.bit = {b: 1 << domains.index(view.domain_of[b]) for b in view.domain_of}
        # Members are insertion-ordered dicts (used as ordered sets): taking the first one
        # is O(1) and deterministic, where min() over a set rescanned thousands of members.
        self.groups: dict[int, list[dict[tuple[int, int], dict[int, None]]]] = {b: [{}, {}] for b in view.eligible}
        self.count = dict.fromkeys(view.eligible, 0)
        for i in range(len(assignment)):
            self._update(i, add=True)

    def _update(self, i: int, add: bool) -> None:
        replicas = self.assignment[i]
        for pos, b in enumerate(replicas):
            if b not in self.groups:
                continue
            mask = 0
            for other in replicas:
                if other != b:
                    mask |= self.bit.get(other, 0)
            groups = self.groups[b][pos == 0]  # followers [0] are tried before leaders [1]
            key = (len(replicas), mask)
            if add:
                groups.setdefault(key, {})[i] = None
                self.count[b] += 1
            else:
                members = groups[key]
                del members[i]
                if not members:
                    del groups[key]
                self.count[b] -= 1

    def find(self, old: int, new: int) -> int | None:
        """A partition whose replica on ``old`` may move to ``new`` without hurting its rack spread."""
        new_bit, old_bit = self.bit[new], self.bit[old]
        for groups in self.groups[old]:
            for (rf, mask), members in groups.items():
                required = self.view.required_domains(rf)
                after = (mask | new_bit).bit_count()
                if after < min(required, (mask | old_bit).bit_count()):
                    continue
                if not mask & new_bit:  # new's domain is free here, so new holds no replica either
                    return next(iter(members))
                hit = next((i for i in members if new not in self.assignment[i]), None)
                if hit is not None:
                    return hit
        return None

    def move(self, i: int, old: int, new: int) -> None:
        self._update(i, add=False)
        replicas = self.assignment[i]
        replicas[replicas.index(old)] = new
        self._update(i, add=True)


def balance_replica_counts(assignment: list[list[int]], view: ClusterView) -> int:
    """Move replicas from the fullest to the emptiest brokers until counts differ by <= 1.

    Followers move first (a leader move also shifts leadership); it stops
    when no legal move narrows the spread. Returns the number of moves made.

    Notes
    -----
    Each move takes one replica off a broker holding ``max`` and puts it on
    one holding ``<= max - 2``, so the sum of squared counts falls strictly
    and the loop ends.
    """
    if len(view.eligible) < 2:
        return 0
    index = _ReplicaIndex(assignment, view)
    moves = 0
    while True:
        by_count = sorted(view.eligible, key=lambda b: (index.count[b], b))
        top = index.count[by_count[-1]]
        if top - index.count[by_count[0]] <= 1:
            return moves
        chain = _find_count_move(index, by_count, top)
        if chain is None or len({i for i, _, _ in chain}) < len(chain):
            return moves  # no way forward (a chain reusing a partition could break its own rules)
        for i, old, new in chain:
            index.move(i, old, new)
            moves += 1


def _find_count_move(index: _ReplicaIndex, by_count: list[int], top: int) -> list[tuple[int, int, int]] | None:
    """A direct move from a fullest to an emptiest broker, else the shortest chain of moves.

    A chain donor -> b1 -> ... -> receiver moves one replica per hop; the
    brokers in between gain one and lose one, so only the two ends change.
    It gets past dead ends where every partition of the donor already uses
    the receiver's rack.
    """
    donors = [b for b in reversed(by_count) if index.count[b] == top]
    receivers = [b for b in by_count if index.count[b] <= top - 2]
    for old in donors:
        for new in receivers:
            i = index.find(old, new)
            if i is not None:
                return [(i, old, new)]
    targets = set(receivers)
    for source in donors:
        parent: dict[int, tuple[int, int]] = {}
        queue = deque([source])
        seen = {source}
        while queue:
            a = queue.popleft()
            for b in by_count:
                if b in seen:
                    continue
                i = index.find(a, b)
                if i is None:
                    continue
                seen.add(b)
                parent[b] = (a, i)
                if b in targets:
                    return _chain(parent, source, b)
                queue.append(b)
    return None


def _chain(parent: dict[int, tuple[int, int]], source: int, end: int) -> list[tuple[int, int, int]]:
    hops = []
    node = end
    while node != source:
        prev, i = parent[node]
        hops.append((i, prev, node))
        node = prev
    return hops[::-1]


def balance_leaders(assignment: list[list[int]], view: ClusterView) -> int:
    """Reorder replica lists so leader counts per broker differ by <= 1 where possible.

    No data moves: a partition's leader becomes another of its replicas. Uses
    shortest augmenting paths (like bipartite matching): from a broker with
    the most leaderships, follow "a leads a partition that b replicates"
    edges to a broker with at least two fewer, and shift leadership along the
    path. Returns the number of leadership changes.
    """
    eligible = set(view.eligible)
    led: dict[int, dict[int, None]] = {b: {} for b in eligible}  # ordered sets, see _ReplicaIndex
    for i, replicas in enumerate(assignment):
        if replicas and replicas[0] in led:
            led[replicas[0]][i] = None
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
            del led[old_leader][i]
            led[new_leader][i] = None
            changes += 1


def _leader_path(
    assignment: list[list[int]], led: dict[int, dict[int, None]], source: int, top: int
) -> list[tuple[int, int]] | None:
    """Breadth-first search for a chain of leadership hand-overs ending on a light broker."""
    parent: dict[int, tuple[int, int]] = {}
    seen = {source}
    queue = deque([source])
    while queue:
        a = queue.popleft()
        for i in led[a]:
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
