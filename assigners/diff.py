"""From baseline to target: move rows, epochs and execution waves."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

from assigners.model import PAD, Replicas, as_matrix, matrix_rows, pad_to, row_contains, same_sets

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
    target: Replicas,
    baseline: Replicas,
    current: Replicas,
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
    n = len(target)
    if n == 0:
        return pd.DataFrame({c: [] for c in DIFF_COLUMNS})
    tgt, base, cur = (as_matrix(r) for r in (target, baseline, current))
    width = max(m.shape[1] for m in (tgt, base, cur))
    tgt, base, cur = (pad_to(m, width) for m in (tgt, base, cur))
    in_plan = np.asarray(in_previous_plan, dtype=bool)
    # the data moves from the previous plan's layout, or from the live one for partitions it lacks
    from_plan = in_plan | (not has_previous_plan)
    source = np.where(from_plan[:, None], base, cur)
    same_set = same_sets(tgt, source)
    same_leader = tgt[:, 0] == source[:, 0]
    final = np.where((same_set & same_leader)[:, None], source, tgt)

    kind = np.full(n, None, dtype=object)
    kind[~same_leader] = LEADER
    kind[~same_set] = REASSIGN
    if has_previous_plan:
        kind[~in_plan] = NEW
    changed = kind != None  # noqa: E711 - elementwise on an object array
    epoch = np.where(in_plan & has_previous_plan, np.asarray(previous_epoch, dtype=np.int64) + changed, 1)
    added = (tgt != PAD) & ~row_contains(tgt, source)
    removed = (source != PAD) & ~row_contains(source, tgt)
    moved_bytes = added.sum(axis=1) * np.asarray(size_bytes, dtype=np.int64)
    return pd.DataFrame(
        {
            "replicas": matrix_rows(final),
            "leader": final[:, 0],
            "epoch": epoch,
            "kind": kind,
            "from_replicas": _where_changed(matrix_rows(source, changed), changed),
            "from_leader": pd.Series(source[:, 0], dtype="Int64").where(changed, pd.NA),
            "added_brokers": _where_changed(_cells(tgt, added, changed), changed),
            "removed_brokers": _where_changed(_cells(source, removed, changed), changed),
            "bytes_to_move": pd.Series(moved_bytes, dtype="Int64").where(changed, pd.NA),
        },
        columns=DIFF_COLUMNS,
    )


def _cells(matrix: np.ndarray, cells: np.ndarray, rows: np.ndarray) -> list[list[int]]:
    """Per selected row, the marked cells in their order."""
    kept = np.where(cells[rows], matrix[rows], PAD)
    order = np.argsort(~cells[rows], axis=1, kind="stable")  # marked cells first, order kept
    return matrix_rows(np.take_along_axis(kept, order, axis=1))


def _where_changed(values: list[list[int]], changed: np.ndarray) -> np.ndarray:
    """An object column: the lists on changed rows, None elsewhere."""
    out = np.full(len(changed), None, dtype=object)
    for i, value in zip(np.flatnonzero(changed).tolist(), values):
        out[i] = value  # one by one: a slice assignment would broadcast equal-length lists into 2-D
    return out


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
    # Per broker, moves per wave and a union-find "next wave with room" (index 0 unused):
    # full waves point past themselves, so finding the first common open wave
    # skips full ones instead of rescanning them.
    load: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    jump: dict[int, list[int]] = defaultdict(lambda: [0, 1])

    def open_from(nxt: list[int], wave: int) -> int:
        root = wave
        while root < len(nxt) and nxt[root] != root:
            root = nxt[root]
        while wave < len(nxt) and nxt[wave] != root:  # path compression
            nxt[wave], wave = root, nxt[wave]
        return root

    data_moves = [i for i, a in enumerate(added) if a]
    data_moves.sort(key=lambda i: (-(bytes_to_move[i] or 0), i))
    for i in data_moves:
        brokers = sorted(set(added[i] or []) | set(removed[i] or []))
        chains = [jump[b] for b in brokers]
        wave = 1
        settled = False
        while not settled:
            settled = True
            for nxt in chains:
                if wave < len(nxt) and nxt[wave] != wave:
                    wave = open_from(nxt, wave)
                    settled = False
        for b, nxt in zip(brokers, chains):
            counts = load[b]
            while len(counts) <= wave + 1:
                counts.append(0)
                nxt.append(len(nxt))
            counts[wave] += 1
            if counts[wave] >= per_broker_limit:
                nxt[wave] = wave + 1
        waves[i] = wave
    for i, a in enumerate(added):
        if a is not None and not a:
            waves[i] = 1
    return waves
