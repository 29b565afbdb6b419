"""Checks at the planner's two boundaries: the snapshot going in, the plan coming out.

Input checks raise :class:`InvalidInputError` naming the table and rows;
feasibility checks raise the specific error (no brokers, too few brokers);
:func:`validate_plan` lists every violated rule of a computed plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from assigners.errors import (
    CapacityExhaustedError,
    ConstraintViolationError,
    InsufficientBrokersError,
    InvalidInputError,
    NoActiveBrokersError,
)
from assigners.leadership import LeaderRules
from assigners.model import (
    BROKER_STATES,
    PAD,
    ClusterView,
    Constraints,
    distinct_per_row,
    replica_matrix,
    row_any,
    row_sum,
)
from assigners.policies import Placement, placement_violations


def _tp(topic: object, partition: object) -> str:
    return f"{topic}-{partition}"


def _raise_if(rows: list[str], detail: str, table: str) -> None:
    if rows:
        raise InvalidInputError(detail, table=table, rows=rows)


def validate_brokers(brokers: pd.DataFrame) -> None:
    """Broker rows: unique ids, known states, positive weights and caps."""
    # each check masks first and lists rows only where one is bad: asked per cluster, and bad rows are rare
    ids = brokers["broker_id"]
    if (null := ids.isna()).any():
        _raise_if([f"broker_id={b}" for b in ids[null]], "null broker_id", "brokers")
    if (twice := ids.duplicated(keep=False)).any():
        _raise_if([f"broker_id={b}" for b in sorted(set(ids[twice]))], "duplicate broker_id", "brokers")
    if not (known := brokers["state"].isin(BROKER_STATES)).all():
        bad_state = brokers[~known]
        _raise_if(
            [f"broker_id={b} state={s!r}" for b, s in zip(bad_state["broker_id"], bad_state["state"])],
            f"state must be one of {', '.join(BROKER_STATES)}",
            "brokers",
        )
    for column in ("weight", "cores", "disk_capacity_bytes", "max_partitions"):
        if column not in brokers:
            continue
        values = pd.to_numeric(brokers[column], errors="coerce")
        wrong = values.notna() & (values < 0 if column in ("max_partitions", "disk_capacity_bytes") else values <= 0)
        if not wrong.any():
            continue
        bad = brokers[wrong]
        _raise_if(
            [f"broker_id={b} {column}={v}" for b, v in zip(bad["broker_id"], bad[column])],
            f"invalid {column}",
            "brokers",
        )


def validate_partitions(partitions: pd.DataFrame, known_brokers: Iterable[int]) -> None:
    """Partition rows: keys present and unique, non-empty replica lists on known brokers, the leader among
    them, sizes not negative."""
    for column in ("topic", "partition", "replicas"):
        null = np.flatnonzero(partitions[column].isna().to_numpy()).tolist()  # None or NaN; a list is not null
        _raise_if(
            [
                f"row {i}: topic={partitions['topic'].iat[i]!r} partition={partitions['partition'].iat[i]!r}"
                for i in null
            ],
            f"null {column}",
            "partitions",
        )
    known = set(int(b) for b in known_brokers)
    if _may_repeat_keys(partitions) and (twice := partitions.duplicated(["topic", "partition"], keep=False)).any():
        dup = partitions[twice]
        _raise_if(
            sorted({_tp(t, p) for t, p in zip(dup["topic"], dup["partition"])}), "duplicate partition", "partitions"
        )
    if (below := partitions["partition"] < 0).any():
        neg = partitions[below]
        _raise_if(
            [_tp(t, p) for t, p in zip(neg["topic"], neg["partition"])], "negative partition number", "partitions"
        )
    lists = partitions["replicas"].tolist()
    try:
        matrix = replica_matrix(lists)
    except (TypeError, ValueError):  # a null broker id inside a list: name the rows one by one
        matrix = None
    if matrix is None:
        bad = [i for i, r in enumerate(lists) if r is not None and any(_is_null(b) for b in r)]
        _raise_if(_rows(partitions, bad, lists), "null broker id in a replica list", "partitions")
        raise InvalidInputError("unreadable replica lists", table="partitions")
    valid = matrix != PAD
    empty = np.flatnonzero(~row_any(valid))
    _raise_if(_rows(partitions, empty), "empty replica list", "partitions")
    unknown_cells = valid & ~np.isin(matrix, np.fromiter(known, dtype=np.int64, count=len(known)))
    unknown = np.flatnonzero(row_any(unknown_cells))
    _raise_if(
        [
            f"{row} unknown={matrix[i][unknown_cells[i]].tolist()}"
            for i, row in zip(unknown, _rows(partitions, unknown, lists))
        ],
        "replica on an unknown broker",
        "partitions",
    )
    repeated = np.flatnonzero(distinct_per_row(matrix, valid) != row_sum(valid))
    _raise_if(_rows(partitions, repeated, lists), "broker repeated in a replica list", "partitions")
    if "leader" in partitions:
        leaders = pd.to_numeric(partitions["leader"], errors="coerce").to_numpy()
        outside = np.flatnonzero(~np.isnan(leaders) & ~row_any(matrix == np.nan_to_num(leaders)[:, None]))
        _raise_if(
            [f"{row} leader={int(leaders[i])}" for i, row in zip(outside, _rows(partitions, outside, lists))],
            "leader not among the replicas",
            "partitions",
        )
    if "size_bytes" in partitions and (below := pd.to_numeric(partitions["size_bytes"], errors="coerce") < 0).any():
        bad = partitions[below]
        _raise_if(
            [f"{_tp(t, p)} size_bytes={s}" for t, p, s in zip(bad["topic"], bad["partition"], bad["size_bytes"])],
            "negative size_bytes",
            "partitions",
        )


def _may_repeat_keys(partitions: pd.DataFrame) -> bool:
    """Could two rows share a (topic, partition)? False where integer partition numbers and the topics' codes
    make keys that are all distinct (a third of the time of pandas' ``duplicated`` on a 10k cluster, which then
    names the rows only where this says they could)."""
    numbers = partitions["partition"].to_numpy()
    if numbers.dtype.kind not in "iu" or not len(numbers):
        return True
    codes = pd.factorize(partitions["topic"])[0].astype(np.int64)
    span = int(numbers.max()) - int(numbers.min()) + 1
    if span > 2**31:  # keys could overflow int64: pandas answers
        return True
    keys = codes * span + (numbers.astype(np.int64) - int(numbers.min()))
    if int(keys.max()) < 8 * len(keys):  # dense keys (the usual numbering): a count per key, no sort
        return bool(np.bincount(keys).max() > 1)
    return len(np.unique(keys)) < len(keys)


def _is_null(value: object) -> bool:
    return value is None or bool(pd.isna(value))


def _rows(partitions: pd.DataFrame, index: Iterable[int], lists: list[Any] | None = None) -> list[str]:
    """``topic-partition`` (and its replica list) of the given row positions."""
    out = []
    for i in index:
        name = _tp(partitions["topic"].iat[i], partitions["partition"].iat[i])
        if lists is not None:
            name += f" replicas={[None if _is_null(b) else int(b) for b in lists[i]]}"
        out.append(name)
    return out


def validate_loads(partitions: pd.DataFrame) -> None:
    """Throughput joined onto partitions: a measured rate is a finite number, not negative (a partition without
    throughput rows, ``has_throughput`` false, is planned with zero load instead)."""
    measured = partitions["has_throughput"].astype(bool) if "has_throughput" in partitions else None
    for column in ("bytes_in", "bytes_out"):
        if column not in partitions:
            continue
        values = pd.to_numeric(partitions[column], errors="coerce")
        for problem, bad in (
            ("negative", values < 0),
            ("NaN", values.isna() & (measured if measured is not None else False)),
            ("infinite", np.isinf(values)),
        ):
            if not bad.any():
                continue
            rows = partitions[bad]
            _raise_if(
                [
                    f"{_tp(t, p)} {column}_per_sec={v}"
                    for t, p, v in zip(rows["topic"], rows["partition"], rows[column])
                ],
                f"{problem} {column}_per_sec",
                "throughput",
            )


def validate_racks(brokers: pd.DataFrame, constraints: Constraints) -> None:
    """With rack awareness on, either every live broker has a rack or none has (then each broker is its own
    failure domain): a few without one would silently count as racks of their own."""
    if not constraints.rack_aware or "rack" not in brokers:
        return
    live = brokers[brokers["state"].isin(["active", "draining"])]
    missing = live["rack"].isna() | (live["rack"].astype(str).str.strip() == "")
    if missing.any() and not missing.all():
        _raise_if(
            [f"broker_id={b} rack=null" for b in live.loc[missing, "broker_id"]],
            "rack missing on some brokers while rack awareness is on (constraints.rack_aware)",
            "brokers",
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
    if view.min_failure_domains > view.n_domains:
        raise InsufficientBrokersError(
            f"min_failure_domains = {view.min_failure_domains} but the eligible brokers span {view.n_domains} racks",
            table="brokers",
        )
    _check_capacity(prepared_partitions, view)


def _check_capacity(prepared_partitions: pd.DataFrame, view: ClusterView) -> None:
    """Totals that no placement can fit: more replicas or bytes than all caps together."""
    rf = prepared_partitions["rf"]
    replica_bytes = int((rf * prepared_partitions["size_bytes"]).sum())
    replica_cap = "max_partitions" if view.core_capacity is None else "max_partitions/core_capacity"
    demands = (
        (replica_cap, "replicas to place, the eligible brokers take", int(rf.sum()), view.max_replicas),
        ("disk_capacity_bytes", "bytes of replicas, the eligible brokers hold", replica_bytes, view.max_disk),
    )
    for cap, what, needed, caps in demands:
        room = sum(caps.get(b, math.inf) for b in view.eligible)
        if needed > room:
            raise CapacityExhaustedError(
                f"{cap}: {needed} {what} {int(room)}",
                table="brokers",
                rows=[f"broker_id={b} {cap}={int(caps[b])}" for b in view.eligible],
            )


def plan_violations(
    prepared_partitions: pd.DataFrame,
    assignment: pd.DataFrame,
    view: ClusterView,
    rules: LeaderRules | None = None,
    matrix: np.ndarray | None = None,
    most: int | None = None,
    placement: Placement | None = None,
) -> list[str]:
    """Every rule a plan breaks, one line each (empty list: valid); ``most`` caps the partitions described.

    Rules: one row per input partition, exact RF, distinct brokers, only
    eligible brokers, the rack rule (min(RF, racks) distinct failure
    domains when rack-aware), the caps, with ``rules`` the pinned
    leaders and anti-affinity groups, and with ``placement`` the placement
    rules (:func:`assigners.policies.placement_violations`). ``matrix``: the caller's replica matrix
    of ``assignment`` when it already has one (used when the rows line up).
    """
    keys = prepared_partitions[["topic", "partition"]]
    if same_keys(keys, assignment):
        aligned, violations = assignment, []
    else:
        violations = _row_set_violations(keys, assignment)
        if violations:
            return violations
        aligned = keys.merge(assignment, on=["topic", "partition"], how="left")
    if matrix is None or aligned is not assignment:
        matrix = replica_matrix(aligned["replicas"].tolist())
    valid = matrix != PAD
    rf = prepared_partitions["rf"].to_numpy(dtype=np.int64)
    lengths = row_sum(valid)
    eligible = np.asarray(view.eligible, dtype=np.int64)
    required = view.required_domains_each(rf)
    spans = distinct_per_row(view.domain_matrix(matrix), valid)
    checks: list[tuple[np.ndarray, Callable[[int, list[int]], str]]] = [
        (lengths != rf, lambda i, reps: f"{len(reps)} replicas {reps}, replication factor is {rf[i]}"),
        (distinct_per_row(matrix, valid) != lengths, lambda i, reps: f"broker repeated in {reps}"),
        (
            row_any(valid & ~np.isin(matrix, eligible)),
            lambda i, reps: f"replicas on ineligible brokers {[b for b in reps if b not in view.eligible]}",
        ),
        (spans < required, lambda i, reps: f"spans {spans[i]} racks, needs {required[i]}"),
    ]
    violations.extend(_cap_violations(matrix, prepared_partitions["size_bytes"].to_numpy(dtype=np.int64), view))
    if rules is not None:
        violations.extend(_leader_rule_violations(matrix[:, 0], aligned, rules))
    if placement is not None:
        violations.extend(placement_violations(matrix, prepared_partitions, view, placement)[:most])
    bad_rows = np.flatnonzero(np.any([mask for mask, _ in checks], axis=0))
    for i in bad_rows[:most].tolist():
        reps = matrix[i][valid[i]].tolist()
        name = _tp(aligned["topic"].iat[i], aligned["partition"].iat[i])
        violations.extend(f"{name}: {describe(i, reps)}" for mask, describe in checks if mask[i])
    return violations


def _leader_rule_violations(leaders: np.ndarray, aligned: pd.DataFrame, rules: LeaderRules) -> list[str]:
    def name(i: int) -> str:
        return _tp(aligned["topic"].iat[i], aligned["partition"].iat[i])

    out = [f"{name(i)}: led by {leaders[i]}, pinned to {b}" for i, b in sorted(rules.pins.items()) if leaders[i] != b]
    for group in rules.anti_groups:
        seen: dict[int, int] = {}
        for i in group:
            if int(leaders[i]) in seen:
                out.append(f"{name(i)} and {name(seen[int(leaders[i])])}: anti-affine, both led by {leaders[i]}")
            seen[int(leaders[i])] = i
    for group, hint, must in zip(rules.hint_groups, rules.hint_names, rules.hint_hard):
        if must and len({int(leaders[i]) for i in group}) > 1:
            led = ", ".join(f"{name(i)} by {leaders[i]}" for i in group)
            out.append(f"affinity hint {hint} (strength 1.0): leaders on more than one broker: {led}")
    return out


def _cap_violations(matrix: np.ndarray, sizes: np.ndarray, view: ClusterView) -> list[str]:
    """Brokers holding more replicas or bytes than their caps."""
    if not view.has_caps:
        return []
    valid = matrix != PAD
    ids, counts = np.unique(matrix[valid], return_counts=True)
    disk = pd.Series(np.broadcast_to(sizes[:, None], matrix.shape)[valid]).groupby(matrix[valid]).sum()
    out = []
    for b, n in zip(ids.tolist(), counts.tolist()):
        if n > view.max_replicas.get(b, math.inf):
            out.append(f"broker {b}: {n} replicas, max_partitions is {int(view.max_replicas[b])}")
        if disk.get(b, 0) > view.max_disk.get(b, math.inf):
            out.append(f"broker {b}: {int(disk[b])} bytes, disk_capacity_bytes is {int(view.max_disk[b])}")
    return out


def same_keys(keys: pd.DataFrame, assignment: pd.DataFrame) -> bool:
    """Does ``assignment`` list the same (topic, partition) rows as ``keys``, in the same order?"""
    return len(keys) == len(assignment) and all(
        np.array_equal(keys[c].to_numpy(), assignment[c].to_numpy()) for c in ("topic", "partition")
    )


def _row_set_violations(keys: pd.DataFrame, assignment: pd.DataFrame) -> list[str]:
    """Partitions planned twice, not in the snapshot, or missing from the plan."""
    planned = assignment[["topic", "partition"]]
    twice = planned[planned.duplicated(keep="first")]
    violations = [f"{_tp(t, p)}: planned twice" for t, p in zip(twice["topic"], twice["partition"])]
    both = keys.merge(planned.drop_duplicates(), on=["topic", "partition"], how="outer", indicator=True)
    extra = both[both["_merge"] == "right_only"]
    missing = both[both["_merge"] == "left_only"].sort_values(["topic", "partition"])
    violations += [f"{_tp(t, p)}: not in the snapshot" for t, p in zip(extra["topic"], extra["partition"])]
    violations += [f"{_tp(t, p)}: missing from the plan" for t, p in zip(missing["topic"], missing["partition"])]
    return violations


def validate_plan(
    prepared_partitions: pd.DataFrame,
    assignment: pd.DataFrame,
    view: ClusterView,
    rules: LeaderRules | None = None,
    matrix: np.ndarray | None = None,
    placement: Placement | None = None,
) -> None:
    violations = plan_violations(prepared_partitions, assignment, view, rules, matrix, placement=placement)
    if violations:
        raise ConstraintViolationError(
            f"{len(violations)} violated rules in the computed plan", table="plans", rows=violations
        )


def config_entries_not_in_cluster(
    constraints: Constraints, partitions: pd.DataFrame, brokers: pd.DataFrame, missing_rule_refs: list[str]
) -> list[str]:
    """Config entries that name a topic, partition or broker this cluster does not have, one line each.

    Usually a typo; a config shared by clusters names some things only some
    of them have, so these are warnings, never errors.
    """
    topics = set(partitions["topic"])
    known = {int(b) for b in brokers["broker_id"]}
    out = [f"replication_factor {t}" for t in sorted(constraints.replication_factor) if t not in topics]
    out += [f"excluded_brokers {b}" for b in sorted(constraints.excluded_brokers) if b not in known]
    for key in ("broker_tags", "broker_taints"):
        out += [f"{key} {b}" for b in sorted(getattr(constraints, key)) if b not in known]
    racks, tags = set(brokers["rack"]), [constraints.broker_tags.get(b, {}) for b in sorted(known)]
    for n, rule in enumerate(constraints.placement, start=1):
        name = f'placement rule {n} (topics "{rule.topics}")'
        if not any(rule.matches(str(t)) for t in topics):
            out.append(f"{name} matches no topic")
        out += [f"{name} leader rack {rack}" for rack in rule.leader_racks if rack not in racks]
        out += _tags_no_broker_has(name, rule.prefer_tags, tags)
    return out + missing_rule_refs


def _tags_no_broker_has(name: str, wanted: Mapping[str, str], tags: list[Mapping[str, str]]) -> list[str]:
    """A rule's preferred tags where no broker carries them all (a typo leaves the preference without effect;
    required tags no broker carries fail the cluster instead)."""
    if not wanted or any(all(t.get(k) == v for k, v in wanted.items()) for t in tags):
        return []
    return [f"{name} prefer_tags {';'.join(f'{k}={v}' for k, v in sorted(wanted.items()))}"]
