"""Quality measures of an assignment (DESIGN.md "Quality measures").

* load of a broker = sum over its replicas (leader: bytes_in + bytes_out;
  follower: bytes_in; each rate times its configurable weight) / broker weight
* load lower bound = max(total load / total eligible weight,
  largest single replica load / largest eligible weight). DESIGN.md writes the
  second term unweighted; dividing by the largest weight keeps both terms in
  the same unit (they agree when weights are 1) and keeps it a true bound.
* replica / leader spread = max - min count over eligible brokers
* rack violation = a partition spanning fewer racks than min(RF, racks)
* moves = replicas added to brokers that did not hold them; leader moves
* minimum moves = the larger of (a) replicas forced off ineligible brokers (or
  added by an RF increase) + sum over eligible brokers of max(0, kept replicas
  - ceil(weighted share)) and (b) sum over eligible brokers of max(0,
  floor(weighted share) - replicas held): every replica a broker gains is one
  move. DESIGN.md writes (a) with ceil(average); with unequal weights a broker
  of weight 2 holds twice the average in a balanced plan, so the weighted
  share keeps it a true bound (they agree when weights are 1), as for the
  load bound above
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from assigners.model import (
    PAD,
    ClusterView,
    Replicas,
    as_matrix,
    distinct_per_row,
    id_union,
    positions,
    row_contains,
    row_sum,
)
from assigners.placement import keep_valid
from assigners.policies import pinned_rack


@dataclass(frozen=True)
class AssignmentQuality:
    max_load: float
    replica_spread: int
    leader_spread: int
    rack_violations: int
    balance_score: float
    counts_balanced: bool


# (goal, hard) in priority order, highest first. A distribution goal is met when
# every eligible broker is within BALANCE_TOLERANCE of the weighted average
# (replicas and leaders also when their spread is <= 1); the load goal when the
# most loaded broker is within it of the load lower bound.
BALANCE_GOALS = (
    ("rack_aware", True),
    ("replica_distribution", False),
    ("leader_distribution", False),
    ("load_distribution", False),
)
BALANCE_TOLERANCE = 0.10


@dataclass(frozen=True)
class PlanMetrics:
    partitions: int
    replicas: int
    moves: int
    leader_moves: int
    bytes_to_move: int | None  # None: a replica of unknown size is copied
    min_moves: int
    max_load_before: float | None  # None: no throughput measured at all
    max_load_after: float | None
    load_lower_bound: float | None
    replica_spread_before: int
    replica_spread_after: int
    leader_spread_before: int
    leader_spread_after: int
    rack_violations_before: int
    rack_violations_after: int
    balance_score_before: float
    balance_score_after: float
    counts_balanced_after: bool = False  # the plan meets the replica distribution goal: min_moves applies to it
    affinity_hints_unmet: int = 0  # filled by the planner from its rule passes and the diff, not by plan_metrics
    moves_deferred: int = 0
    partitions_moved: int = 0
    waves: int = 0
    # per resource, most loaded broker / the resource's lower bound (None without any of it)
    bytes_in_ratio_before: float | None = None
    bytes_in_ratio_after: float | None = None
    bytes_out_ratio_before: float | None = None
    bytes_out_ratio_after: float | None = None
    disk_ratio_before: float | None = None
    disk_ratio_after: float | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def partition_load(leader_load: np.ndarray, follower_load: np.ndarray, rf: np.ndarray) -> np.ndarray:
    """Total load one partition puts on the cluster: its leader plus RF - 1 followers."""
    total: np.ndarray = leader_load + (rf - 1) * follower_load
    return total


def _flatten(assignment: Replicas) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(broker of each replica, partition index of it, is-leader flag)."""
    matrix = as_matrix(assignment)
    valid = matrix != PAD
    part_idx, position = np.nonzero(valid)
    return matrix[valid], part_idx, position == 0


