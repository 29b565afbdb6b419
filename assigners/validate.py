"""Checks at the planner's two boundaries: the snapshot going in, the plan coming out.

Input checks raise :class:`InvalidInputError` naming the table and rows;
feasibility checks raise the specific error (no brokers, too few brokers);
:func:`validate_plan` lists every violated rule of a computed plan.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from assigners.errors import (
    ConstraintViolationError,
    InsufficientBrokersError,
    InvalidInputError,
    NoActiveBrokersError,
)
from assigners.model import BROKER_STATES, ClusterView


def _tp(topic: object, partition: object) -> str:
    return f"{topic}-{partition}"


def _raise_if(rows: list[str], detail: str, table: str) -> None:
    if rows:
        raise InvalidInputError(detail, table=table, rows=rows)


def validate_brokers(brokers: pd.DataFrame) -> None:
    """Broker rows: unique ids, known states, positive weights and caps."""
    _raise_if(
        [f"broker_id={b}" for b in brokers.loc[brokers["broker_id"].isna(), "broker_id"]], "null broker_id", "brokers"
    )
    dup = brokers["broker_id"][brokers["broker_id"].duplicated(keep=False)]
    _raise_if([f"broker_id={b}" for b in sorted(set(dup))], "duplicate broker_id", "brokers")
    bad_state = brokers[~brokers["state"].isin(BROKER_STATES)]
    _raise_if(
        [f"broker_id={b} state={s!r}" for b, s in zip(bad_state["broker_id"], bad_state["state"])],
        f"state must be one of {', '.join(BROKER_STATES)}",
        "brokers",
    )
    for column in ("weight", "cores", "disk_capacity_bytes", "max_partitions"):
        if column not in brokers:
            continue
        values = pd.to_numeric(brokers[column], errors="coerce")
        bad = brokers[values.notna() & (values < 0 if column == "max_partitions" else values <= 0)]
        if column == "disk_capacity_bytes":
            bad = brokers[values.notna() & (values < 0)]
        _raise_if(
            [f"broker_id={b} {column}={v}" for b, v in zip(bad["broker_id"], bad[column])],
            f"invalid {column}",
            "brokers",
        )


def validate_partitions(partitions: pd.DataFrame, known_brokers: Iterable[int]) -> None:
    """Partition rows: unique (topic, partition), non-empty replica lists on known brokers."""
    known = set(int(b) for b in known_brokers)
    dup = partitions[partitions.duplicated(["topic", "partition"], keep=False)]
    _raise_if(sorted({_tp(t, p) for t, p in zip(dup["topic"], dup["partition"])}), "duplicate partition", "partitions")
    neg = partitions[partitions["partition"] < 0]
    _raise_if([_tp(t, p) for t, p in zip(neg["topic"], neg["partition"])], "negative partition number", "partitions")
    empty, unknown, repeated = [], [], []
    for topic, part, replicas in zip(partitions["topic"], partitions["partition"], partitions["replicas"]):
        reps = [] if replicas is None else list(replicas)
        if not reps:
            empty.append(_tp(topic, part))
            continue
        missing = [int(b) for b in reps if b is None or int(b) not in known]
        if missing:
            unknown.append(f"{_tp(topic, part)} replicas={list(map(int, reps))} unknown={missing}")
        if len(set(reps)) != len(reps):
            repeated.append(f"{_tp(topic, part)} replicas={list(map(int, reps))}")
    _raise_if(empty, "empty replica list", "partitions")
    _raise_if(unknown, "replica on an unknown broker", "partitions")
    _raise_if(repeated, "broker repeated in a replica list", "partitions")
    if "size_bytes" in partitions:
        bad = partitions[pd.to_numeric(partitions["size_bytes"], errors="coerce") < 0]
        _raise_if(
            [f"{_tp(t, p)} size_bytes={s}" for t, p, s in zip(bad["topic"], bad["partition"], bad["size_bytes"])],
            "negative size_bytes",
            "partitions",
        )


def validate_loads(partitions: pd.DataFrame) -> None:
    """Throughput joined onto partitions: rates must not be negative."""
    for column in ("bytes_in", "bytes_out"):
        if column not in partitions:
            continue
        bad = partitions[pd.to_numeric(partitions[column], errors="coerce") < 0]
        _raise_if(
            [f"{_tp(t, p)} {column}_per_sec={v}" for t, p, v in zip(bad["topic"], bad["partition"], bad[column])],
            f"negative {column}_per_sec",
            "throughput",
        )


def check_feasible(prepared_partitions: pd.DataFrame, view: ClusterView) -> None:
    """Fail early, with a typed error, when no plan can exist."""
    if not view.eligible:
        raise NoActiveBrokersError("no broker is active and not excluded", table="brokers")
    bad_rf = prepared_partitions[prepared_partitions["rf"] < 1]
    if len(bad_rf):
        raise InvalidInputError(
            "replication factor below 1",
            table="config",
            rows=sorted({f"topic {t} rf={r}" for t, r in zip(bad_rf["topic"], bad_rf["rf"])}),
        )
    too_big = prepared_partitions[prepared_partitions["rf"] > len(view.eligible)]
    if len(too_big):
        raise InsufficientBrokersError(
            f"{len(view.eligible)} eligible brokers {view.eligible} cannot hold replication factor "
            f"{int(too_big['rf'].max())}",
            table="brokers",
            rows=sorted({f"topic {t} rf={r}" for t, r in zip(too_big["topic"], too_big["rf"])}),
        )


def plan_violations(prepared_partitions: pd.DataFrame, assignment: pd.DataFrame, view: ClusterView) -> list[str]:
    """Every rule a plan breaks, one line each (empty list: valid).

    Rules: one row per input partition, exact RF, distinct brokers, only
    eligible brokers, and the rack rule (min(RF, racks) distinct failure
    domains when rack-aware).
    """
    eligible = set(view.eligible)
    expected = dict(zip(zip(prepared_partitions["topic"], prepared_partitions["partition"]), prepared_partitions["rf"]))
    seen: set[tuple[str, int]] = set()
    violations: list[str] = []
    for topic, part, replicas in zip(assignment["topic"], assignment["partition"], assignment["replicas"]):
        key = (str(topic), int(part))
        reps = [int(b) for b in replicas]
        name = _tp(topic, part)
        if key in seen:
            violations.append(f"{name}: planned twice")
            continue
        seen.add(key)
        if key not in expected:
            violations.append(f"{name}: not in the snapshot")
            continue
        rf = int(expected[key])
        if len(reps) != rf:
            violations.append(f"{name}: {len(reps)} replicas {reps}, replication factor is {rf}")
        if len(set(reps)) != len(reps):
            violations.append(f"{name}: broker repeated in {reps}")
        off = [b for b in reps if b not in eligible]
        if off:
            violations.append(f"{name}: replicas on ineligible brokers {off}")
        domains = {view.domain_of.get(b, f"broker:{b}") for b in reps}
        if len(domains) < view.required_domains(rf):
            violations.append(f"{name}: spans {len(domains)} racks, needs {view.required_domains(rf)}")
    missing = set(expected) - seen
    violations.extend(f"{_tp(t, p)}: missing from the plan" for t, p in sorted(missing))
    return violations


def validate_plan(prepared_partitions: pd.DataFrame, assignment: pd.DataFrame, view: ClusterView) -> None:
    violations = plan_violations(prepared_partitions, assignment, view)
    if violations:
        raise ConstraintViolationError(
            f"{len(violations)} violated rules in the computed plan", table="plans", rows=violations
        )
