"""Hash-based placement: a consistent-hash ring and rendezvous hashing.

Both place a partition by hashing its name against the brokers, so the plan
depends only on the set of brokers: when one of N brokers joins or leaves,
about 1/N of the replicas move, and re-planning an unchanged cluster moves
nothing. The hashes are stable across processes (blake2b for names, a
splitmix64 mix in numpy for the many derived keys), never Python's ``hash()``.

* ``consistent_hash``: every eligible broker owns ``weight x vnodes_per_core``
  points on a 64-bit ring (weight defaults to cores). A partition's replicas
  are the owners met walking clockwise from its key, skipping brokers already
  used, racks already used (while unused racks remain) and full brokers.
  ``bounded_load_epsilon`` also skips brokers above (1 + eps) x their
  weight-proportional share of the replicas (consistent hashing with bounded
  loads).
* ``rendezvous``: highest-random-weight hashing, weighted as -w / ln(u); the
  brokers are taken in score order under the same skipping rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from assigners.model import ClusterView, Constraints, Strategy, StrategyOption, assignment_frame, stable_hash
from assigners.placement import Usage, raise_no_room

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """A stable 64-bit mix of every element (the splitmix64 finaliser)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def partition_keys(partitions: pd.DataFrame, salt: str) -> np.ndarray:
    """A stable 64-bit key per partition: blake2b of the topic mixed with the partition number."""
    topics, codes = np.unique(partitions["topic"].to_numpy(dtype=str), return_inverse=True)
    topic_hash = np.asarray([stable_hash(salt, t) for t in topics], dtype=np.uint64)
    with np.errstate(over="ignore"):
        return splitmix64(topic_hash[codes] ^ splitmix64(partitions["partition"].to_numpy(dtype=np.uint64)))


def _bounded_caps(view: ClusterView, total: int, epsilon: float | None) -> dict[int, float]:
    if epsilon is None:
        return {}
    weight = sum(view.weight_of[b] for b in view.eligible)
    return {b: math.ceil((1 + epsilon) * total * view.weight_of[b] / weight) for b in view.eligible}


class _Picker:
    """Takes brokers in a partition's preference order under the hard rules and the load bound."""

    def __init__(self, view: ClusterView, usage: Usage, bound: dict[int, float]) -> None:
        self.view, self.usage, self.bound = view, usage, bound

    def pick(self, i: int, rf: int, preference: Iterable[int]) -> list[int]:
        """The first ``rf`` legal brokers of ``preference``.

        First pass: unused racks only (while any remain) and within the load
        bound; later passes relax the rack preference, then the bound, never
        the rack rule or the caps.
        """
        view, usage = self.view, self.usage
        required = view.required_domains(rf)
        chosen: list[int] = []
        used: set[str] = set()
        for relax_rack, relax_bound in ((False, False), (True, False), (False, True), (True, True)):
            for b in preference:
                if len(chosen) == rf:
                    return chosen
                if b in chosen or not usage.room_for(i, b):
                    continue
                if not relax_bound and usage.count[b] + 1 > self.bound.get(b, math.inf):
                    continue
                if view.domain_of[b] in used:
                    prefers_new = view.rack_aware or len(used) < required
                    if not relax_rack and prefers_new and len(used) < view.n_domains:
                        continue
                    if len(used) + (rf - len(chosen) - 1) < required:
                        continue  # an old rack now would leave too few slots for the rack rule
                chosen.append(b)
                used.add(view.domain_of[b])
                usage.add(i, b)
        if len(chosen) < rf:
            raise_no_room(i, chosen, usage)
        return chosen


