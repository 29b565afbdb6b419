"""An exact yardstick for ``balanced``: the fewest replica moves that reach the same thresholds (OR-Tools CP-SAT).

The model is written from the goal definitions in ``assigners/balanced.py``,
independently of its code:

* every partition keeps its RF on distinct eligible brokers spanning the
  required failure domains, one leader among them, within every cap;
* replicas and leaders per broker strictly within ``count_slack`` of the
  weighted share;
* where the rack rule forces more than that on some racks (uneven racks, a
  rack short of a dead broker), the bound is that forced load instead
  (:func:`rack_floor`): the planner is held to its ratio of what is reachable,
  with the earlier goals a leader carries more of kept within their limits
  (the held goals: what the other racks cannot lead, the chosen racks must);
* each load resource (disk, bytes in of every replica, bytes out of the
  leaders, bytes in of the leaders, and the weighted load of
  ``[planner.load_weights]``) at most its ratio x its lower bound on every
  broker, per capacity;
* no topic has a replica moving A -> B and another B -> A (the rule every
  strategy that keeps a layout follows, ``assigners.balance.topic_moves``);
* minimise the replicas placed on brokers that do not hold them live.

Rates are scaled to integers (1e-3 of the smallest unit kept), so a limit is
rounded down: the oracle never accepts a plan ``balanced`` could not.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from assigners import Constraints
from assigners.model import ClusterView, prepare_brokers, prepare_partitions


@dataclass(frozen=True)
class Optimum:
    status: str  # "optimal", "infeasible" (the thresholds cannot all be met) or "unknown" (time limit)
    moves: int | None
    layout: list[list[int]] | None = None  # the solver's plan, leader first (partitions in prepared order)


@dataclass
class _Model:
    """A cluster's CP-SAT model under the hard rules: a replica (``x``) and a leader (``lead``) variable per
    partition and eligible broker."""

    model: cp_model.CpModel
    x: dict
    lead: dict
    prepared: pd.DataFrame
    brokers: pd.DataFrame
    view: ClusterView


def _hard_rules(brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints) -> _Model:
    """Every partition keeps its RF on distinct eligible brokers spanning the required racks, one leader among
    them, every broker within its cap."""
    prepared_b = prepare_brokers(brokers, constraints)
    prepared = prepare_partitions(parts, constraints)
    view = ClusterView.from_brokers(prepared_b, constraints)
    model = cp_model.CpModel()
    eligible, n, rf = view.eligible, len(prepared), prepared["rf"].tolist()
    x = {(p, b): model.new_bool_var(f"x{p}_{b}") for p in range(n) for b in eligible}
    lead = {(p, b): model.new_bool_var(f"l{p}_{b}") for p in range(n) for b in eligible}
    for p in range(n):
        model.add(sum(x[p, b] for b in eligible) == rf[p])
        model.add(sum(lead[p, b] for b in eligible) == 1)
        for b in eligible:
            model.add(lead[p, b] <= x[p, b])
        spans = []
        for d in sorted({view.domain_of[b] for b in eligible}):
            used = model.new_bool_var(f"d{p}_{d}")
            model.add(used <= sum(x[p, b] for b in eligible if view.domain_of[b] == d))
            spans.append(used)
        model.add(sum(spans) >= view.required_domains(rf[p]))
    for b in eligible:
        if view.max_replicas.get(b, math.inf) < math.inf:
            model.add(sum(x[p, b] for p in range(n)) <= int(view.max_replicas[b]))
    _placement_rules(model, x, lead, prepared, view, constraints)
    return _Model(model, x, lead, prepared, prepared_b, view)


def rule_of(topic: str, constraints: Constraints) -> int | None:
    """The index of the first placement rule whose ``topics`` pattern matches the whole topic name."""
    return next((n for n, r in enumerate(constraints.placement) if re.fullmatch(r.topics, str(topic))), None)


def _placement_rules(model, x, lead, prepared: pd.DataFrame, view: ClusterView, constraints: Constraints) -> None:
    """The hard placement rules, read from their definitions (README "Placement rules"): the first rule whose
    ``topics`` pattern matches the whole topic name applies; a replica only on a broker carrying every
    required tag (and preferred tag at strength 1.0) whose every taint the rule tolerates ("key=value", or
    "key" for any value; no rule tolerates nothing); a frozen partition keeps its live replicas and leader
    where they all may stay."""
    for p, (topic, live) in enumerate(zip(prepared["topic"], prepared["current"])):
        n = rule_of(topic, constraints)
        rule = None if n is None else constraints.placement[n]
        needs = {} if rule is None else {**rule.require_tags, **(rule.prefer_tags if rule.prefer_strength >= 1 else {})}
        tolerated = set() if rule is None else set(rule.tolerations)
        allowed = []
        for b in view.eligible:
            tags, taints = constraints.broker_tags.get(b, {}), constraints.broker_taints.get(b, ())
            if all(tags.get(k) == v for k, v in needs.items()) and all(
                t in tolerated or t.split("=")[0] in tolerated for t in taints
            ):
                allowed.append(b)
        for b in view.eligible:
            if b not in allowed:
                model.add(x[p, b] == 0)
        live = list(live)
        rf = int(prepared["rf"].iat[p])
        spans = len({view.domain_of[b] for b in live if b in view.domain_of}) >= view.required_domains(rf)
        if rule is not None and rule.frozen and set(live) <= set(allowed) and len(live) == rf and spans:
            for b in live:
                model.add(x[p, b] == 1)
            model.add(lead[p, live[0]] == 1)


def _count_bands(m: _Model, constraints: Constraints) -> list[tuple[dict, int, int, int]]:
    """Per count (replicas, leaders) and broker: (variables counted, broker, low, high) of its band, strictly
    within the slack of the weighted share."""
    eligible, rf = m.view.eligible, m.prepared["rf"].tolist()
    weight = np.array([m.view.weight_of[b] for b in eligible])
    out = []
    for counted, total, slack in (
        (m.x, int(sum(rf)), constraints.balanced_slack(leaders=False)),
        (m.lead, len(rf), constraints.balanced_slack(leaders=True)),
    ):
        for k, b in enumerate(eligible):
            share = total * weight[k] / weight.sum()
            out.append((counted, b, math.floor(share - slack + 1e-9) + 1, math.ceil(share + slack - 1e-9) - 1))
    return out


def _every_threshold(brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints) -> _Model:
    """The hard rules, the counts within their bands, every load goal within its threshold, and no topic
    moving replicas A -> B and B -> A."""
    m = _hard_rules(brokers, parts, constraints)
    model, n = m.model, len(m.prepared)
    for counted, b, low, high in _count_bands(m, constraints):
        model.add_linear_constraint(sum(counted[p, b] for p in range(n)), low, high)
    for carried, limit in _limited_goals(m, constraints):
        model.add(carried <= limit)
    _no_back_and_forth(model, m.x, m.prepared["topic"].tolist(), m.prepared["current"].tolist(), m.view.eligible)
    return m


def fewest_moves(
    brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints | None = None, seconds: float = 10.0
) -> Optimum:
    constraints = constraints or Constraints()
    m = _every_threshold(brokers, parts, constraints)
    model, x, n, eligible = m.model, m.x, len(m.prepared), m.view.eligible
    live = m.prepared["current"].tolist()
    model.minimize(sum(x[p, b] for p in range(n) for b in eligible if b not in live[p]))
    solver = _solver(seconds)
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        layout = [
            sorted((b for b in eligible if solver.value(x[p, b])), key=lambda b: -solver.value(m.lead[p, b]))
            for p in range(n)
        ]
        return Optimum("optimal", round(solver.objective_value), layout)
    return Optimum("infeasible" if status == cp_model.INFEASIBLE else "unknown", None)


def best_loads(
    brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints | None = None, seconds: float = 2.0
) -> list[float] | None:
    """Where the thresholds cannot all be met: the best each load goal reaches in priority order, as its most
    loaded broker over its lower bound, what a plan is compared with.

    Under the same rules as :func:`fewest_moves` (the topic rule too: a plan
    never moves replicas of one topic A -> B and B -> A). Solved one goal at
    a time (lexicographically, as the goals are ranked): first the counts as close to their bands as the racks allow
    (the least total distance outside them), then each goal's peak as low
    as it goes, but no lower than its threshold, with every earlier goal
    kept at what it reached. ``seconds`` per solve; a solve stopped by the
    time limit gives its best plan found (so a figure may be above the true
    optimum, never below). Where a goal's solve finds no plan in time, the goals before it are returned;
    None: not even the first.
    """
    constraints = constraints or Constraints()
    m = _hard_rules(brokers, parts, constraints)
    model, n = m.model, len(m.prepared)
    outside = []
    for counted, b, low, high in _count_bands(m, constraints):
        out = model.new_int_var(0, n * 8, "")
        count = sum(counted[p, b] for p in range(n))
        model.add(out >= count - high)
        model.add(out >= low - count)
        outside.append(out)
    _no_back_and_forth(model, m.x, m.prepared["topic"].tolist(), m.prepared["current"].tolist(), m.view.eligible)
    model.minimize(sum(outside))
    solver = _solver(seconds)
    if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    model.add(sum(outside) <= round(solver.objective_value))
    reached, held = [], list[tuple[_Goal, float]]()
    for goal in _load_goals(m, constraints):
        if len(set(goal.capacity.tolist())) > 1:
            raise ValueError("best_loads: brokers of one capacity only")
        reachable = _reachable(m, constraints, goal, held)  # the earlier goals met are held within their limits
        limit = math.floor(goal.ratio * reachable * goal.capacity[0] / goal.unit)
        peak = model.new_int_var(0, 10**8, "")
        for amount in goal.carried:
            model.add(amount <= peak)
        model.minimize(peak)
        solver = _solver(seconds)
        if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            break  # the goals before this one stand: each was reached with the earlier ones kept
        best = max(round(solver.objective_value), limit)
        model.add(peak <= best)
        reached.append(best / (goal.bound * goal.capacity[0] / goal.unit))
        if best == limit and _leads_more(goal):
            held.append((goal, goal.ratio * reachable))
    return reached or None


def relaxed_least_peak(
    brokers: pd.DataFrame, parts: pd.DataFrame, goal: str, constraints: Constraints | None = None
) -> float:
    """The lowest peak load goal ``goal`` reaches, over its lower bound, in the linear relaxation (GLOP) of only
    what a reachable bound may assume: every partition's RF on eligible brokers spanning its racks, one leader,
    the caps, the leader counts within their bands, and each earlier goal a leader carries more of within its
    threshold. The relaxation's optimum is below any plan's, so a rack floor above it is no lower bound."""
    constraints = constraints or Constraints()
    m = _hard_rules(brokers, parts, constraints)  # for the prepared inputs and the bands: its model is not solved
    lp, x, lead = _relaxation(m, constraints)
    eligible = m.view.eligible

    def carried(load: _Goal, k: int, b: int) -> object:
        amounts = zip(load.as_leader.tolist(), load.as_follower.tolist())
        return sum(f * x[p, b] + (a - f) * lead[p, b] for p, (a, f) in enumerate(amounts)) / float(load.capacity[k])

    held = list[tuple[_Goal, float]]()
    for load in _load_goals(m, constraints):
        reachable = _reachable(m, constraints, load, held)
        if load.name == goal:
            peak = lp.NumVar(0, lp.infinity(), "")
            for k, b in enumerate(eligible):
                lp.Add(carried(load, k, b) <= peak)
            lp.Minimize(peak)
            if lp.Solve() != pywraplp.Solver.OPTIMAL:
                raise RuntimeError(f"relaxed_least_peak: no optimum of the relaxation for {goal}")
            return float(peak.solution_value()) / load.bound
        if _leads_more(load):
            for k, b in enumerate(eligible):
                lp.Add(carried(load, k, b) <= load.ratio * reachable)
            held.append((load, load.ratio * reachable))
    raise ValueError(f"relaxed_least_peak: no goal {goal}")


def _relaxation(m: _Model, constraints: Constraints):  # type: ignore[no-untyped-def]
    """The linear relaxation of the hard rules (placement rules aside) and the leader bands: (solver, x, lead)."""
    view, rf = m.view, m.prepared["rf"].tolist()
    eligible, n = view.eligible, len(rf)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    x = {(p, b): lp.NumVar(0, 1, "") for p in range(n) for b in eligible}
    lead = {(p, b): lp.NumVar(0, 1, "") for p in range(n) for b in eligible}
    racks = sorted({view.domain_of[b] for b in eligible})
    for p in range(n):
        lp.Add(sum(x[p, b] for b in eligible) == rf[p])
        lp.Add(sum(lead[p, b] for b in eligible) == 1)
        spans = []
        for d in racks:
            used = lp.NumVar(0, 1, "")
            lp.Add(used <= sum(x[p, b] for b in eligible if view.domain_of[b] == d))
            spans.append(used)
        lp.Add(sum(spans) >= view.required_domains(rf[p]))
        for b in eligible:
            lp.Add(lead[p, b] <= x[p, b])
    for b in eligible:
        if view.max_replicas.get(b, math.inf) < math.inf:
            lp.Add(sum(x[p, b] for p in range(n)) <= int(view.max_replicas[b]))
    for counted, b, low, high in _count_bands(m, constraints):
        if counted is m.lead:
            lp.Add(sum(lead[p, b] for p in range(n)) >= low)
            lp.Add(sum(lead[p, b] for p in range(n)) <= high)
    return lp, x, lead


@dataclass(frozen=True)
class SoftBest:
    """The soft placement rules at their best with every threshold met: per rule index, the fewest replicas
    off its ``prefer_tags`` brokers, and the fewest partitions with no replica in its ``leader_racks`` (what
    a plan's replicas decide: the planner then leads each partition from its first preferred rack it has a
    replica in, a pass of its own that moves no data)."""

    prefer: dict[int, int]
    leader_racks: dict[int, int]


def soft_goals(
    brokers: pd.DataFrame, parts: pd.DataFrame, constraints: Constraints, seconds: float = 5.0
) -> SoftBest | None:
    """Where the thresholds can all be met (:func:`fewest_moves`' model, its objective aside): the soft rules
    as goals after them, in the planner's order (docs/placement.md), each solved to its best with the ones
    before kept there: ``prefer_tags`` below strength 1.0 (0.0: ignored), the strongest rule first, then
    ``leader_racks``, in rule order. None: the thresholds cannot all be met (or no plan found in time).

    A time-limited solve gives its best plan found, so a figure may be
    above the true optimum (flattering the plan compared), never below.
    """
    m = _every_threshold(brokers, parts, constraints)
    model, x, n, eligible = m.model, m.x, len(m.prepared), m.view.eligible
    rules = [rule_of(t, constraints) for t in m.prepared["topic"]]
    goals = []  # (kind, rule index, count of what misses it)
    for r in sorted(range(len(constraints.placement)), key=lambda r: -constraints.placement[r].prefer_strength):
        rule = constraints.placement[r]
        if rule.prefer_tags and 0 < rule.prefer_strength < 1:
            tagged = [b for b in eligible if _carries(constraints.broker_tags.get(b, {}), rule.prefer_tags)]
            off = [x[p, b] for p in range(n) if rules[p] == r for b in eligible if b not in tagged]
            goals.append(("prefer", r, sum(off)))
    for r, rule in enumerate(constraints.placement):
        if rule.leader_racks and not rule.frozen:
            missing = []
            for p in (p for p in range(n) if rules[p] == r):
                inside = [x[p, b] for b in eligible if m.view.domain_of[b] in rule.leader_racks]
                none = model.new_bool_var("")
                model.add(sum(inside) + none >= 1)  # none is 1 where no replica sits in the racks
                missing.append(none)
            goals.append(("leader_racks", r, sum(missing)))
    best: dict[str, dict[int, int]] = {"prefer": {}, "leader_racks": {}}
    for kind, r, misses in goals or [("", -1, 0)]:
        model.minimize(misses)
        solver = _solver(seconds)
        if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        if kind:
            reached = round(solver.objective_value)
            model.add(misses <= reached)
            best[kind][r] = reached
    return SoftBest(best["prefer"], best["leader_racks"])


def _carries(tags: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(tags.get(k) == v for k, v in wanted.items())


def _solver(seconds: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 2
    solver.parameters.random_seed = 0
    return solver


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


def rack_floor(
    racks: list[str],
    capacity: np.ndarray,
    spans: np.ndarray,
    follower: np.ndarray,
    leader: np.ndarray | None = None,
    leaders_low: np.ndarray | None = None,
    held: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, float]] = (),
) -> float:
    """The least load per unit of capacity the rack rule forces on some set of racks: a partition spanning
    ``s`` of ``D`` racks keeps at least ``s - (D - m)`` replicas (each carrying at least its follower amount)
    in any ``m`` racks, so those racks' brokers together carry at least that much; with ``leader`` amounts and
    each broker's least leader count (``leaders_low``), the racks' brokers also lead at least that many, each
    adding at least the smallest leader-over-follower amounts. Tried over every set of racks, not only the
    smallest ones (the planner takes the smallest ``m`` where no goal is held: the two must agree).

    Or, with ``held`` earlier goals (leader amount, follower amount, capacity per broker, limit per unit of
    capacity), each kept within its limit: the other racks hold at least ``s - m`` replicas of each partition,
    which leaves them room to lead only so much of the held goal's leader-over-follower amount; leading a
    partition whose held amount that does not raise costs them nothing, any other gives at most the best
    ratio of this goal's amount to the held one's. The chosen racks lead the rest."""
    names = sorted(set(racks))
    room = {r: float(sum(c for c, x in zip(capacity, racks) if x == r)) for r in names}
    extra = np.sort(np.maximum(leader - follower, 0)) if leader is not None else None
    best = 0.0
    for m in range(1, len(names)):
        need = float((np.maximum(spans - (len(names) - m), 0) * follower).sum())
        for chosen in itertools.combinations(names, m):
            carried = need
            if extra is not None and leaders_low is not None:
                leading = int(sum(low for low, x in zip(leaders_low, racks) if x in chosen))
                led = float(extra[:leading].sum())
                for held_leader, held_follower, held_capacity, limit in held:
                    led = max(
                        led,
                        _led_past(
                            leader,
                            follower,
                            held_leader,
                            held_follower,
                            held_capacity,
                            limit,
                            [x not in chosen for x in racks],
                            np.maximum(spans - m, 0),
                        ),
                    )
                carried += led
            best = max(best, carried / sum(room[r] for r in chosen))
    return best


def _led_past(leader, follower, held_leader, held_follower, held_capacity, limit, outside, kept_outside) -> float:  # type: ignore[no-untyped-def]
    """What a set of racks must lead of a goal's leader-over-follower amounts when the brokers ``outside`` it
    keep a held goal within ``limit`` per unit of capacity while holding ``kept_outside`` replicas of each
    partition (a fractional knapsack's bound, see :func:`rack_floor`)."""
    gain = [max(a - f, 0.0) for a, f in zip(leader, follower)]
    cost = [max(a - f, 0.0) for a, f in zip(held_leader, held_follower)]
    room = limit * sum(c for c, out in zip(held_capacity, outside) if out)
    room -= sum(k * f for k, f in zip(kept_outside, held_follower))
    free = sum(g for g, c in zip(gain, cost) if c <= 0)
    ratio = max((g / c for g, c in zip(gain, cost) if c > 0), default=0.0)
    total = sum(gain)
    return total - min(total, free + max(room, 0.0) * ratio)


@dataclass
class _Goal:
    """One load goal of the oracle: its amounts, capacities, threshold and lower bound, and each broker's
    carried amount as a model expression (integers: a millionth of the goal's total)."""

    name: str
    as_leader: np.ndarray
    as_follower: np.ndarray
    capacity: np.ndarray
    ratio: float
    bound: float
    unit: float
    carried: list


def _load_goals(m: _Model, constraints: Constraints) -> list[_Goal]:
    """The load goals in priority order (as [planner.balanced] names them), each broker's carried amount per
    goal as a model expression."""
    eligible, prepared = m.view.eligible, m.prepared
    weight = np.array([m.view.weight_of[b] for b in eligible])
    disk = pd.to_numeric(m.brokers.set_index("broker_id")["disk_capacity_bytes"], errors="coerce").reindex(eligible)
    disk_capacity = disk.to_numpy(dtype=float) if disk.notna().all() else weight
    size = prepared["size_bytes"].to_numpy(dtype=float)
    bytes_in = prepared["bytes_in"].to_numpy(dtype=float)
    zero = np.zeros(len(prepared))
    rf = prepared["rf"].to_numpy()
    goals = [  # each with its own threshold, as [planner.balanced] names them
        ("disk", size, size, disk_capacity),
        ("bytes_in", bytes_in, bytes_in, weight),
        ("bytes_out", prepared["bytes_out"].to_numpy(dtype=float), zero, weight),
        (
            "load",
            prepared["leader_load"].to_numpy(dtype=float),
            prepared["follower_load"].to_numpy(dtype=float),
            weight,
        ),
        ("leader_bytes_in", bytes_in, zero, weight),
    ]
    out = []
    for goal, as_leader, as_follower, capacity in goals:
        total = float((as_leader + (rf - 1) * as_follower).sum())
        if total <= 0:
            continue
        bound = max(total / capacity.sum(), float(max(as_leader.max(), as_follower.max())) / capacity.max())
        unit = total / 1e6  # integer amounts: a millionth of the total
        leader_amount = np.round(as_leader / unit).astype(int).tolist()
        follower_amount = np.round(as_follower / unit).astype(int).tolist()
        carried = [
            sum(
                follower_amount[p] * m.x[p, b] + (leader_amount[p] - follower_amount[p]) * m.lead[p, b]
                for p in range(len(prepared))
            )
            for b in eligible
        ]
        out.append(
            _Goal(goal, as_leader, as_follower, capacity, constraints.balanced_ratio(goal), bound, unit, carried)
        )
    return out


def _reachable(m: _Model, constraints: Constraints, goal: _Goal, held: list[tuple[_Goal, float]]) -> float:
    """A goal's reachable bound per unit of capacity: its lower bound, or the rack floor where higher, with the
    earlier goals ``held`` (each with its limit per unit of capacity) kept within their limits."""
    eligible, rf = m.view.eligible, m.prepared["rf"].to_numpy()
    racks = [m.view.domain_of[b] for b in eligible]
    leaders_low = np.array([low for counted, _, low, _ in _count_bands(m, constraints) if counted is m.lead])
    spans = np.minimum(rf, len(set(racks))) if constraints.rack_aware else np.ones(len(rf), dtype=int)
    with_leaders = [(g.as_leader, g.as_follower, g.capacity, limit) for g, limit in held]
    floor = rack_floor(racks, goal.capacity, spans, goal.as_follower, goal.as_leader, leaders_low, with_leaders)
    return max(goal.bound, floor)


def _leads_more(goal: _Goal) -> bool:
    """Does a leader carry more of the goal than a follower (bytes out, the load, leader bytes in)?"""
    return bool((goal.as_leader > goal.as_follower).any())


def _limited_goals(m: _Model, constraints: Constraints) -> list[tuple[object, int]]:
    """Each broker's carried amount per goal and its limit, the ratio x the reachable bound, every earlier goal
    held within its own."""
    out, held = [], list[tuple[_Goal, float]]()
    for goal in _load_goals(m, constraints):
        reachable = _reachable(m, constraints, goal, held)
        for k, amount in enumerate(goal.carried):
            out.append((amount, math.floor(goal.ratio * reachable * goal.capacity[k] / goal.unit)))
        if _leads_more(goal):
            held.append((goal, goal.ratio * reachable))
    return out
