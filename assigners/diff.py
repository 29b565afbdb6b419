"""From the live layout to the target: move rows, epochs of the planned assignment, their waves (``waves``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from assigners.model import (
    PAD,
    Replicas,
    as_matrix,
    matrix_rows,
    packed_left,
    pad_to,
    row_contains,
    row_lengths,
    row_sum,
    same_sets,
)
from assigners.waves import DEFAULT_CAPS, WaveCaps, assign_waves, urgency

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
    current: Replicas,
    previous: Replicas,
    in_previous_plan: np.ndarray,
    previous_epoch: np.ndarray,
    size_bytes: np.ndarray,
    has_previous_plan: bool,
    wave_caps: WaveCaps = DEFAULT_CAPS,
    emptied: tuple[int, ...] = (),
) -> pd.DataFrame:
    """One row per partition: the final replica list, its epoch and, if it differs from the live layout, the move.

    Moves are what must be executed on the real cluster: the difference
    between the live layout (``current``) and the target, so ``from_*`` is
    always the live layout. Epochs count changes of the *planned*
    assignment: +1 where the target differs from the previous plan's
    (``previous``, rows where ``in_previous_plan``), 1 for a partition that
    plan did not have. Reordered followers are never a change: a target with
    the live set and leader keeps the live order, one with the previous
    plan's set and leader keeps that order. ``kind`` is ``new`` for a
    changed partition the previous plan did not have.

    Examples
    --------
    >>> d = diff_assignment([[2, 1], [3, 1], [1, 4]], [[1, 2], [1, 2], [1, 2]], [[1, 2], [3, 1], [1, 4]],
    ...     np.array([True, True, True]), np.array([4, 7, 2]), np.array([10, 10, 10]), True)
    >>> d[["replicas", "kind", "epoch", "from_replicas", "bytes_to_move"]].values.tolist()
    [[[2, 1], 'leader', 5, [1, 2], 0], [[3, 1], 'reassign', 7, [1, 2], 10], [[1, 4], 'reassign', 2, [1, 2], 10]]
    """
    n = len(target)
    if n == 0:
        return pd.DataFrame({c: [] for c in DIFF_COLUMNS})
    tgt, cur, prev = (as_matrix(r) for r in (target, current, previous))
    width = max(m.shape[1] for m in (tgt, cur, prev))
    tgt, cur, prev = (pad_to(m, width) for m in (tgt, cur, prev))
    in_plan = np.asarray(in_previous_plan, dtype=bool) & has_previous_plan
    same_set = same_sets(tgt, cur)  # the final list differs from the target only in follower order
    as_live = same_set & (tgt[:, 0] == cur[:, 0])
    as_planned = in_plan & (same_sets(tgt, prev) & (tgt[:, 0] == prev[:, 0]) if in_plan.any() else False)
    final = np.where(as_live[:, None], cur, np.where(as_planned[:, None], prev, tgt))

    kind = np.full(n, None, dtype=object)
    kind[~as_live] = LEADER
    kind[~same_set] = REASSIGN
    if has_previous_plan:
        kind[~in_plan & ~as_live] = NEW
    changed = ~as_live
    epoch = np.where(in_plan, np.asarray(previous_epoch, dtype=np.int64) + ~as_planned, 1)
    added = (final != PAD) & ~row_contains(final, cur)
    removed = (cur != PAD) & ~row_contains(cur, final)
    moved_bytes = row_sum(added) * np.asarray(size_bytes, dtype=np.int64)
    touched = np.concatenate([np.where(added, final, PAD), np.where(removed, cur, PAD)], axis=1)
    phase = urgency(np.where(removed, cur, PAD), row_lengths(cur), row_lengths(final), emptied)
    waves = assign_waves(touched, changed, moved_bytes, phase, wave_caps)
    return pd.DataFrame(
        {
            "replicas": matrix_rows(final),
            "leader": final[:, 0],
            "epoch": epoch,
            "kind": kind,
            "from_replicas": _where_changed(matrix_rows(cur, changed), changed),
            "from_leader": pd.Series(cur[:, 0], dtype="Int64").where(changed, pd.NA),
            "added_brokers": _where_changed(_cells(final, added, changed), changed),
            "removed_brokers": _where_changed(_cells(cur, removed, changed), changed),
            "bytes_to_move": pd.Series(moved_bytes, dtype="Int64").where(changed, pd.NA),
            "wave": pd.Series(waves, dtype="Int64").where(changed, pd.NA),
        },
        columns=DIFF_COLUMNS,
    )


def _cells(matrix: np.ndarray, cells: np.ndarray, rows: np.ndarray) -> list[list[int]]:
    """Per selected row, the marked cells in their order."""
    return matrix_rows(packed_left(matrix[rows], cells[rows]))


def _where_changed(values: list[list[int]], changed: np.ndarray) -> np.ndarray:
    """An object column: the lists on changed rows, None elsewhere."""
    column = np.full(len(changed), None, dtype=object)
    # fromiter keeps each list one object: an array built from equal-length lists would be 2-D
    column[changed] = np.fromiter(values, dtype=object, count=len(values))
    return column