def _ring(view: ClusterView, vnodes_per_core: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted ring points, owner of each point)."""
    owners, points = [], []
    # vnodes per weight unit: vnodes_per_core x the average cores, so a broker of average weight
    # gets cores x vnodes_per_core points and the others proportionally more or fewer
    weights = [view.weight_of[b] for b in view.eligible]
    cores = [view.cores_of.get(b, 1.0) for b in view.eligible]
    unit = vnodes_per_core * (sum(cores) / len(cores)) / (sum(weights) / len(weights)) if weights else 0.0
    for b in view.eligible:
        count = max(1, round(view.weight_of[b] * unit))
        base = np.uint64(stable_hash("ring", seed, b))
        with np.errstate(over="ignore"):
            points.append(splitmix64(base + np.arange(count, dtype=np.uint64)))
        owners.append(np.full(count, b, dtype=np.int64))
    if not points:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    all_points, all_owners = np.concatenate(points), np.concatenate(owners)
    order = np.lexsort((all_owners, all_points))
    return all_points[order], all_owners[order]


def assign_ring(
    brokers: pd.DataFrame,
    partitions: pd.DataFrame,
    constraints: Constraints,
    seed: int = 0,
) -> pd.DataFrame:
    """Consistent hashing on a weighted ring of virtual nodes (options in ``constraints``)."""
    view = ClusterView.from_brokers(brokers, constraints)
    points, owners = _ring(view, constraints.vnodes_per_core, seed)
    rf = partitions["rf"].to_numpy()
    usage = Usage([], partitions["size_bytes"].to_numpy(), view)
    picker = _Picker(view, usage, _bounded_caps(view, int(rf.sum()), constraints.bounded_load_epsilon))
    starts = np.searchsorted(points, partition_keys(partitions, f"ring:{seed}"))
    replicas = []
    for i, (start, target) in enumerate(zip(starts.tolist(), rf.tolist())):
        replicas.append(picker.pick(i, target, _RingWalk(owners, start)))
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


class _RingWalk:
    """Distinct owners clockwise from ``start``, walked only as far as the picker reads.

    Most partitions are placed from the first few owners; walking the whole
    ring up front would cost every partition a pass over all brokers. The
    owners found so far are kept, so the picker's later passes reread them.
    """

    def __init__(self, owners: np.ndarray, start: int) -> None:
        self.owners, self.pos, self.window = owners, start, 16
        self.scanned = 0
        self.found: list[int] = []
        self.seen: set[int] = set()

    def __iter__(self) -> Iterator[int]:
        k = 0
        while True:
            while k >= len(self.found) and self.scanned < len(self.owners):
                self._scan_more()
            if k >= len(self.found):
                return
            yield self.found[k]
            k += 1

    def _scan_more(self) -> None:
        idx = (self.pos + np.arange(self.window)) % len(self.owners)
        for b in self.owners[idx].tolist():
            if b not in self.seen:
                self.seen.add(b)
                self.found.append(b)
        self.pos += self.window
        self.scanned += self.window
        self.window *= 2


def _top_brokers(scores: np.ndarray, ids: np.ndarray, k: int) -> list[list[int]]:
    """Per row, the ``k`` best-scoring brokers, best first (ties: lower position), without a full sort."""
    if k >= scores.shape[1]:
        return ids[np.argsort(-scores, axis=1, kind="stable")].tolist()  # type: ignore[no-any-return]
    top = np.sort(np.argpartition(-scores, k - 1, axis=1)[:, :k], axis=1)  # positions, ascending
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
    return ids[np.take_along_axis(top, order, axis=1)].tolist()  # type: ignore[no-any-return]


class _Preference:
    """A partition's brokers by rendezvous score: the head, then (only if a pick gets there) the rest."""

    def __init__(self, head: list[int], scores: np.ndarray, ids: np.ndarray) -> None:
        self.head, self.scores, self.ids = head, scores, ids
        self.rest: list[int] | None = None

    def __iter__(self) -> Iterator[int]:
        yield from self.head
        if len(self.head) == len(self.ids):
            return
        if self.rest is None:
            taken = set(self.head)
            ranked = self.ids[np.argsort(-self.scores, kind="stable")].tolist()
            self.rest = [b for b in ranked if b not in taken]
        yield from self.rest


def assign_rendezvous(
    brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0
) -> pd.DataFrame:
    """Weighted rendezvous (highest random weight) hashing."""
    view = ClusterView.from_brokers(brokers, constraints)
    ids = np.asarray(view.eligible, dtype=np.int64)
    weights = np.asarray([view.weight_of[b] for b in view.eligible], dtype=float)
    salts = np.asarray([stable_hash("rendezvous", seed, b) for b in view.eligible], dtype=np.uint64)
    keys = partition_keys(partitions, f"rendezvous:{seed}")
    rf = partitions["rf"].to_numpy()
    usage = Usage([], partitions["size_bytes"].to_numpy(), view)
    picker = _Picker(view, usage, {})
    replicas: list[list[int]] = []
    chunk = max(1, 2_000_000 // max(len(ids), 1))
    head = min(len(ids), 4 * int(rf.max(initial=1)) + 8)  # picks rarely look past the first few
    for lo in range(0, len(keys), chunk):
        block = keys[lo : lo + chunk]
        with np.errstate(over="ignore"):
            mixed = splitmix64(block[:, None] ^ salts[None, :])
        unit = ((mixed >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)  # in (0, 1)
        scores = -weights[None, :] / np.log(unit)
        for j, row in enumerate(_top_brokers(scores, ids, head)):
            replicas.append(picker.pick(lo + j, int(rf[lo + j]), _Preference(row, scores[j], ids)))
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


RING = Strategy(
    "consistent_hash",
    assign_ring,
    options=(
        StrategyOption("vnodes_per_core", "vnodes_per_core", int, 1, legacy="vnodes_per_core"),
        StrategyOption(
            "bounded_load_epsilon",
            "bounded_load_epsilon",
            float,
            0,
            strict=True,
            optional=True,
            legacy="bounded_load_epsilon",
        ),
    ),
)
RENDEZVOUS = Strategy("rendezvous", assign_rendezvous)
