"""Leadership annealed where a goal on the leaders' load stays unmet.

The goals on the leaders' load (bytes out, leader bytes in) depend only on
which replica leads, and a leadership transfer moves no data (Kafka's
preferred leader election), so where the goal search stops short of them a
wider search costs no replica move. It is simulated annealing (Kirkpatrick,
Gelatt and Vecchi, 1983) over the goal search's own leadership actions: a
transfer to a follower, or a pair passed both ways between two brokers
where a leader count sits at its band. The energy is each goal's excess
over its threshold per its bound, the goals weighted in priority order, plus
a small cost per leader changed, so the walk drifts freely among layouts
that are equally good and ends on the fewest changes it saw. Seeded, so the
same search gives the same leaders.
"""

from __future__ import annotations

import math

import numpy as np

from assigners.balanced.state import GoalSearch

ANNEAL_STEPS = 20_000  # transfers tried at most: ~0.15 s, and a 50-partition cluster needs ~10k
STEPS_PER_PARTITION = 500  # on a small cluster fewer suffice
PRIORITY = 1_000.0  # a goal's excess weighs this much more than the next goal's
CHANGE_COST = 1e-3  # per leader changed, in units of a goal's bound: well below what a goal's step gains
HOT, COLD = 0.05, 1e-4  # the temperature's start and end (geometric), in the same units
SEED = 12  # any fixed seed: the walk is the same on every run


def anneal_leaders(search: GoalSearch) -> bool:
    """Anneal the leaders where a goal they carry is unmet; in place. True when the goals met improved.

    Only goals whose amounts differ between leader and follower are
    touched; counts stay within (or move towards) their bands. The result
    is kept only when it meets more of those goals, in priority order.
    """
    goals = [
        k for k, r in enumerate(search.resources) if search.bounds[k] > 0 and not np.array_equal(r.leader, r.follower)
    ]
    met = search.goals_met()
    if not any(not met[k] for k in goals):
        return False
    walk = _Walk(search, goals)
    walk.run(min(ANNEAL_STEPS, STEPS_PER_PARTITION * len(walk.parts)))
    best_met = [walk.best_load[n].max() <= search.target(k) * (1 + 1e-9) for n, k in enumerate(goals)]
    if best_met <= [met[k] for k in goals]:
        return False
    walk.apply_best()
    return True


class _Walk:
    """The annealing state: per partition with a choice, its replica rows and the row that leads."""

    def __init__(self, search: GoalSearch, goals: list[int]) -> None:
        self.search, self.goals = search, goals
        sizes = np.diff(search.first_row)
        leading = np.zeros(len(sizes), dtype=bool)
        leading[search.part[search.lead]] = True
        self.parts = np.flatnonzero((sizes >= 2) & leading).tolist()  # a leader on an ineligible broker stays
        self.rows = [list(search.rows_of(i)) for i in self.parts]
        self.leader = [next(r for r in rows if search.lead[r]) for rows in self.rows]
        self.start = list(self.leader)
        self.slot = search.slot
        # per goal: what passing leadership of a partition moves, per unit of each broker's capacity
        self.delta = [search.resources[k].leader - search.resources[k].follower for k in goals]
        self.capacity = [np.asarray(search.capacity[k], dtype=float) for k in goals]
        self.load = [search.load[k].copy() for k in goals]
        self.target = [search.target(k) for k in goals]
        self.weight = [PRIORITY ** (len(goals) - 1 - n) / search.bounds[k] for n, k in enumerate(goals)]
        self.count = search.leaders.copy()
        self.led: list[list[int]] = [[] for _ in range(len(search.brokers))]  # indexes into parts, per slot
        for n, row in enumerate(self.leader):
            self.led[int(self.slot[row])].append(n)
        self.best_load = [load.copy() for load in self.load]
        self.best_leader = list(self.leader)

    def excess(self, g: int, value: float) -> float:
        return self.weight[g] * max(0.0, value - self.target[g])

    def run(self, steps: int) -> None:
        rng = np.random.default_rng(SEED)
        picks = rng.integers(0, max(1, len(self.parts)), steps)
        to, partner, luck = rng.random(steps), rng.random(steps), rng.random(steps)
        energy = best = 0.0  # relative to the start
        for step in range(steps if self.parts else 0):
            temperature = HOT * (COLD / HOT) ** (step / steps)
            n = int(picks[step])
            rows = self.rows[n]
            new = rows[int(to[step] * len(rows))]
            if new == self.leader[n]:
                continue
            a, b = int(self.slot[self.leader[n]]), int(self.slot[new])
            back = None
            if not (self.search.count_ok(self.count, 1, a, -1) and self.search.count_ok(self.count, 1, b, +1)):
                back = self._passed_back(b, a, partner[step])
                if back is None:
                    continue
            change = self._energy_change(n, back, a, b)
            if change <= 0 or luck[step] < math.exp(-change / temperature):
                self._transfer(n, back, a, b)
                energy += change
                if energy < best - 1e-12:
                    best = energy
                    self.best_load = [load.copy() for load in self.load]
                    self.best_leader = list(self.leader)

    def _passed_back(self, b: int, a: int, draw: float) -> tuple[int, int] | None:
        """A partition broker ``b`` leads that ``a`` follows (drawn), and its row on ``a``; None: none drawn."""
        led = self.led[b]
        if not led:
            return None
        m = led[int(draw * len(led))]
        row = next((r for r in self.rows[m] if int(self.slot[r]) == a), None)
        return None if row is None else (m, row)

    def _energy_change(self, n: int, back: tuple[int, int] | None, a: int, b: int) -> float:
        i = self.parts[n]
        change = 0.0
        for g, delta in enumerate(self.delta):
            moved = float(delta[i]) - (float(delta[self.parts[back[0]]]) if back else 0.0)
            load, cap = self.load[g], self.capacity[g]
            change += self.excess(g, load[a] - moved / cap[a]) - self.excess(g, load[a])
            change += self.excess(g, load[b] + moved / cap[b]) - self.excess(g, load[b])
        before = int(self.leader[n] != self.start[n])
        after = int(self._new_row(n, b) != self.start[n])
        if back is not None:
            before += int(self.leader[back[0]] != self.start[back[0]])
            after += int(back[1] != self.start[back[0]])
        return change + CHANGE_COST * (after - before)

    def _new_row(self, n: int, slot: int) -> int:
        return next(r for r in self.rows[n] if int(self.slot[r]) == slot)

    def _transfer(self, n: int, back: tuple[int, int] | None, a: int, b: int) -> None:
        moves = [(n, self._new_row(n, b), a, b)]
        if back is not None:
            moves.append((back[0], back[1], b, a))
        for m, row, old, new in moves:
            i = self.parts[m]
            for g, delta in enumerate(self.delta):
                self.load[g][old] -= float(delta[i]) / self.capacity[g][old]
                self.load[g][new] += float(delta[i]) / self.capacity[g][new]
            self.leader[m] = row
            self.count[old] -= 1
            self.count[new] += 1
            self.led[old].remove(m)
            self.led[new].append(m)

    def apply_best(self) -> None:
        """Put the best leaders seen on the search (untouched by the walk, so still at ``start``): a transfer
        per partition whose leader changed."""
        for old, row in zip(self.start, self.best_leader):
            if row != old:
                steps = ((old, int(self.slot[old]), False, False), (row, int(self.slot[row]), True, False))
                self.search.apply_steps(steps)
