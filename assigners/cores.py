"""Per-core placement inside each broker (Redpanda's partition allocator), after any strategy.

Within a broker every replica goes to its least-loaded core; core 0 also
runs the broker's own work, so it counts :data:`CORE0_RESERVE` partitions
more. ``Constraints.core_capacity`` partitions per core is a hard cap: the
strategies already see ``cores x capacity - reserve`` as the broker's
``max_partitions`` (:meth:`ClusterView.from_brokers`), so a cluster that
fits is always placed and one that does not fails as a whole before any
core is chosen.

Replicas that stay on their broker keep their baseline core while that core
is below its even share, so re-planning moves few replicas between cores and
a broker that gained cores still ends up even.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from assigners.errors import CapacityExhaustedError
from assigners.model import CORE0_RESERVE, ClusterView


def core_count(view: ClusterView, broker: int) -> int:
    """Cores of a broker; a broker row without ``cores`` has one (DESIGN.md default)."""
    return max(int(view.cores_of.get(broker, 1)), 1)


def assign_cores(
    assignment: list[list[int]],
    baseline: Sequence[Sequence[int]],
    baseline_cores: Sequence[Sequence[int] | None],
    view: ClusterView,
    capacity: int,
) -> list[list[int]]:
    """The core of every replica, aligned with ``assignment``."""
    totals: dict[int, int] = {}
    for row in assignment:
        for b in row:
            totals[b] = totals.get(b, 0) + 1
    load = {b: [CORE0_RESERVE] + [0] * (core_count(view, b) - 1) for b in totals}
    share = {b: min(capacity, math.ceil((n + CORE0_RESERVE) / len(load[b]))) for b, n in totals.items()}
    cores: list[list[int]] = [[-1] * len(row) for row in assignment]
    for i, row in enumerate(assignment):  # 1) replicas that stay keep their core while it is below its share
        kept_cores = baseline_cores[i]
        if kept_cores is None or len(kept_cores) != len(baseline[i]):
            continue
        before = dict(zip(baseline[i], kept_cores))
        for k, b in enumerate(row):
            core = before.get(b)
            if core is not None and 0 <= core < len(load[b]) and load[b][core] < share[b]:
                load[b][core] += 1
                cores[i][k] = int(core)
    heaps = {b: [(n, core) for core, n in enumerate(counts)] for b, counts in load.items()}
    for heap in heaps.values():
        heapq.heapify(heap)
    for i, row in enumerate(assignment):  # 2) the rest on the least-loaded core, lowest core on ties
        for k, b in enumerate(row):
            if cores[i][k] >= 0:
                continue
            n, core = heapq.heappop(heaps[b])
            if n >= capacity:
                raise CapacityExhaustedError(
                    f"core_capacity: broker {b} has {totals[b]} replicas for {len(load[b])} cores "
                    f"of {capacity} partitions (core 0 keeps {CORE0_RESERVE} for itself)",
                    table="brokers",
                    rows=[f"broker_id={b} cores={len(load[b])}"],
                )
            heapq.heappush(heaps[b], (n + 1, core))
            cores[i][k] = core
    return cores
