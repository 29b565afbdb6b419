"""The live layout as a snapshot gives it, read honestly: reassignments in flight, replica counts that differ
within a topic, and partitions that drifted away from the plan in force.

Pure pandas, run by the planner before anything else looks at ``replicas``:

* **In flight** (Kafka's KIP-455): while a partition is reassigned, Kafka lists the union of both ends as its
  ``Replicas``, with ``Adding Replicas`` and ``Removing Replicas`` beside it. The target is ``replicas`` minus
  ``removing_replicas`` (in Kafka's order: the target's brokers come first), the origin ``replicas`` minus
  ``adding_replicas``. A plan starts from the target, where Kafka is already taking the partition, so its
  replication factor is the target's and its moves begin where the reassignment ends; the notes name every such
  partition. Planning from the union would plan one replica too many, and ``export`` would make Kafka keep it.
* **Replica counts that differ within a topic** are what a snapshot cut inside a replica list looks like (Kafka
  creates a topic's partitions with one replication factor). A plan never changes a partition's count unless
  ``[constraints.replication_factor]`` asks, so each is planned at its own count, and the notes name them.
* **Drift**: a partition of the plan in force that is at neither its baseline (where that plan started) nor its
  target. That plan no longer describes the cluster: the next plan writes a new version starting from where
  the partition is, so ``export`` works again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from assigners.errors import InvalidInputError
from assigners.model import PAD, replica_matrix, row_all, sorted_rows

IN_FLIGHT = ("adding_replicas", "removing_replicas")
SHOWN = 20  # partitions named in a note about counts; in-flight ones are all named


def _brokers(value: Any) -> list[int]:
    """A replica list cell as plain ints (None, NaN and empty cells are no brokers)."""
    if value is None or not hasattr(value, "__iter__"):  # None, NaN, pd.NA
        return []
    return [int(b) for b in value]


def _ids(brokers: Sequence[int]) -> str:
    return ",".join(str(int(b)) for b in brokers)


def settle_in_flight(partitions: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The partitions with each reassignment in flight replaced by its target, and the note naming them.

    Raises :class:`InvalidInputError` (table ``partitions``) for adding or removing brokers outside
    ``replicas``, or a removal that leaves no replica.

    >>> frame = pd.DataFrame({"topic": ["t", "t"], "partition": [0, 1], "replicas": [[1, 2, 4, 3], [5, 6]],
    ...                       "adding_replicas": [[4], None], "removing_replicas": [[3], None]})
    >>> settled, notes = settle_in_flight(frame)
    >>> settled["replicas"].tolist()
    [[1, 2, 4], [5, 6]]
    >>> head, named = notes[0].split(": ")
    >>> head.startswith("1 partition mid-reassignment in the snapshot, planned from its in-flight target"), named
    (True, 't:0 1,2,4,3 -> 1,2,4')
    """
    columns = [partitions[c].tolist() for c in IN_FLIGHT if c in partitions]
    if not columns:
        return partitions, []
    moving = np.flatnonzero(sum((_lengths(c) for c in columns), np.zeros(len(partitions), dtype=np.int64)))
    if not len(moving):  # the usual snapshot: one pass over two columns of empty lists
        return partitions, []
    adding, removing = (partitions.get(c, pd.Series([None] * len(partitions))).tolist() for c in IN_FLIGHT)
    replicas = partitions["replicas"].tolist()
    bad, named, targets = [], [], list(replicas)
    for i in moving.tolist():
        listed, added, removed = _brokers(replicas[i]), _brokers(adding[i]), _brokers(removing[i])
        name = f"{partitions['topic'].iat[i]}:{int(partitions['partition'].iat[i])}"
        target = in_flight_target(listed, removed)
        if not set(added) <= set(listed) or not set(removed) <= set(listed) or not target:
            bad.append(f"{name} replicas={_ids(listed)} adding={_ids(added)} removing={_ids(removed)}")
            continue
        targets[i] = target
        named.append(f"{name} {_ids(listed)} -> {_ids(target)}")
    if bad:
        raise InvalidInputError(
            "adding / removing replicas not among the replicas, or removing all of them", table="partitions", rows=bad
        )
    settled = partitions.copy()
    settled["replicas"] = targets
    noun = "partition" if len(named) == 1 else "partitions"
    return settled, [
        f"{len(named)} {noun} mid-reassignment in the snapshot, planned from {'its' if len(named) == 1 else 'their'} "
        f"in-flight target (Replicas minus Removing Replicas): {'; '.join(named)}"
    ]


def in_flight_target(replicas: Sequence[int], removing: Sequence[int] | None) -> list[int]:
    """Where a reassignment in flight takes the partition: ``replicas`` minus ``removing``, in Kafka's order.

    >>> in_flight_target([1, 2, 4, 3], [3]), in_flight_target([5, 6], None)
    ([1, 2, 4], [5, 6])
    """
    gone = {int(b) for b in removing} if removing is not None else set()
    return [int(b) for b in replicas if int(b) not in gone]