def broker_table(
    assignment: Replicas, leader_load: np.ndarray, follower_load: np.ndarray, brokers: pd.DataFrame
) -> pd.DataFrame:
    """Per broker: replicas, leaders, absolute load and load relative to weight.

    ``brokers`` is the prepared broker frame; brokers holding replicas but
    missing from it get weight 1 (validation rejects that input earlier).
    """
    flat_brokers, part_idx, is_leader = _flatten(assignment)
    loads = np.where(is_leader, leader_load[part_idx], follower_load[part_idx]) if len(part_idx) else np.zeros(0)
    ids = id_union(brokers["broker_id"].to_numpy(dtype=np.int64), flat_brokers)
    pos = positions(ids, flat_brokers)
    known = positions(ids, brokers["broker_id"].to_numpy(dtype=np.int64))
    weight = np.ones(len(ids))
    weight[known] = brokers["weight"].to_numpy(dtype=float)
    eligible = np.zeros(len(ids), dtype=bool)
    eligible[known] = brokers["eligible"].to_numpy(dtype=bool)
    abs_load = np.bincount(pos, weights=loads, minlength=len(ids))
    return pd.DataFrame(
        {
            "broker_id": ids,
            "eligible": eligible,
            "weight": weight,
            "replicas": np.bincount(pos, minlength=len(ids)),
            "leaders": np.bincount(pos[is_leader], minlength=len(ids)),
            "load_abs": abs_load,
            "load": abs_load / weight,
        }
    )


def rack_violations(assignment: Replicas, view: ClusterView) -> int:
    """Partitions spanning fewer failure domains than min(RF, racks)."""
    if not view.rack_aware:
        return 0
    matrix = as_matrix(assignment)
    valid = matrix != PAD
    required = np.minimum(row_sum(valid), view.n_domains)
    return int((distinct_per_row(view.domain_matrix(matrix), valid) < required).sum())


def _spread(values: pd.Series) -> int:
    return int(values.max() - values.min()) if len(values) else 0


def quality(
    assignment: Replicas,
    leader_load: np.ndarray,
    follower_load: np.ndarray,
    brokers: pd.DataFrame,
    view: ClusterView,
    load_bound: float = 0.0,
    leader_racks: LeaderRacks | None = None,
) -> AssignmentQuality:
    """``leader_racks``: per partition, the racks its leader is pinned to (see :func:`pinned_leaders`)."""
    table = broker_table(assignment, leader_load, follower_load, brokers)
    on_eligible = table[table["eligible"]]
    max_load = float(table["load"].max()) if len(table) else 0.0
    violations = rack_violations(assignment, view)
    pinned = pinned_leaders(as_matrix(assignment), view, leader_racks)
    if pinned is None:
        leaders_even = _evenly_spread(on_eligible["leaders"], on_eligible["weight"])
    else:
        room = _rack_weights(on_eligible, view)
        leaders_even = _near_targets(on_eligible, _pinned_leader_targets(on_eligible, view, pinned, room))
        load_bound = max(load_bound, _pinned_load_bound(on_eligible, pinned, leader_load, room))
    met = {
        "rack_aware": violations == 0,
        "replica_distribution": _evenly_spread(on_eligible["replicas"], on_eligible["weight"]),
        "leader_distribution": leaders_even,
        "load_distribution": max_load <= (1 + BALANCE_TOLERANCE) * load_bound or load_bound == 0,
    }
    return AssignmentQuality(
        max_load=max_load,
        replica_spread=_spread(on_eligible["replicas"]),
        leader_spread=_spread(on_eligible["leaders"]),
        rack_violations=violations,
        balance_score=balance_score(met),
        counts_balanced=met["replica_distribution"],
    )


def balance_score(met: dict[str, bool]) -> float:
    """100 minus the weighted cost of the missed :data:`BALANCE_GOALS` (Cruise Control's balancedness)."""
    n = len(BALANCE_GOALS)
    weights = {goal: 1.1 ** (n - 1 - k) * (1.5 if hard else 1.0) for k, (goal, hard) in enumerate(BALANCE_GOALS)}
    missed = sum(w for goal, w in weights.items() if not met[goal])
    return round(100.0 * (1 - missed / sum(weights.values())), 1)


LeaderRacks = list[tuple[str, ...] | None]  # per partition: the racks its leader is pinned to, in order


def pinned_leaders(
    matrix: np.ndarray, view: ClusterView, leader_racks: LeaderRacks | None
) -> dict[str, list[int]] | None:
    """Per rack, the partitions ``leader_racks`` pins their leader to it (the first listed rack each has a
    replica in, as the planner leads them); None where none is pinned."""
    if not leader_racks or not any(leader_racks):
        return None
    pinned: dict[str, list[int]] = {}
    ruled = [(i, racks) for i, racks in enumerate(leader_racks) if racks]  # the rules' partitions only: a few
    for (i, racks), row in zip(ruled, matrix[[i for i, _ in ruled]].tolist()):
        if (first := pinned_rack([b for b in row if b != PAD], racks, view.domain_of)) is not None:
            pinned.setdefault(first, []).append(i)
    return pinned or None


