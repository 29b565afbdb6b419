"""Builders of one cluster's snapshot frames for the pure tests (plain pandas)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from assigners import Constraints


def brokers_frame(
    ids: list[int],
    racks: list[str | None] | None = None,
    states: list[str] | None = None,
    weights: list[float | None] | None = None,
) -> pd.DataFrame:
    n = len(ids)
    return pd.DataFrame(
        {
            "broker_id": ids,
            "rack": racks if racks is not None else [f"r{i % 3}" for i in range(n)],
            "state": states if states is not None else ["active"] * n,
            "cores": [8] * n,
            "weight": weights if weights is not None else [None] * n,
            "disk_capacity_bytes": [None] * n,
            "max_partitions": [None] * n,
        }
    )


def partitions_frame(
    replicas: list[list[int]],
    topics: list[str] | None = None,
    numbers: list[int] | None = None,
    bytes_in: list[float] | None = None,
) -> pd.DataFrame:
    n = len(replicas)
    loads = bytes_in if bytes_in is not None else [float(i % 7 + 1) for i in range(n)]
    return pd.DataFrame(
        {
            "topic": topics if topics is not None else [f"t{i // 10}" for i in range(n)],
            "partition": numbers if numbers is not None else [i % 10 for i in range(n)],
            "replicas": replicas,
            "leader": [r[0] for r in replicas],
            "size_bytes": [1000 * (i + 1) for i in range(n)],
            "bytes_in": loads,
            "bytes_out": [2 * x for x in loads],
            "has_throughput": [True] * n,
        }
    )


@st.composite
def random_clusters(draw: st.DrawFn, max_brokers: int = 12, max_rf: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A cluster with uneven racks, dead/draining brokers and RF 1..max_rf."""
    n = draw(st.integers(1, max_brokers))
    ids = sorted(draw(st.sets(st.integers(1, 500), min_size=n, max_size=n)))
    n_racks = draw(st.integers(1, 4))
    racks = [f"rack{draw(st.integers(0, n_racks - 1))}" for _ in ids]
    states = [draw(st.sampled_from(["active"] * 6 + ["draining", "dead"])) for _ in ids]
    weights = [draw(st.sampled_from([None, 1.0, 2.0, 0.5])) for _ in ids]
    brokers = brokers_frame(ids, racks, states, weights)
    n_topics = draw(st.integers(1, 4))
    rows = []
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    for t in range(n_topics):
        rf = draw(st.integers(1, max_rf))
        for p in range(draw(st.integers(1, 15))):
            current = rng.choice(ids, size=min(rf, len(ids)), replace=False).tolist()
            rows.append((f"topic{t}", p, current))
    parts = partitions_frame(
        [r[2] for r in rows],
        [r[0] for r in rows],
        [r[1] for r in rows],
        bytes_in=[float(x) for x in rng.zipf(1.5, len(rows))],
    )
    return brokers, parts


def assert_valid(brokers: pd.DataFrame, parts: pd.DataFrame, planned: pd.DataFrame, constraints: Constraints) -> None:
    """Independent re-check of every hard rule, caps included (not via assigners.validate)."""
    eligible = {
        int(b)
        for b, s in zip(brokers["broker_id"], brokers["state"])
        if s == "active" and int(b) not in constraints.excluded_brokers
    }
    rack = {int(b): (r if r is not None else f"none{b}") for b, r in zip(brokers["broker_id"], brokers["rack"])}
    n_racks = len({rack[b] for b in eligible})
    assert sorted(zip(planned["topic"], planned["partition"])) == sorted(zip(parts["topic"], parts["partition"]))
    rf_of = {
        (t, p): constraints.rf_for(t, len(r)) for t, p, r in zip(parts["topic"], parts["partition"], parts["replicas"])
    }
    size_of = dict(zip(zip(parts["topic"], parts["partition"]), parts["size_bytes"]))
    count: Counter[int] = Counter()
    disk: Counter[int] = Counter()
    for t, p, reps, leader in zip(planned["topic"], planned["partition"], planned["replicas"], planned["leader"]):
        reps = list(reps)
        assert len(reps) == rf_of[(t, p)] and len(set(reps)) == len(reps), (t, p, reps)
        assert set(reps) <= eligible, (t, p, reps, eligible)
        assert leader == reps[0], (t, p, reps, leader)
        if constraints.rack_aware:
            assert len({rack[b] for b in reps}) >= min(len(reps), n_racks), (t, p, reps)
        for b in reps:
            count[b] += 1
            disk[b] += size_of[(t, p)]
    caps = dict(zip(brokers["broker_id"], brokers["max_partitions"]))
    disks = dict(zip(brokers["broker_id"], brokers["disk_capacity_bytes"]))
    for b in count:
        if caps.get(b) is not None and not pd.isna(caps[b]):
            assert count[b] <= caps[b], (b, count[b], caps[b])
        if disks.get(b) is not None and not pd.isna(disks[b]):
            assert disk[b] <= disks[b], (b, disk[b], disks[b])


def executed(parts: pd.DataFrame, planned: pd.DataFrame, live: bool = True) -> pd.DataFrame:
    """The partition frame of the next snapshot once ``planned`` is the plan in force.

    ``live``: the plan was executed, so the cluster's live layout is the planned one;
    otherwise the live layout is unchanged (the plan is still pending).
    """
    columns = {"replicas": "previous_replicas", "epoch": "previous_epoch", "cores": "previous_cores"}
    previous = planned[["topic", "partition", *[c for c in columns if c in planned]]].rename(columns=columns)
    if "previous_epoch" not in previous:
        previous = previous.assign(previous_epoch=1)
    out = parts.merge(previous, on=["topic", "partition"], how="left")
    if live:
        out["replicas"] = out["previous_replicas"].map(list)
        out["leader"] = out["replicas"].map(lambda r: r[0])
    return out


def demo_cluster(fleet: dict[str, pd.DataFrame], cluster: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One demo cluster's frames as the job hands them to the planner (throughput joined as rates)."""
    brokers = fleet["brokers"][fleet["brokers"]["cluster_id"] == cluster].reset_index(drop=True)
    rates = fleet["throughput"].rename(columns={"bytes_in_per_sec": "bytes_in", "bytes_out_per_sec": "bytes_out"})
    parts = fleet["partitions"][fleet["partitions"]["cluster_id"] == cluster].merge(
        rates[["cluster_id", "topic", "partition", "bytes_in", "bytes_out"]], on=["cluster_id", "topic", "partition"]
    )
    return brokers, parts.assign(has_throughput=True)
