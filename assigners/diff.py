"""From baseline to target: move rows, epochs and execution waves."""

from __future__ import annotations

import numpy as np
import pandas as pd

from assigners.model import PAD, Replicas, as_matrix, matrix_rows, pad_to, replica_matrix, row_contains, same_sets

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
    "wave",
]


def diff_assignment(
    target: Replicas,
    baseline: Replicas,
    current: Replicas,
    in_previous_plan: np.ndarray,
    previous_epoch: np.ndarray,
    size_bytes: np.ndarray,
    has_previous_plan: bool,
    wave_broker_limit: int = 10,
) -> pd.DataFrame:
    """One row per partition: the final replica list, its epoch and, if it changed, the move and its wave.

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
    touched = np.concatenate([np.where(added, tgt, PAD), np.where(removed, source, PAD)], axis=1)
    waves = wave_numbers(touched, changed, moved_bytes, wave_broker_limit)
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
            "wave": pd.Series(waves, dtype="Int64").where(changed, pd.NA),
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
    # element by element: a slice assignment would broadcast equal-length lists into 2-D
    rest = iter(values)
    return np.array([next(rest) if c else None for c in changed.tolist()] + [None], dtype=object)[:-1]


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
    touched = np.concatenate([replica_matrix(added), replica_matrix(removed)], axis=1)
    has_move = np.array([a is not None for a in added], dtype=bool)
    sizes = np.array([0 if pd.isna(b) else b for b in bytes_to_move], dtype=np.int64)
    waves = wave_numbers(touched, has_move, sizes, per_broker_limit)
    return [int(w) if m else None for w, m in zip(waves.tolist(), has_move.tolist())]


def wave_numbers(touched: np.ndarray, has_move: np.ndarray, sizes: np.ndarray, per_broker_limit: int) -> np.ndarray:
    """:func:`assign_waves` on a padded matrix of the brokers each move adds or removes (0 = no move)."""
    waves = np.where(has_move, 1, 0).astype(np.int64)
    data = np.flatnonzero(has_move & (touched != PAD).any(axis=1))
    if not len(data):
        return waves
    data = data[np.lexsort((data, -sizes[data]))]
    ids, codes = np.unique(touched[data], return_inverse=True)
    codes = np.sort(codes.reshape(len(data), -1), axis=1)
    pad = int(np.searchsorted(ids, PAD)) if ids[0] == PAD else -1
    # Per broker, moves per wave and a bit mask of its full waves (bit 0 = the unused wave 0):
    # the first wave open on all of a move's brokers is the lowest zero bit of their masks' OR,
    # a handful of big-int operations instead of a scan over the waves.
    load: list[list[int]] = [[0] for _ in ids]
    full = [1] * len(ids)
    out = []
    for row in codes.tolist():
        brokers = [c for c in row if c != pad]  # added and removed brokers of a move never repeat
        taken = 0
        for b in brokers:
            taken |= full[b]
        wave = (~taken & (taken + 1)).bit_length() - 1
        for b in brokers:
            counts = load[b]
            if len(counts) <= wave:
                counts.extend([0] * (wave + 1 - len(counts)))
            counts[wave] += 1
            if counts[wave] >= per_broker_limit:
                full[b] |= 1 << wave
        out.append(wave)
    waves[data] = out
    return waves