def _water_fill(total: float, floors: dict[str, float], room: dict[str, float]) -> dict[str, float]:
    """Per rack, max(floor, level x room) with the level set so the racks add up to ``total`` (each rack holds
    at least what is pinned to it, the rest spread by room)."""
    low, high = 0.0, total / max(min(room.values()), 1e-12)
    for _ in range(60):  # bisection: the sum rises with the level
        level = (low + high) / 2
        if sum(max(floors.get(r, 0.0), level * w) for r, w in room.items()) > total:
            high = level
        else:
            low = level
    return {r: max(floors.get(r, 0.0), low * w) for r, w in room.items()}


def _rack_weights(table: pd.DataFrame, view: ClusterView) -> dict[str, float]:
    racks = table["broker_id"].map(view.domain_of)
    return {str(r): float(w) for r, w in table["weight"].groupby(racks).sum().items()}


def _pinned_leader_targets(
    table: pd.DataFrame, view: ClusterView, pinned: dict[str, list[int]], room: dict[str, float]
) -> np.ndarray:
    """Each eligible broker's even share of the leaders where ``pinned`` leaders must sit in their racks: the
    racks water-filled by weight (``room``: :func:`_rack_weights`) above what is pinned to them, each rack's by
    its brokers' weights. Per broker in plain lists, not pandas maps (a 50-broker table: ~1 ms a call)."""
    per_rack = _water_fill(float(table["leaders"].sum()), {r: float(len(n)) for r, n in pinned.items()}, room)
    racks = [view.domain_of[b] for b in table["broker_id"].tolist()]
    shares = np.array([per_rack[r] for r in racks], dtype=float) * table["weight"].to_numpy(dtype=float)
    targets: np.ndarray = shares / np.array([room[r] for r in racks], dtype=float)
    return targets


def _near_targets(table: pd.DataFrame, targets: np.ndarray) -> bool:
    """Every broker's leaders within 1 (rounding) or the tolerance of its target."""
    off = np.abs(table["leaders"].to_numpy(dtype=float) - targets)
    return bool((off <= np.maximum(1.0, BALANCE_TOLERANCE * targets)).all())


def _pinned_load_bound(
    table: pd.DataFrame, pinned: dict[str, list[int]], leader_load: np.ndarray, room: dict[str, float]
) -> float:
    """The load bound where ``pinned`` leaders must sit in their racks: each rack carries at least its pinned
    leaders' load, the rest water-filled by weight (``room``: :func:`_rack_weights`); the highest rack per unit
    of weight (a broker of it carries at least that)."""
    floors = {r: float(leader_load[parts].sum()) for r, parts in pinned.items()}
    per_rack = _water_fill(float(table["load_abs"].sum()), floors, room)
    return max(per_rack[r] / room[r] for r in room)


def _evenly_spread(counts: pd.Series, weights: pd.Series) -> bool:
    if len(counts) < 2 or _spread(counts) <= 1:
        return True
    share = counts.to_numpy(dtype=float) / weights.to_numpy(dtype=float)
    mean = counts.sum() / weights.sum()
    return bool((np.abs(share - mean) <= BALANCE_TOLERANCE * mean).all())


def load_lower_bound(
    leader_load: np.ndarray, follower_load: np.ndarray, rf: np.ndarray, brokers: pd.DataFrame
) -> float:
    weights = brokers["weight"].to_numpy(dtype=float)[brokers["eligible"].to_numpy(dtype=bool)]
    return lower_bound_per_weight(leader_load, follower_load, rf, weights)


def lower_bound_per_weight(
    leader_load: np.ndarray, follower_load: np.ndarray, rf: np.ndarray, weights: np.ndarray
) -> float:
    """:func:`load_lower_bound` over the eligible brokers' ``weights`` (or capacities) alone."""
    if not len(weights) or not len(leader_load):
        return 0.0
    total = float(partition_load(leader_load, follower_load, rf).sum())
    return max(total / float(weights.sum()), float(leader_load.max()) / float(weights.max()))


