"""The planner's view of one cluster: constraints, prepared frames, lookups.

The planner turns the raw snapshot frames into *prepared* frames once
(:func:`prepare_brokers`, :func:`prepare_partitions`); every strategy takes
those and returns ``topic, partition, replicas``. :class:`ClusterView` is the
plain-Python index of the same data that the strategies loop over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

ACTIVE, DRAINING, DEAD = "active", "draining", "dead"
BROKER_STATES = (ACTIVE, DRAINING, DEAD)

# Replica load weights (DESIGN.md): the leader serves produce and consume,
# a follower only replicates the produce stream.
LEADER_IN, LEADER_OUT, FOLLOWER_IN = 1.0, 1.0, 1.0

ASSIGNMENT_COLUMNS = ["topic", "partition", "replicas"]


@dataclass(frozen=True)
class Constraints:
    """Hard and soft rules every strategy honours (DESIGN.md "Constraints").

    Parameters
    ----------
    excluded_brokers
        Brokers that must hold no replica, whatever their state.
    rack_aware
        Spread each partition over min(RF, racks) distinct racks.
    replication_factor
        Per-topic RF overrides; other topics keep ``default_replication_factor``
        or, when that is None, their current RF.
    default_replication_factor
        RF for topics without an override (None: keep the current one).
    """

    excluded_brokers: frozenset[int] = frozenset()
    rack_aware: bool = True
    replication_factor: Mapping[str, int] = field(default_factory=dict)
    default_replication_factor: int | None = None

    def rf_for(self, topic: str, current_rf: int) -> int:
        if topic in self.replication_factor:
            return int(self.replication_factor[topic])
        if self.default_replication_factor is not None:
            return int(self.default_replication_factor)
        return current_rf

    def to_dict(self) -> dict[str, Any]:
        return {
            "excluded_brokers": sorted(self.excluded_brokers),
            "rack_aware": self.rack_aware,
            "replication_factor": dict(sorted(self.replication_factor.items())),
            "default_replication_factor": self.default_replication_factor,
        }


def stable_hash(*parts: object) -> int:
    """A 64-bit hash that is the same in every process (unlike ``hash()``)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _resolved_weight(weight: object, cores: object) -> float:
    if weight is not None and not pd.isna(weight):
        return float(weight)  # type: ignore[arg-type]
    if cores is not None and not pd.isna(cores) and int(cores) > 0:  # type: ignore[call-overload]
        return float(cores)  # type: ignore[arg-type]
    return 1.0


def prepare_brokers(brokers: pd.DataFrame, constraints: Constraints) -> pd.DataFrame:
    """Resolve weight, failure domain and eligibility of every broker.

    A broker without a rack is its own failure domain, so clusters without
    rack data get "distinct brokers" as their spread rule.
    """
    pdf = brokers.sort_values("broker_id", kind="stable").reset_index(drop=True)
    ids = pdf["broker_id"].astype("int64")
    weights = [
        _resolved_weight(w, c)
        for w, c in zip(pdf.get("weight", [None] * len(pdf)), pdf.get("cores", [None] * len(pdf)))
    ]
    racks = pdf["rack"] if "rack" in pdf else pd.Series([None] * len(pdf))
    domains = [str(r) if r is not None and not pd.isna(r) else f"broker:{b}" for r, b in zip(racks, ids)]
    eligible = (pdf["state"] == ACTIVE) & ~ids.isin(list(constraints.excluded_brokers))
    return pd.DataFrame(
        {
            "broker_id": ids,
            "rack": racks.values,
            "state": pdf["state"].values,
            "weight": np.asarray(weights, dtype="float64"),
            "domain": domains,
            "eligible": eligible.values,
            "disk_capacity_bytes": pdf.get("disk_capacity_bytes", pd.Series([None] * len(pdf))).values,
            "max_partitions": pdf.get("max_partitions", pd.Series([None] * len(pdf))).values,
        }
    )


def prepare_partitions(partitions: pd.DataFrame, constraints: Constraints) -> pd.DataFrame:
    """Sort partitions, resolve the target RF, the baseline and the loads.

    ``baseline_replicas`` (previous plan) falls back to the current
    ``replicas``; ``bytes_in``/``bytes_out`` default to zero.
    """
    pdf = partitions.sort_values(["topic", "partition"], kind="stable").reset_index(drop=True)
    current = [list(map(int, r)) for r in pdf["replicas"]]
    if "baseline_replicas" in pdf:
        baseline = [
            list(map(int, b)) if b is not None and len(b) else c for b, c in zip(pdf["baseline_replicas"], current)
        ]
    else:
        baseline = current
    rf = [constraints.rf_for(t, len(c)) for t, c in zip(pdf["topic"], current)]
    zeros = pd.Series(np.zeros(len(pdf)))
    return pd.DataFrame(
        {
            "topic": pdf["topic"].astype(str).values,
            "partition": pdf["partition"].astype("int64").values,
            "current": current,
            "baseline": baseline,
            "rf": np.asarray(rf, dtype="int64"),
            "bytes_in": pdf.get("bytes_in", zeros).fillna(0.0).astype("float64").values,
            "bytes_out": pdf.get("bytes_out", zeros).fillna(0.0).astype("float64").values,
            "size_bytes": pdf.get("size_bytes", zeros).fillna(0).astype("int64").values,
        }
    )


@dataclass
class ClusterView:
    """Plain-Python lookups over prepared frames, for the strategies' loops."""

    eligible: list[int]
    domain_of: dict[int, str]
    weight_of: dict[int, float]
    n_domains: int
    rack_aware: bool

    @classmethod
    def from_brokers(cls, brokers: pd.DataFrame, constraints: Constraints) -> ClusterView:
        ids = [int(b) for b in brokers["broker_id"]]
        eligible = sorted(int(b) for b, ok in zip(brokers["broker_id"], brokers["eligible"]) if ok)
        domain_of = dict(zip(ids, brokers["domain"]))
        return cls(
            eligible=eligible,
            domain_of=domain_of,
            weight_of={b: float(w) for b, w in zip(ids, brokers["weight"])},
            n_domains=len({domain_of[b] for b in eligible}),
            rack_aware=constraints.rack_aware,
        )

    def required_domains(self, rf: int) -> int:
        """Distinct failure domains a partition of this RF must span."""
        return min(rf, self.n_domains) if self.rack_aware else 1

    def rack_alternated(self) -> list[int]:
        """Eligible brokers interleaved by rack: r1b1, r2b1, r3b1, r1b2, ...

        Kafka's ``getRackAlternatedBrokerList``: consecutive entries sit in
        different racks, so consecutive replicas of a partition do too.
        """
        by_domain: dict[str, list[int]] = {}
        for b in self.eligible:
            by_domain.setdefault(self.domain_of[b], []).append(b)
        columns = [by_domain[d] for d in sorted(by_domain)]
        out: list[int] = []
        for i in range(max((len(c) for c in columns), default=0)):
            out.extend(c[i] for c in columns if i < len(c))
        return out


def assignment_frame(
    topics: list[str] | np.ndarray, partitions: list[int] | np.ndarray, replicas: list[list[int]]
) -> pd.DataFrame:
    """The strategies' return value: ``topic, partition, replicas``."""
    return pd.DataFrame({"topic": topics, "partition": partitions, "replicas": replicas}, columns=ASSIGNMENT_COLUMNS)
