"""Seeded cluster scenarios that need rebalancing, shared by the oracle tests and ``make bench``.

Each returns ``(brokers, partitions)`` frames as the planner takes them, the
live layout legal unless the scenario is about breaking it:

* ``drifted``: replicas piled on a few brokers per rack (popularity skew);
* ``skewed``: Zipf-hot topics on an even, random layout;
* ``broker_added``: an even layout plus empty new brokers;
* ``broker_removed``: an even layout and one broker dead;
* ``rf_gt_racks``: RF 3 over 2 racks;
* ``uneven_racks``: racks of 50%, 25% and 25% of the brokers;
* ``capped``: ``max_partitions`` 5% above the even share;
* ``racks_544`` / ``racks_633``: racks of 5:4:4 and 6:3:3 brokers (issue 38:
  the rack rule pins each rack's share of every RF-3 partition);
* ``hot``: an even layout where 2-5% of the partitions run 20-50x the
  median rate (issue 38: a few partitions dominate the load).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.unit.clusters import brokers_frame, partitions_frame

SCENARIOS = ("drifted", "skewed", "broker_added", "broker_removed", "rf_gt_racks", "uneven_racks", "capped")
SHAPES = ("racks_544", "racks_633", "hot")  # issue 38's shapes, kept apart so the figures above stay as they were
RACK_SHARES = {"racks_544": (5, 4, 4), "racks_633": (6, 3, 3)}


def scenario(
    kind: str, brokers: int, partitions: int, seed: int = 0, racks: int = 3
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng([seed, (*SCENARIOS, *SHAPES).index(kind)])
    ids = list(range(1, brokers + 1))
    if kind == "rf_gt_racks":
        racks = 2
    rack_of = [f"r{i % racks}" for i in range(brokers)]
    if kind == "uneven_racks":
        half = brokers // 2
        rack_of = ["r0"] * half + [f"r{1 + i % 2}" for i in range(brokers - half)]
    if kind in RACK_SHARES:
        rack_of = _racks_in_shares(brokers, RACK_SHARES[kind])
    states = ["active"] * brokers
    holding = ids
    if kind == "broker_added":
        holding = ids[: max(3, brokers - max(1, brokers // 4))]
    if kind == "broker_removed":
        states[brokers // 2] = "dead"
    popularity = rng.dirichlet(np.full(brokers, 0.5 if kind == "drifted" else 50.0))
    if kind in RACK_SHARES:  # an even layout over racks of unequal size still drifts a little
        popularity = rng.dirichlet(np.full(brokers, 5.0))
    layout = [_rack_valid(rng, holding, rack_of, ids, popularity, 3) for _ in range(partitions)]
    n_topics = max(2, partitions // 10)
    topic_heat = rng.zipf(1.3 if kind == "skewed" else 3.0, n_topics).clip(max=50).astype(float)
    topic = rng.integers(0, n_topics, partitions)
    rates = topic_heat[topic] * rng.lognormal(0.0, 0.3, partitions) * 100.0
    if kind == "hot":
        rates = rng.lognormal(0.0, 0.3, partitions) * 100.0
        hot = rng.choice(partitions, size=max(1, round(partitions * rng.uniform(0.02, 0.05))), replace=False)
        rates[hot] *= rng.uniform(20.0, 50.0, len(hot))
    numbers = _numbers(topic)
    frame_b = brokers_frame(ids, rack_of, states)
    if kind == "capped":
        frame_b = frame_b.assign(max_partitions=[int(np.ceil(partitions * 3 / brokers * 1.05))] * brokers)
    parts = partitions_frame(layout, [f"t{t:03d}" for t in topic], numbers, bytes_in=rates.tolist())
    parts["size_bytes"] = (rates * 3600 * rng.uniform(0.5, 1.5, partitions)).astype(np.int64)
    return frame_b, parts


def _racks_in_shares(brokers: int, shares: tuple[int, ...]) -> list[str]:
    """Rack names for ``brokers`` brokers, racks sized in proportion to ``shares`` (what rounding leaves over
    goes to the first racks), brokers interleaved across racks as ids are handed out."""
    sizes = [brokers * s // sum(shares) for s in shares]
    for d in range(brokers - sum(sizes)):
        sizes[d % len(sizes)] += 1
    left, out = list(sizes), []
    while len(out) < brokers:
        for d in range(len(sizes)):
            if left[d]:
                out.append(f"r{d}")
                left[d] -= 1
    return out


def _rack_valid(
    rng: np.random.Generator, holding: list[int], rack_of: list[str], ids: list[int], popularity: np.ndarray, rf: int
) -> list[int]:
    """``rf`` distinct brokers of ``holding``, drawn by popularity, one per rack while racks last."""
    weights = np.array([popularity[ids.index(b)] for b in holding])
    order = [holding[i] for i in rng.choice(len(holding), size=len(holding), replace=False, p=weights / weights.sum())]
    chosen: list[int] = []
    for relax in (False, True):
        for b in order:
            used = {rack_of[ids.index(c)] for c in chosen}
            if len(chosen) < rf and b not in chosen and (relax or rack_of[ids.index(b)] not in used):
                chosen.append(b)
    return chosen


def _numbers(topic: np.ndarray) -> list[int]:
    """Partition numbers 0, 1, 2 ... within each topic, in row order."""
    seen: dict[int, int] = {}
    out = []
    for t in topic.tolist():
        out.append(seen.get(t, 0))
        seen[t] = out[-1] + 1
    return out