def moves_between(before: Replicas, after: Replicas, size_bytes: np.ndarray) -> tuple[int, int, int]:
    """(replicas added, leader changes, bytes to move) going from ``before`` to ``after``."""
    old, new = as_matrix(before), as_matrix(after)
    if not len(new):
        return 0, 0, 0
    added = (new != PAD) & ~row_contains(new, old)
    per_partition = row_sum(added)
    leader_moves = (old[:, 0] != PAD) & (new[:, 0] != PAD) & (old[:, 0] != new[:, 0])
    return int(per_partition.sum()), int(leader_moves.sum()), int((per_partition * size_bytes).sum())


def minimum_moves(before: Replicas, rf: np.ndarray, view: ClusterView) -> int:
    """Lower bound on the replicas any valid balanced plan must add (see module docstring).

    "Forced off" counts replicas on ineligible brokers, beyond a lowered RF,
    crowding racks against the rack rule, and missing after an RF increase.
    The excess over ceil(average) per eligible broker counts only replicas
    of partitions where nothing is forced (elsewhere which replica goes is
    the plan's choice), so this stays a true lower bound whenever a
    balanced plan exists. The average is each broker's weighted share, of
    its rack's replicas where the rack rule pins each rack's total
    (:meth:`ClusterView.rack_shares`): there no plan evens the cluster, and
    the balanced plans are those that even each rack.
    """
    if not view.eligible:
        return 0
    old = as_matrix(before)
    eligible = np.asarray(view.eligible, dtype=np.int64)
    on_eligible = (old != PAD) & np.isin(old, eligible)
    kept_len = row_sum(on_eligible)
    spans = distinct_per_row(view.domain_matrix(old), on_eligible)
    required = view.required_domains_each(rf)
    needs_choice = (kept_len > rf) | (spans + (rf - kept_len) < required)
    counts = np.bincount(positions(eligible, old[on_eligible & ~needs_choice[:, None]]), minlength=len(eligible))
    kept_total = int(kept_len[~needs_choice].sum())
    # How many stay is fixed, which ones is the plan's choice: they count as forced only, not
    # towards any broker's excess, so the bound stays a true lower bound. Without an RF decrease,
    # keep_valid drops one replica of a crowded rack per missing rack, so the count is arithmetic.
    distinct = distinct_per_row(old, on_eligible)
    crowded = needs_choice & (distinct <= rf)
    kept_total += int((distinct - np.maximum(required - (spans + rf - distinct), 0))[crowded].sum())
    for row, target in zip(old[needs_choice & ~crowded].tolist(), rf[needs_choice & ~crowded].tolist()):
        kept_total += len(keep_valid([b for b in row if b in view.eligible_set], int(target), view))
    forced = int(rf.sum()) - kept_total
    share = _weighted_share(int(rf.sum()), eligible, view)
    by_rack = view.rack_shares(rf, dict.fromkeys(view.domain_of.values(), len(rf)))  # one replica a partition each
    if by_rack is not None:
        share = np.array([by_rack[int(b)] for b in eligible])
    ceiling = np.ceil(share - 1e-9).astype(np.int64)
    return max(forced + int(np.maximum(counts - ceiling, 0).sum()), _deficit(old, share, eligible))


def _weighted_share(total: int, eligible: np.ndarray, view: ClusterView) -> np.ndarray:
    """Each eligible broker's share of ``total`` replicas by weight (the average when weights are equal)."""
    weight = np.array([view.weight_of[int(b)] for b in eligible], dtype=float)
    share: np.ndarray = total * weight / weight.sum()
    return share


def _deficit(old: np.ndarray, share: np.ndarray, eligible: np.ndarray) -> int:
    """Replicas the brokers below the floor of their weighted share must gain: one move each."""
    held = np.bincount(positions(eligible, old[np.isin(old, eligible)]), minlength=len(eligible))
    floor = np.floor(share + 1e-9).astype(np.int64)
    return int(np.maximum(floor - held, 0).sum())


