"""Rack-aware round-robin placement (Kafka ``AdminUtils.assignReplicasToBrokers``).

Differences from Kafka, each for a reason:

* The round-robin counter runs over the whole cluster (topics sorted by name,
  partitions by number) instead of restarting per topic at a random broker,
  so leaders and replicas stay balanced across the cluster, not only within
  each topic.
* Start index and follower shift come from a seeded stable hash, not
  ``Random``, so the same seed gives the same plan.
* A final count-balancing pass (:mod:`assigners.balance`) evens out the last
  partial wrap, which Kafka leaves uneven.
* Broker caps (``max_partitions``, disk) are honoured by moving what the
  pattern puts above them onto the emptiest legal brokers.
"""

from __future__ import annotations

import pandas as pd

from assigners.balance import settle
from assigners.errors import InsufficientBrokersError
from assigners.model import ClusterView, Constraints, Strategy, assignment_frame, stable_hash


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """Assign every partition's replicas round-robin over the rack-alternated broker list.

    Parameters
    ----------
    brokers
        Prepared brokers (:func:`assigners.model.prepare_brokers`).
    partitions
        Prepared partitions (:func:`assigners.model.prepare_partitions`), sorted.
    constraints
        Excluded brokers and the rack rule are honoured here; eligibility is
        already resolved in ``brokers``.
    seed
        Picks the start broker and the first follower shift.

    Returns
    -------
    pandas.DataFrame
        ``topic, partition, replicas``; ``replicas[0]`` is the preferred leader.

    Examples
    --------
    >>> from assigners.model import prepare_brokers, prepare_partitions
    >>> b = prepare_brokers(pd.DataFrame({"broker_id": [1, 2, 3], "rack": ["a", "b", "c"],
    ...     "state": ["active"] * 3}), Constraints())
    >>> p = prepare_partitions(pd.DataFrame({"topic": ["t"] * 3, "partition": [0, 1, 2],
    ...     "replicas": [[1, 2]] * 3}), Constraints())
    >>> sorted(r[0] for r in assign(b, p, Constraints())["replicas"])
    [1, 2, 3]
    """
    view = ClusterView.from_brokers(brokers, constraints)
    order = view.rack_alternated()
    if not order:
        return assignment_frame([], [], [])
    start = stable_hash("round_robin.start", seed) % len(order)
    shift = stable_hash("round_robin.shift", seed) % len(order)
    replicas = [_place(i, int(rf), order, view, start, shift) for i, rf in enumerate(partitions["rf"])]
    settle(replicas, partitions, view)  # caps, missing replicas, even counts and leaders
    return assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)


def _place(i: int, rf: int, order: list[int], view: ClusterView, start: int, shift: int) -> list[int]:
    """Replicas of the i-th partition: leader at i + start, followers shifted once per wrap."""
    n = len(order)
    wrap_shift = shift + i // n
    # Kafka multiplies the shift by the rack count when rack-aware so that the
    # second replica keeps landing in the next rack of the alternated list.
    domains = view.n_domains if view.rack_aware else n
    first = (i + start) % n
    leader = order[first]
    chosen = [leader]
    used_domains = {view.domain_of[leader] if view.rack_aware else leader}
    k = 0
    while len(chosen) < rf:
        if k > 2 * n:
            raise InsufficientBrokersError(f"no legal broker left for replica {len(chosen) + 1} of partition #{i}")
        offset = 1 + (wrap_shift * domains + k) % (n - 1)
        broker = order[(first + offset) % n]
        k += 1
        domain = view.domain_of[broker] if view.rack_aware else broker
        if broker in chosen or (domain in used_domains and len(used_domains) < domains):
            continue
        chosen.append(broker)
        used_domains.add(domain)
    return chosen


STRATEGY = Strategy("round_robin", assign)
