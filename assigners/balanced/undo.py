"""Undoing the moves a plan no longer needs once later actions made them needless."""

from __future__ import annotations

import numpy as np

from assigners.balanced.state import GoalSearch

PAIR_TRIES = 8  # second undos tried per moved replica

Step = tuple[int, int, bool, bool]  # (replica row, broker slot, leads, relocates), as in a Change


def undo_needless_moves(search: GoalSearch) -> int:
    """Put replicas the plan moved back on a live broker of their partition wherever nothing gets worse.

    One at a time, then in pairs going opposite ways between two brokers
    (counts unchanged: the pair a load swap leaves once later actions made
    it needless).
    Nothing worse: the rules hold, counts stay in (or closer to) their
    band, and no goal's load rises above its threshold (or above its
    current maximum when it is not met). Each undo saves a move. Returns how many.
    """
    undone = 0
    count, slot = search.count, search.slot
    for row in moved_rows(search):
        # most undos alone would take a count out of its band: checked here before building the change
        if not search.count_ok(count, 0, int(slot[row]), -1):
            continue
        if (undo := undo_step(search, row)) is not None and search.harmless((undo,)):
            search.apply_steps((undo,))
            undone += 1
    reverse: dict[tuple[int, int], list[tuple[int, Step]]] = {}  # (slot it is on, slot it goes back to) -> undos
    for row in moved_rows(search):
        if (undo := undo_step(search, row)) is not None:
            reverse.setdefault((int(search.slot[row]), undo[1]), []).append((row, undo))
    for (there, home), undos in reverse.items():
        opposite = reverse.get((home, there))
        if not opposite or there > home:
            continue  # each pair of directions once, from its lower slot
        for row, undo in undos:
            for other, second in opposite[:PAIR_TRIES]:
                steps = (undo, second)
                if int(search.part[other]) == int(search.part[row]) or not all(_still_moved(search, s) for s in steps):
                    continue
                if search.harmless(steps):
                    search.apply_steps(steps)
                    undone += 2
                    break
    return undone


def _still_moved(search: GoalSearch, step: Step) -> bool:
    """Is the step's replica still away from its live brokers, and its way back still free?"""
    row, back = step[0], step[1]
    i = int(search.part[row])
    return bool(search.moved_in[row]) and int(search.brokers[back]) not in search.replicas[i]


def moved_rows(search: GoalSearch) -> list[int]:
    """Replica rows on a broker that does not hold their partition live, in row order."""
    return np.flatnonzero(search.moved_in).tolist()


def undo_step(search: GoalSearch, row: int) -> Step | None:
    """The step putting a moved replica back on its partition's first free live broker, if it still is moved."""
    i = int(search.part[row])
    if int(search.brokers[search.slot[row]]) in search.live[i]:
        return None
    for home in sorted(search.live[i] - set(search.replicas[i])):
        back = search.slot_of(home)
        if back is not None:
            return (row, back, bool(search.lead[row]), True)
    return None