def uneven_replication_factors(partitions: pd.DataFrame, configured: frozenset[str] | set[str]) -> list[str]:
    """Notes on topics (without a configured replication factor) whose partitions differ in replica count.

    >>> frame = pd.DataFrame({"topic": ["a"] * 3 + ["b"], "partition": [0, 1, 2, 0],
    ...                       "replicas": [[1, 2], [2], [3, 1], [1]]})
    >>> print(uneven_replication_factors(frame, set())[0].split(": each")[0])
    topic a: partition 1 has 1 replica where the other 2 partitions have 2
    """
    lengths = np.fromiter(map(len, partitions["replicas"]), dtype=np.int64, count=len(partitions))
    if not len(lengths) or lengths.min() == lengths.max():  # one count everywhere (the usual case): no topic is uneven
        return []
    counts = pd.Series(lengths, index=partitions.index)
    # each topic's least and most replica counts in one pass over codes (a grouped min/max: ~4 ms at 10k rows)
    codes, topics = pd.factorize(partitions["topic"])
    least, most = np.full(len(topics), lengths.max()), np.full(len(topics), lengths.min())
    np.minimum.at(least, codes, lengths)
    np.maximum.at(most, codes, lengths)
    uneven = set(topics[least != most].tolist()) - set(configured)
    out = []
    for topic, rows in counts[partitions["topic"].isin(uneven)].groupby(partitions["topic"], sort=True):
        usual = int(rows.mode().max())
        odd = partitions.loc[rows.index[rows != usual], "partition"]
        names = ", ".join(str(int(p)) for p in odd.head(SHOWN)) + (
            f" and {len(odd) - SHOWN} more" if len(odd) > SHOWN else ""
        )
        odd_counts = sorted({int(c) for c in rows[rows != usual]})
        has = " or ".join(str(c) for c in odd_counts)
        out.append(
            f"topic {topic}: partition{'s' if len(odd) > 1 else ''} {names} "
            f"{'have' if len(odd) > 1 else 'has'} {has} replica{'' if odd_counts == [1] else 's'} where the other "
            f"{int((rows == usual).sum())} partition{'s' if (rows == usual).sum() > 1 else ''} have {usual}: each is "
            "planned at its own count (a snapshot cut inside a replica list looks like this; "
            "[constraints.replication_factor] sets one count for the topic)"
        )
    return out


def drifted(partitions: pd.DataFrame) -> list[str]:
    """Partitions of the plan in force at neither its baseline (``previous_baseline``) nor its target
    (``previous_replicas``): same brokers and the same first (preferred leader) broker count as "at".

    >>> frame = pd.DataFrame({"topic": ["t"] * 3, "partition": [0, 1, 2], "replicas": [[3, 1], [1, 2], [2, 4]],
    ...                       "previous_replicas": [[3, 1], [3, 1], [3, 1]], "previous_baseline": [[1, 2]] * 3})
    >>> drifted(frame)
    ['t:2 at 2,4 (plan in force: 1,2 -> 3,1)']
    """
    if "previous_baseline" not in partitions or "previous_replicas" not in partitions:
        return []
    live, target, start = (partitions[c].tolist() for c in ("replicas", "previous_replicas", "previous_baseline"))
    width = max(1, *(int(_lengths(rows).max(initial=0)) for rows in (live, target, start)))
    now, planned, began = (replica_matrix(rows, width) for rows in (live, target, start))
    began = np.where((began[:, 0] == PAD)[:, None], planned, began)  # no move in that plan: it started there
    away = (planned[:, 0] != PAD) & (now[:, 0] != PAD) & ~_same(now, planned) & ~_same(now, began)
    return [
        f"{partitions['topic'].iat[i]}:{int(partitions['partition'].iat[i])} at {_ids(_brokers(live[i]))} "
        f"(plan in force: {_ids(_brokers(start[i]) or _brokers(target[i]))} -> {_ids(_brokers(target[i]))})"
        for i in np.flatnonzero(away).tolist()
    ]


def _same(found: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per row: the same brokers and the same preferred (first) broker; follower order does not matter to a
    plan. Padded rows of equal width: equal sorted rows also have equal lengths."""
    same: np.ndarray = (found[:, 0] == expected[:, 0]) & row_all(sorted_rows(found) == sorted_rows(expected))
    return same


def _lengths(rows: list[Any]) -> np.ndarray:
    """Each row's length, 0 for None or NaN (``map(len)`` where every row has one: ~5x faster; else None, a
    collector's cell with no reassignment in flight, is passed over before it reaches :func:`_brokers`: a
    snapshot of 10k such rows took ~10 ms a column)."""
    try:
        return np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    except TypeError:
        return np.array([0 if r is None else len(_brokers(r)) for r in rows], dtype=np.int64)
