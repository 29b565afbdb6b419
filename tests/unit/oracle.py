"""An exact yardstick for ``balanced``: the fewest replica moves that reach the same thresholds (OR-Tools CP-SAT).

The model is written from the goal definitions in ``assigners/balanced.py``,
independently of its code:

* every partition keeps its RF on distinct eligible brokers spanning the
  required failure domains, one leader among them, within every cap;
* replicas and leaders per broker strictly within ``count_slack`` of the
  weighted share;
* each load resource (disk, bytes in of every replica, bytes out of the
  leaders, bytes in of the leaders) at most ``load_ratio`` x its lower bound
  on every broker, per capacity;
* no topic has a replica moving A -> B and another B -> A (the rule every
  strategy that keeps a layout follows, ``assigners.balance.topic_moves``);
* minimise the replicas placed on brokers that do not hold them live.

Rates are scaled to integers (1e-3 of the smallest unit kept), so a limit is
rounded down: the oracle never accepts a plan ``balanced`` could not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from assigners import Constraints
from assigners.model import ClusterView, prepare_brokers, prepare_partitions


@dataclass(frozen=True)
class Optimum:
    status: str  # "optimal", "infeasible" (the thresholds cannot all be met) or "unknown" (time limit)
    moves: int | None


def fewest_moves(
    brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints | None = None, seconds: float = 10.0
) -> Optimum:
    constraints = constraints or Constraints()
    prepared_b = prepare_brokers(brokers, constraints)
    prepared = prepare_partitions(parts, constraints)
    view = ClusterView.from_brokers(prepared_b, constraints)
    model = cp_model.CpModel()
    eligible = view.eligible
    n = len(prepared)
    x = {(p, b): model.new_bool_var(f"x{p}_{b}") for p in range(n) for b in eligible}
    lead = {(p, b): model.new_bool_var(f"l{p}_{b}") for p in range(n) for b in eligible}
    domains = sorted({view.domain_of[b] for b in eligible})
    rf = prepared["rf"].tolist()
    for p in range(n):
        model.add(sum(x[p, b] for b in eligible) == rf[p])
        model.add(sum(lead[p, b] for b in eligible) == 1)
        for b in eligible:
            model.add(lead[p, b] <= x[p, b])
        spans = []
        for d in domains:
            used = model.new_bool_var(f"d{p}_{d}")
            model.add(used <= sum(x[p, b] for b in eligible if view.domain_of[b] == d))
            spans.append(used)
        model.add(sum(spans) >= view.required_domains(rf[p]))
    weight = np.array([view.weight_of[b] for b in eligible])
    for counted, total, slack in (
        (x, int(sum(rf)), constraints.balanced_slack(leaders=False)),
        (lead, n, constraints.balanced_slack(leaders=True)),
    ):
        for k, b in enumerate(eligible):
            share = total * weight[k] / weight.sum()
            low, high = math.floor(share - slack + 1e-9) + 1, math.ceil(share + slack - 1e-9) - 1
            model.add_linear_constraint(sum(counted[p, b] for p in range(n)), low, high)
    for b in eligible:
        if view.max_replicas.get(b, math.inf) < math.inf:
            model.add(sum(x[p, b] for p in range(n)) <= int(view.max_replicas[b]))
    _load_goals(model, x, lead, prepared, prepared_b, view, constraints)
    live = prepared["current"].tolist()
    _no_back_and_forth(model, x, prepared["topic"].tolist(), live, eligible)
    model.minimize(sum(x[p, b] for p in range(n) for b in eligible if b not in live[p]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 2
    solver.parameters.random_seed = 0
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        return Optimum("optimal", round(solver.objective_value))
    return Optimum("infeasible" if status == cp_model.INFEASIBLE else "unknown", None)


def _no_back_and_forth(model, x, topics, live, eligible) -> None:  # type: ignore[no-untyped-def]
    """Per topic and broker pair: replicas go a -> b or b -> a, never both."""
    goes: dict[tuple[str, int, int], list] = {}  # (topic, a, b) -> "a partition of the topic leaves a for b"
    for p, (topic, held) in enumerate(zip(topics, live)):
        for a in held:
            if a not in eligible:
                continue  # a replica on an ineligible broker must leave: the planner's rule counts it too
            for b in eligible:
                if b in held:
                    continue
                move = model.new_bool_var(f"m{p}_{a}_{b}")
                model.add_bool_and([x[p, a].Not(), x[p, b]]).only_enforce_if(move)
                model.add_bool_or([x[p, a], x[p, b].Not()]).only_enforce_if(move.Not())
                goes.setdefault((topic, a, b), []).append(move)
    for (topic, a, b), moves in goes.items():
        if a < b and (topic, b, a) in goes:
            forward, backward = model.new_bool_var(""), model.new_bool_var("")
            model.add_max_equality(forward, moves)
            model.add_max_equality(backward, goes[(topic, b, a)])
            model.add(forward + backward <= 1)


def _load_goals(model, x, lead, prepared, brokers, view, constraints) -> None:  # type: ignore[no-untyped-def]
    eligible = view.eligible
    weight = np.array([view.weight_of[b] for b in eligible])
    disk = pd.to_numeric(brokers.set_index("broker_id")["disk_capacity_bytes"], errors="coerce").reindex(eligible)
    disk_capacity = disk.to_numpy(dtype=float) if disk.notna().all() else weight
    size = prepared["size_bytes"].to_numpy(dtype=float)
    bytes_in = prepared["bytes_in"].to_numpy(dtype=float)
    zero = np.zeros(len(prepared))
    rf = prepared["rf"].to_numpy()
    goals = [  # each with its own threshold, as [planner.balanced] names them
        ("disk", size, size, disk_capacity),
        ("bytes_in", bytes_in, bytes_in, weight),
        ("bytes_out", prepared["bytes_out"].to_numpy(dtype=float), zero, weight),
        ("leader_bytes_in", bytes_in, zero, weight),
    ]
    for goal, as_leader, as_follower, capacity in goals:
        ratio = constraints.balanced_ratio(goal)
        total = float((as_leader + (rf - 1) * as_follower).sum())
        if total <= 0:
            continue
        bound = max(total / capacity.sum(), float(max(as_leader.max(), as_follower.max())) / capacity.max())
        unit = total / 1e6  # integer amounts: a millionth of the total
        leader_amount = np.round(as_leader / unit).astype(int).tolist()
        follower_amount = np.round(as_follower / unit).astype(int).tolist()
        for k, b in enumerate(eligible):
            limit = math.floor(ratio * bound * capacity[k] / unit)
            model.add(
                sum(
                    follower_amount[p] * x[p, b] + (leader_amount[p] - follower_amount[p]) * lead[p, b]
                    for p in range(len(prepared))
                )
                <= limit
            )
