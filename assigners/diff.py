"""From baseline to target: move rows, epochs and execution waves."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

REASSIGN, LEADER, NEW = "reassign", "leader", "new"

DIFF_COLUMNS = [
    "replicas",
    "leader",
    "epoch",
    "kind",
    "from_replicas",
    "from_leader",
    "added_brokers",
    "removed_brokers",
    "bytes_to_move",
]


def diff_assignment(
    target: list[list[int]],
    baseline: list[list[int]],
    current: list[list[int]],
    in_previous_plan: np.ndarray,
    previous_epoch: np.ndarray,
    size_bytes: np.ndarray,
    has_previous_plan: bool,
) -> pd.DataFrame:
    """One row per partition: the final replica list, its epoch and, if it changed, the move.

    A partition whose replica set and leader are unchanged keeps the
    baseline's follower order, so reordering followers is never a change.
    ``kind`` is ``new`` for a partition the previous plan did not have; its
    ``from_*`` columns show the live (snapshot) layout the data moves from.

    Examples
    --------
    >>> d = diff_assignment([[2, 1], [3, 1]], [[1, 2], [1, 2]], [[1, 2], [1, 2]],
    ...     np.array([True, True]), np.array([4, 7]), np.array([10, 10]), True)
    >>> d[["replicas", "kind", "epoch", "bytes_to_move"]].values.tolist()
    [[[2, 1], 'leader', 5, 0], [[3, 1], 'reassign', 8, 10]]
    """
    rows = []
    for tgt, base, cur, in_plan, epoch, size in zip(
        target, baseline, current, in_previous_plan.tolist(), previous_epoch.tolist(), size_bytes.tolist()
    ):
        source = base if (in_plan or not has_previous_plan) else cur
        same_set = set(tgt) == set(source)
        if same_set and tgt[0] == source[0]:
            tgt = list(source)
        if has_previous_plan and not in_plan:
            kind: str | None = NEW
        elif not same_set:
            kind = REASSIGN
        elif tgt[0] != source[0]:
            kind = LEADER
        else:
            kind = None
        new_epoch = int(epoch) + (kind is not None) if (has_previous_plan and in_plan) else 1
        added = [b for b in tgt if b not in source]
        rows.append(
            (
                tgt,
                tgt[0],
                new_epoch,
                kind,
                list(source) if kind else None,
                source[0] if kind else None,
                added if kind else None,
                [b for b in source if b not in tgt] if kind else None,
                len(added) * int(size) if kind else None,
            )
        )
    return pd.DataFrame(rows, columns=DIFF_COLUMNS)


def assign_waves(
    added: list[list[int] | None],
    removed: list[list[int] | None],
    bytes_to_move: list[int | None],
    per_broker_limit: int,
) -> list[int | None]:
    """Execution wave of every move (None where there is no move).

    Moves that copy data are packed largest first into the earliest wave in
    which every broker they add to or remove from takes part in fewer than
    ``per_broker_limit`` moves, so one wave never floods a broker; leader-only
    moves go in wave 1.

    Examples
    --------
    >>> assign_waves([[3], [3], [4], None], [[1], [2], [1], None], [5, 9, 1, None], 1)
    [2, 1, 1, None]
    """
    waves: list[int | None] = [None] * len(added)
    load: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    # Per broker, a union-find "next wave with room": full waves point past themselves,
    # so finding the first common open wave skips full ones instead of rescanning them.
    skip: dict[int, dict[int, int]] = defaultdict(dict)

    def open_from(jumps: dict[int, int], wave: int) -> int:
        start = wave
        while wave in jumps:
            wave = jumps[wave]
        while start in jumps and jumps[start] != wave:  # path compression
            start, jumps[start] = jumps[start], wave
        return wave

    data_moves = [i for i, a in enumerate(added) if a]
    data_moves.sort(key=lambda i: (-(bytes_to_move[i] or 0), i))
    for i in data_moves:
        brokers = sorted(set(added[i] or []) | set(removed[i] or []))
        wave = 1
        while True:
            latest = wave
            for b in brokers:
                latest = max(latest, open_from(skip[b], wave))
            if latest == wave:
                break
            wave = latest
        for b in brokers:
            load[b][wave] += 1
            if load[b][wave] >= per_broker_limit:
                skip[b][wave] = wave + 1
        waves[i] = wave
    for i, a in enumerate(added):
        if a is not None and not a:
            waves[i] = 1
    return waves