def resource_ratios(partitions: pd.DataFrame, assignment: Replicas, brokers: pd.DataFrame) -> dict[str, float | None]:
    """Per resource, the most loaded broker divided by the resource's lower bound (1.0 is perfect).

    Resources (Cruise Control's distribution goals, measured on raw rates):
    ``bytes_in`` of every replica, ``bytes_out`` of the leaders, and ``disk``
    (``size_bytes``) per ``disk_capacity_bytes`` when every eligible broker
    has one, else per weight. The bound is :func:`load_lower_bound` of that
    resource: max(total / total capacity, largest replica / largest capacity).
    """
    matrix = as_matrix(assignment)
    rf = row_sum(matrix != PAD)
    bytes_in = partitions["bytes_in"].to_numpy(dtype=float)
    sizes = partitions["size_bytes"].to_numpy(dtype=float)
    capacity = pd.to_numeric(brokers["disk_capacity_bytes"], errors="coerce")
    by_disk = brokers.assign(weight=capacity) if capacity[brokers["eligible"]].notna().all() else brokers
    resources = {
        "bytes_in": (bytes_in, bytes_in, brokers),
        "bytes_out": (partitions["bytes_out"].to_numpy(dtype=float), np.zeros(len(matrix)), brokers),
        "disk": (sizes, sizes, by_disk),
    }
    # one flattening of the plan for every resource (as broker_table does per call)
    flat_brokers, part_idx, is_leader = _flatten(matrix)
    ids = id_union(brokers["broker_id"].to_numpy(dtype=np.int64), flat_brokers)
    pos = positions(ids, flat_brokers)
    known = positions(ids, brokers["broker_id"].to_numpy(dtype=np.int64))
    out: dict[str, float | None] = {}
    for name, (lead, follow, capacities) in resources.items():
        bound = load_lower_bound(lead, follow, rf, capacities)
        weight = np.ones(len(ids))  # brokers missing from the frame weigh 1, as in broker_table
        weight[known] = capacities["weight"].to_numpy(dtype=float)
        amounts = np.where(is_leader, lead[part_idx], follow[part_idx]) if len(part_idx) else np.zeros(0)
        load = np.bincount(pos, weights=amounts, minlength=len(ids)) / weight
        out[name] = float(load.max()) / bound if bound > 0 and len(ids) else None
    return out


def plan_metrics(
    partitions: pd.DataFrame,
    before: Replicas,
    after: Replicas,
    brokers: pd.DataFrame,
    view: ClusterView,
    leader_racks: LeaderRacks | None = None,
) -> PlanMetrics:
    """All plan_runs quality columns for going from ``before`` to ``after``; ``leader_racks``: see
    :func:`quality` (the balance score then judges leaders and load as even as the pinning lets them be)."""
    before, after = as_matrix(before), as_matrix(after)
    leader_load = partitions["leader_load"].to_numpy(dtype=float)
    follower_load = partitions["follower_load"].to_numpy(dtype=float)
    rf = partitions["rf"].to_numpy(dtype=np.int64)
    bound = load_lower_bound(leader_load, follower_load, rf, brokers)
    q_before = quality(before, leader_load, follower_load, brokers, view, bound, leader_racks)
    q_after = quality(after, leader_load, follower_load, brokers, view, bound, leader_racks)
    moves, leader_moves, moved_bytes = moves_between(before, after, partitions["size_bytes"].to_numpy(dtype=np.int64))
    ratios_before = resource_ratios(partitions, before, brokers)
    ratios_after = resource_ratios(partitions, after, brokers)
    return PlanMetrics(
        partitions=len(after),
        replicas=int((after != PAD).sum()),
        moves=moves,
        leader_moves=leader_moves,
        bytes_to_move=moved_bytes,
        min_moves=minimum_moves(before, rf, view),
        max_load_before=q_before.max_load,
        max_load_after=q_after.max_load,
        load_lower_bound=bound,
        replica_spread_before=q_before.replica_spread,
        replica_spread_after=q_after.replica_spread,
        leader_spread_before=q_before.leader_spread,
        leader_spread_after=q_after.leader_spread,
        rack_violations_before=q_before.rack_violations,
        rack_violations_after=q_after.rack_violations,
        balance_score_before=q_before.balance_score,
        balance_score_after=q_after.balance_score,
        counts_balanced_after=q_after.counts_balanced,
        bytes_in_ratio_before=ratios_before["bytes_in"],
        bytes_in_ratio_after=ratios_after["bytes_in"],
        bytes_out_ratio_before=ratios_before["bytes_out"],
        bytes_out_ratio_after=ratios_after["bytes_out"],
        disk_ratio_before=ratios_before["disk"],
        disk_ratio_after=ratios_after["disk"],
    )
