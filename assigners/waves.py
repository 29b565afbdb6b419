"""Execution waves: which moves an operator runs together, under caps, urgent ones first.

A wave is one ``kafka-reassign-partitions --execute`` call. Within a wave no
broker is added to or removed from more than ``max_moves_per_broker``
partitions (Cruise Control's ``num.concurrent.partition.movements.per.broker``,
default 5), the wave holds at most ``max_moves_per_wave`` data moves and
``max_bytes_per_wave`` bytes (a single larger move goes alone), and at most
``max_leader_moves_per_wave`` leader-only changes (Cruise Control's
``num.concurrent.leader.movements``, default 1000).

Order (Cruise Control's ``PrioritizeMinIsrWithOfflineReplicasStrategy`` and
``PostponeUrpReplicaMovementStrategy`` ideas, in phases): first the partitions
with a replica on a broker that must be emptied (dead, draining or excluded),
then those below their replication factor, then the rest, smallest first
(``PrioritizeSmallReplicaMovementStrategy``; ``large_first`` is
``PrioritizeLargeReplicaMovementStrategy``). A later phase may fill the last
wave of the one before it but never an earlier wave, so an urgent move is never
behind an ordinary one. Leader-only changes copy no data and go last, into the
last data wave and, when they exceed their cap, the waves after it.

Packing is first fit over the waves, with per-broker bit masks of full waves
(the first wave open on every broker of a move is the lowest zero bit of their
masks' OR). First fit in size order can leave a busy broker idle in waves its
partners filled, so each phase is also packed busiest brokers first and the
packing with fewer waves wins: the count stays within one of what the caps
force (the busiest broker's moves / cap) on the plans the strategies make.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assigners.model import (
    PAD,
    matrix_rows,
    packed_left,
    row_any,
)

SMALL_FIRST, LARGE_FIRST = "small_first", "large_first"
MOVE_ORDERS = (SMALL_FIRST, LARGE_FIRST)
# urgency phases, in execution order
EMPTYING, UNDER_REPLICATED, ORDINARY = 0, 1, 2
PHASE_NAMES = {EMPTYING: "replica on a dead, draining or excluded broker", UNDER_REPLICATED: "below RF", ORDINARY: ""}


@dataclass(frozen=True)
class WaveCaps:
    """Caps of one execution wave (``[planner.execution]``); None: no cap."""

    max_moves_per_broker: int = 5
    max_moves_per_wave: int | None = None
    max_leader_moves_per_wave: int = 1000
    max_bytes_per_wave: int | None = None
    move_order: str = SMALL_FIRST

    def __post_init__(self) -> None:
        for name in ("max_moves_per_broker", "max_moves_per_wave", "max_leader_moves_per_wave", "max_bytes_per_wave"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.move_order not in MOVE_ORDERS:
            raise ValueError(f"move_order = {self.move_order!r}; expected one of {', '.join(MOVE_ORDERS)}")


DEFAULT_CAPS = WaveCaps()


def urgency(
    removed: np.ndarray, live_sizes: np.ndarray, target_sizes: np.ndarray, emptied: tuple[int, ...]
) -> np.ndarray:
    """Phase of every move: a removed replica on a broker to empty, fewer live replicas than the RF, or ordinary.

    ``removed``: padded matrix of the brokers each move takes a replica off;
    ``emptied``: ids of the dead, draining and excluded brokers.
    """
    phase = np.full(len(removed), ORDINARY, dtype=np.int64)
    phase[np.asarray(live_sizes) < np.asarray(target_sizes)] = UNDER_REPLICATED
    if len(removed) and removed.size:
        on_emptied = np.isin(removed, np.asarray(emptied, dtype=np.int64)) & (removed != PAD)
        phase[row_any(on_emptied)] = EMPTYING
    return phase


def assign_waves(
    touched: np.ndarray, has_move: np.ndarray, sizes: np.ndarray, phase: np.ndarray, caps: WaveCaps
) -> np.ndarray:
    """1-based wave of every move (0 where ``has_move`` is false).

    ``touched``: padded matrix of the brokers each move adds a replica to or
    removes one from (a row of PAD only, ``model.PAD``: a leader-only change).

    Examples
    --------
    Broker 1 gives up two replicas, one per wave, the smaller first; the leader-only change (row 3) goes
    into the last wave.

    >>> touched = np.array([[3, 1], [3, 2], [4, 1], [PAD, PAD], [PAD, PAD]])
    >>> assign_waves(touched, np.array([1, 1, 1, 1, 0], bool), np.array([5, 9, 1, 0, 0]),
    ...     np.full(5, ORDINARY), WaveCaps(max_moves_per_broker=1)).tolist()
    [2, 1, 1, 2, 0]
    """
    waves = np.zeros(len(has_move), dtype=np.int64)
    has_move = np.asarray(has_move, dtype=bool)
    data = has_move & row_any(touched != PAD) if len(touched) else has_move & False
    packer = _Packer(touched, np.asarray(sizes, dtype=np.int64), caps)
    for p in sorted(set(np.asarray(phase)[data].tolist())):
        moves = np.flatnonzero(data & (phase == p))
        waves[moves] = packer.pack_phase(moves)
    leader_only = np.flatnonzero(has_move & ~data)
    first = max(packer.last_wave, 1)
    waves[leader_only] = first + np.arange(len(leader_only)) // caps.max_leader_moves_per_wave
    return waves


def caps_minimum(touched: np.ndarray, sizes: np.ndarray, caps: WaveCaps) -> int:
    """Waves the caps force on a set of data moves (each rounded up): the busiest broker's moves / its cap, the
    moves / the wave cap, and the bytes / the byte cap or, when more, the moves bigger than half of it (no two of
    those share a wave)."""
    if not len(touched):
        return 0
    counts = np.unique(touched[touched != PAD], return_counts=True)[1]
    forced = -(-int(counts.max(initial=0)) // caps.max_moves_per_broker)
    if caps.max_moves_per_wave:
        forced = max(forced, -(-len(touched) // caps.max_moves_per_wave))
    if caps.max_bytes_per_wave:
        sizes = np.asarray(sizes, dtype=np.int64)
        halves = int((2 * sizes > caps.max_bytes_per_wave).sum())
        forced = max(forced, -(-int(sizes.sum()) // caps.max_bytes_per_wave), halves)
    return forced


class _Packer:
    """Waves filled so far (shared across phases): per broker the moves per wave and a mask of its full waves."""

    def __init__(self, touched: np.ndarray, sizes: np.ndarray, caps: WaveCaps) -> None:
        self.touched, self.sizes, self.caps = touched, sizes, caps
        self.state = _Fill()
        self.last_wave = 0

    def pack_phase(self, moves: np.ndarray) -> np.ndarray:
        """Waves of one phase's moves, from the last wave used so far on.

        First fit in size order; when that needs more than one wave over what the caps force, also first fit
        with the moves touching the most brokers and the busiest brokers first, with the most crowded brokers
        first, and largest first (first fit decreasing, for a byte cap); sizes break ties, and the packing with
        the fewest waves wins (the earlier one on a tie).
        """
        key = self.sizes[moves] if self.caps.move_order == SMALL_FIRST else -self.sizes[moves]
        by_size = moves[np.lexsort((moves, key))]
        waves, fill = self._first_fit(by_size)
        enough = max(self.last_wave, 1) + caps_minimum(self.touched[moves], self.sizes[moves], self.caps)
        if waves.max(initial=0) > enough:
            width, busiest, total = self._crowding(by_size)
            crowded_first = np.lexsort((np.arange(len(width)), -busiest, -width))
            largest_first = np.argsort(-self.sizes[by_size], kind="stable")  # packs bytes caps tighter
            for order in (crowded_first, np.argsort(-total, kind="stable"), largest_first):
                other, other_fill = self._first_fit(by_size[order])
                if other.max(initial=0) < waves.max(initial=0):
                    waves, fill = other, other_fill
        self.state = fill
        self.last_wave = max(self.last_wave, int(waves.max(initial=0)))
        return waves

    def _crowding(self, moves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per move: brokers it touches, the most moves of this phase on one of them, and their sum."""
        rows = self.touched[moves]
        ids, codes = np.unique(rows, return_inverse=True)
        counts = np.bincount(codes.ravel(), minlength=len(ids))
        counts[ids == PAD] = 0
        per_cell = counts[codes.reshape(rows.shape)]
        return (rows != PAD).sum(axis=1), per_cell.max(axis=1), per_cell.sum(axis=1)

    def _first_fit(self, order: np.ndarray) -> tuple[np.ndarray, _Fill]:
        """First fit of the moves in ``order`` from the last wave used on: their waves (in ascending move
        order) and the fill it leaves. Under the per-broker cap alone (the default caps) the per-wave counts
        and bytes no cap reads are not kept (a 10k-partition plan packs ~8k-14k moves)."""
        fill = self.state.copy()
        caps = self.caps
        closed = (1 << max(self.last_wave, 1)) - 1  # waves before the previous phase's last one
        out: list[int] = []
        full, byte_cap = fill.full, caps.max_bytes_per_wave
        per_broker, broker_cap, wave_cap = fill.per_broker, caps.max_moves_per_broker, caps.max_moves_per_wave
        moves, wave_bytes = fill.moves, fill.bytes
        sizes = self.sizes[order].tolist() if byte_cap is not None or wave_cap else None  # else nothing reads them
        touched = self.touched[order]  # each move's brokers listed without the padding
        for k, brokers in enumerate(matrix_rows(packed_left(touched, touched != PAD))):
            taken = closed | fill.full_waves
            for b in brokers:
                taken |= full.get(b, 0)
            wave = (~taken & (taken + 1)).bit_length() - 1
            while byte_cap is not None and sizes is not None and not fill.bytes_fit(wave, sizes[k], byte_cap):
                taken |= 1 << wave
                wave = (~taken & (taken + 1)).bit_length() - 1
            for b in brokers:  # the move's place in the wave, inline: ~20k per 10k-partition plan
                counts = per_broker.get(b)
                if counts is None:
                    counts = per_broker[b] = {}
                n = counts[wave] = counts.get(wave, 0) + 1
                if n >= broker_cap:
                    full[b] = full.get(b, 0) | 1 << wave
            if sizes is not None:
                n = moves[wave] = moves.get(wave, 0) + 1
                wave_bytes[wave] = wave_bytes.get(wave, 0) + sizes[k]
                if wave_cap and n >= wave_cap:
                    fill.full_waves |= 1 << wave
            out.append(wave)
        return np.array(out, dtype=np.int64)[np.argsort(order, kind="stable")], fill


class _Fill:
    """Moves per broker per wave, moves and bytes per wave, and the bit masks of what is full."""

    def __init__(self) -> None:
        self.per_broker: dict[int, dict[int, int]] = {}
        self.full: dict[int, int] = {}
        self.moves: dict[int, int] = {}
        self.bytes: dict[int, int] = {}
        self.full_waves = 1  # bit 0: wave 0 does not exist

    def copy(self) -> _Fill:
        other = _Fill()
        other.per_broker = {b: dict(w) for b, w in self.per_broker.items()}
        other.full, other.moves, other.bytes = dict(self.full), dict(self.moves), dict(self.bytes)
        other.full_waves = self.full_waves
        return other

    def bytes_fit(self, wave: int, size: int, cap: int | None) -> bool:
        used = self.bytes.get(wave, 0)
        return cap is None or used == 0 or used + size <= cap
