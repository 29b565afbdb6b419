"""Plan one cluster: validate, assign, check, diff, measure. Pure pandas.

This is the whole per-cluster computation the Spark job runs inside
``applyInPandas``; it is also what the unit tests and benchmarks call.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from assigners import balanced, hashing, lpt, range_assign, round_robin, sticky
from assigners.balance import balance_leaders
from assigners.budget import apply_move_budget
from assigners.cores import assign_cores
from assigners.diff import DIFF_COLUMNS, diff_assignment
from assigners.errors import PlanningError, UnknownStrategyError
from assigners.leadership import LeaderRules, apply_leader_rules
from assigners.live import drifted, settle_in_flight, uneven_replication_factors
from assigners.metrics import PlanMetrics, partition_load, plan_metrics
from assigners.model import (
    ASKED_FOR,
    NOTES,
    SKIP_REASON,
    ClusterView,
    Constraints,
    Strategy,
    assignment_frame,
    live_matrix,
    prepare_brokers,
    prepare_partitions,
    replica_matrix,
)
from assigners.policies import (
    Placement,
    check_placement,
    enforce_placement,
    leader_racks_of,
    leaders_pinned,
    prefer_leader_racks,
    resolve_placement,
    with_broker_rules,
)
from assigners.validate import (
    check_feasible,
    config_entries_not_in_cluster,
    plan_violations,
    same_keys,
    validate_brokers,
    validate_loads,
    validate_partitions,
    validate_plan,
    validate_racks,
)
from assigners.waves import WaveCaps

# The registry: adding a strategy is its module (with its ``Strategy`` record) and one entry here.
STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        balanced.STRATEGY,
        hashing.RING,
        lpt.STRATEGY,
        range_assign.STRATEGY,
        hashing.RENDEZVOUS,
        round_robin.STRATEGY,
        sticky.STRATEGY,
    )
}

COMMITTED, SKIPPED, FAILED = "committed", "skipped", "failed"

PLANNED_COLUMNS = ["topic", "partition", "load", "cores", *DIFF_COLUMNS]


@dataclass(frozen=True)
class PlanRequest:
    """Everything besides the two frames that one cluster's plan depends on.

    Parameters
    ----------
    has_previous_plan
        The cluster has a committed plan; the frames then carry its
        ``previous_replicas`` / ``previous_epoch`` per partition.
    previous_partitions
        Partition count of that plan, to notice deleted partitions.
    previous_version
        Its version number, for the notes.
    wave_caps
        Caps and order of the execution waves (``waves.WaveCaps``).
    allow_worse
        Commit a plan that lowers the balance score although nothing forces
        a change (by default such a plan is ``skipped``).
    """

    cluster_id: str
    strategy: str = "balanced"
    constraints: Constraints = field(default_factory=Constraints)
    seed: int = 0
    has_previous_plan: bool = False
    previous_partitions: int = 0
    previous_version: int = 0
    wave_caps: WaveCaps = field(default_factory=WaveCaps)
    allow_worse: bool = False


@dataclass
class PlanResult:
    """One cluster's outcome. ``error`` is set only when ``failed``; ``notes`` say everything else.

    ``warnings`` are the notes an operator should see on the terminal too
    (config entries that name nothing in this cluster).
    """

    status: str
    planned: pd.DataFrame
    metrics: PlanMetrics | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _empty_planned() -> pd.DataFrame:
    return pd.DataFrame({c: [] for c in PLANNED_COLUMNS})


def plan_cluster(brokers: pd.DataFrame, partitions: pd.DataFrame, request: PlanRequest) -> PlanResult:
    """Compute, check and diff the new plan of one cluster.

    Parameters
    ----------
    brokers
        The snapshot's broker rows (``schemas.BROKERS`` columns).
    partitions
        The snapshot's partition rows, with ``bytes_in`` / ``bytes_out`` /
        ``has_throughput`` joined from the throughput table and, when a plan
        exists, ``previous_replicas`` / ``previous_epoch`` from it.

    Returns
    -------
    PlanResult
        ``committed`` with the planned rows; ``skipped`` when the target is
        the plan already in force, or when it would lower the balance score
        with nothing forcing a change (unless ``allow_worse``); or ``failed``
        with the error message (and no rows). Moves and every "before"
        figure are measured against the live layout of the snapshot.
    """
    # A plan allocates millions of short-lived lists and ints that hold no cycles;
    # the cyclic collector rescanning them cost up to a third of the run.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _plan(brokers, partitions, request)
    except PlanningError as exc:
        return PlanResult(FAILED, _empty_planned(), error=str(exc.for_cluster(request.cluster_id)))
    finally:
        if gc_was_enabled:
            gc.enable()


def _previous_epochs(partitions: pd.DataFrame) -> pd.Series:
    """Previous plan's epoch per partition, in prepared (topic, partition) order; NaN where none."""
    if "previous_epoch" not in partitions:
        return pd.Series(np.full(len(partitions), np.nan))
    ordered = partitions.sort_values(["topic", "partition"], kind="stable")
    return pd.to_numeric(ordered["previous_epoch"]).reset_index(drop=True)


def _plan(brokers: pd.DataFrame, partitions: pd.DataFrame, request: PlanRequest) -> PlanResult:
    if request.strategy not in STRATEGIES:
        raise UnknownStrategyError(f"{request.strategy!r}; known: {', '.join(sorted(STRATEGIES))}", table="config")
    if partitions.empty:
        return PlanResult(SKIPPED, _empty_planned(), notes=["no partitions in the snapshot: nothing to plan"])
    partitions, notes, drift = _read_snapshot(brokers, partitions, request)

    constraints = with_broker_rules(request.constraints, brokers)  # the brokers table's tags and taints too
    prepared_brokers = prepare_brokers(brokers, constraints)
    prepared = prepare_partitions(partitions, constraints)
    view = ClusterView.from_brokers(prepared_brokers, constraints)
    check_feasible(prepared, view)
    placement, live = _placement(constraints, prepared, view)

    assignment = STRATEGIES[request.strategy].assign(prepared_brokers, prepared, constraints, request.seed)
    rules = LeaderRules.resolve(constraints, prepared)
    warnings = config_entries_not_in_cluster(constraints, prepared, prepared_brokers, rules.missing)
    if warnings:
        notes.append(f"config names what this cluster lacks: {'; '.join(warnings)}")
    notes.extend(assignment.attrs.get(NOTES, []))
    skip_reason = assignment.attrs.get(SKIP_REASON)
    asked_for = assignment.attrs.get(ASKED_FOR)
    if drift:
        notes.append(_drift_note(request, drift))
    # the live layout never moves a frozen partition: only a forbidden broker, or a leader to prefer, makes it stale
    live_breaks_placement = (
        placement is not None
        and live is not None
        and (bool(placement.breaks(live).any()) or _leaders_to_prefer(prepared, view, placement))
    )
    if skip_reason and not rules.active and not drift and not live_breaks_placement:
        notes = [*notes, *_still_pending(prepared, request), skip_reason]
        return PlanResult(SKIPPED, _empty_planned(), notes=notes, warnings=warnings)
    if not same_keys(prepared, assignment):
        validate_plan(prepared, assignment, view)  # names the partitions missing, extra or planned twice
        assignment = prepared[["topic", "partition"]].merge(assignment, on=["topic", "partition"], how="left")
    rows = [list(r) for r in assignment["replicas"]]
    placed: frozenset[int] = frozenset()
    if placement is not None:  # every strategy keeps the placement rules: repaired here, checked below
        placement_notes, placed = enforce_placement(rows, prepared, view, placement, live)
        passed = prefer_leader_racks(rows, view, placement, prepared["current"].tolist())[0]
        notes.extend([*placement_notes, *passed])
    extras = _apply_rules(rows, prepared, view, constraints, rules, request.strategy, notes, placed, placement)
    assignment = assignment_frame(prepared["topic"].to_numpy(), prepared["partition"].to_numpy(), rows)
    target = replica_matrix(rows)
    validate_plan(prepared, assignment, view, rules, target, placement)
    del rows, assignment  # the matrix says it all from here: at 1M partitions the lists are ~90 MB of the peak
    live = live_matrix(prepared) if live is None else live

    epochs = _previous_epochs(partitions)
    in_plan = epochs.notna().to_numpy() if request.has_previous_plan else np.zeros(len(prepared), dtype=bool)
    diff = diff_assignment(
        target,
        live,
        replica_matrix([p or [] for p in prepared["previous"].tolist()]),
        in_plan,
        epochs.fillna(0).to_numpy(dtype=np.int64),
        prepared["size_bytes"].to_numpy(),
        request.has_previous_plan,
        request.wave_caps,
        tuple(prepared_brokers.loc[~prepared_brokers["eligible"], "broker_id"].tolist()),
    )
    planned = pd.concat([prepared[["topic", "partition"]], diff], axis=1)
    planned["cores"] = (
        assign_cores(  # on the diff's lists: an unchanged partition keeps its live (or planned) follower order
            planned["replicas"].tolist(),
            [p or [] for p in prepared["previous"].tolist()],
            prepared["previous_cores"].tolist(),
            view,
            constraints.core_capacity,
        )
        if constraints.assign_cores
        else None
    )
    planned["load"] = partition_load(
        prepared["leader_load"].to_numpy(), prepared["follower_load"].to_numpy(), prepared["rf"].to_numpy()
    )
    changed = planned["kind"].notna()
    metrics = _unmeasured_as_null(
        replace(
            plan_metrics(prepared, live, target, prepared_brokers, view, leader_racks_of(placement)),
            affinity_hints_unmet=extras["affinity_hints_unmet"],
            moves_deferred=extras["moves_deferred"],
            partitions_moved=int(changed.sum()),
            waves=int(planned["wave"].max()) if changed.any() else 0,
        ),
        planned,
        prepared,
        partitions,
    )
    status = _judge(
        planned,
        metrics,
        epochs,
        in_plan,
        replace(request, allow_worse=True) if asked_for else request,
        forced=lambda: bool(
            drift
            or live_breaks_placement
            or plan_violations(prepared, _live_frame(prepared), view, rules, live, most=1)
        ),
        notes=notes,
        drifted=bool(drift),
    )
    return PlanResult(status, planned[PLANNED_COLUMNS], metrics, notes=notes, warnings=warnings)


def _leaders_to_prefer(prepared: pd.DataFrame, view: ClusterView, placement: Placement) -> bool:
    """Would the rules' ``leader_racks`` pass a leadership of the live layout (so it is not kept as it is)?"""
    live = [list(r) for r in prepared["current"]]
    prefer_leader_racks(live, view, placement)
    return bool(live != prepared["current"].tolist())


def _read_snapshot(
    brokers: pd.DataFrame, partitions: pd.DataFrame, request: PlanRequest
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Validate the snapshot and read it honestly (``assigners.live``): the partitions with reassignments in
    flight at their target, the notes so far, and the partitions that drifted from the plan in force."""
    validate_brokers(brokers)
    validate_racks(brokers, request.constraints)
    validate_partitions(partitions, brokers["broker_id"])
    validate_loads(partitions)
    partitions, notes = settle_in_flight(partitions)
    if request.constraints.default_replication_factor is None:
        notes.extend(uneven_replication_factors(partitions, set(request.constraints.replication_factor)))
    if "size_bytes" in partitions and (unsized := int(partitions["size_bytes"].isna().sum())):
        noun = "partition has" if unsized == 1 else "partitions have"
        notes.append(f"{unsized} {noun} no size_bytes (import without --log-dirs?): what their moves copy is unknown")
    if "has_throughput" in partitions:
        missing = int((~partitions["has_throughput"].astype(bool)).sum())
        if missing:
            noun = "partition" if missing == 1 else "partitions"
            notes.append(f"{missing} {noun} without throughput rows planned with zero load")
    return partitions, notes, drifted(partitions) if request.has_previous_plan else []


def _unmeasured_as_null(
    metrics: PlanMetrics, planned: pd.DataFrame, prepared: pd.DataFrame, partitions: pd.DataFrame
) -> PlanMetrics:
    """Unknown is not zero: a move that copies a replica of unknown size has no ``bytes_to_move`` (nor has the
    plan, then), and without a single throughput row the load figures are unknown, not 0.00. In place on
    ``planned``; a leader-only change copies nothing, so its 0 bytes are known."""
    sized = prepared["size_known"].to_numpy()
    unknown = np.zeros(len(planned), dtype=bool)
    if not sized.all():  # the copies are listed only where a size is missing
        copies = np.array([a is not None and len(a) > 0 for a in planned["added_brokers"]], dtype=bool)
        unknown = copies & ~sized
    if unknown.any():
        planned["bytes_to_move"] = planned["bytes_to_move"].astype("Int64").mask(unknown)
        metrics = replace(metrics, bytes_to_move=None)
    if "has_throughput" in partitions:  # the job's frames: joined throughput rows
        measured = bool(partitions["has_throughput"].astype(bool).any())
    else:  # rates given directly (tests, benchmarks)
        measured = "bytes_in" in partitions or "bytes_out" in partitions
    if not measured:
        metrics = replace(metrics, max_load_before=None, max_load_after=None, load_lower_bound=None)
    return metrics


def _still_pending(prepared: pd.DataFrame, request: PlanRequest) -> list[str]:
    """Where a strategy keeps the plan in force (within its thresholds), whether that plan is executed yet:
    an operator reading "nothing to change" must still learn that the last plan waits to be run."""
    if not request.has_previous_plan:
        return []
    pending = sum(
        previous is not None and list(previous) != list(current)
        for previous, current in zip(prepared["previous"], prepared["current"])
    )
    return [_pending_note(request, pending)] if pending else []


def _pending_note(request: PlanRequest, pending: int) -> str:
    version = f"v{request.previous_version}" if request.previous_version else "the plan in force"
    return (
        f"{version} still pending: {pending} partitions not at their planned layout"
        if pending
        else f"{version} is in force and the cluster is at its planned layout: nothing to change"
    )


def _drift_note(request: PlanRequest, drift: list[str]) -> str:
    """The plan in force no longer describes these partitions: this version starts from where they are."""
    version = f"v{request.previous_version}" if request.previous_version else "the plan in force"
    noun = "partition" if len(drift) == 1 else "partitions"
    return (
        f"{len(drift)} {noun} drifted from {version} (at neither its baseline nor its target), so this version "
        f"starts from where {'it is' if len(drift) == 1 else 'they are'} and keeps the targets still legal: "
        + "; ".join(drift)
    )


def _live_frame(prepared: pd.DataFrame) -> pd.DataFrame:
    return assignment_frame(prepared["topic"].to_numpy(), prepared["partition"].to_numpy(), prepared["current"])


def _judge(
    planned: pd.DataFrame,
    metrics: PlanMetrics,
    epochs: pd.Series,
    in_plan: np.ndarray,
    request: PlanRequest,
    forced: Callable[[], bool],
    notes: list[str],
    drifted: bool = False,
) -> str:
    """committed, or skipped when the target is the plan in force or (unforced) makes the cluster worse.

    ``forced``: does the live layout break a rule, or has it drifted from the plan in force (so a new version
    must describe it)? Asked only when the score drops. ``drifted``: the plan in force no longer describes the
    cluster, so even the same targets make a new version (its moves start from the drifted layout).
    """
    pending = metrics.partitions_moved
    same_as_previous = (
        not drifted
        and request.has_previous_plan
        and bool(in_plan.all())
        and request.previous_partitions == len(planned)
        and bool((planned["epoch"].to_numpy() == epochs.to_numpy()).all())
    )
    if same_as_previous:
        notes.append(_pending_note(request, pending))
        return SKIPPED
    worse = metrics.balance_score_after < metrics.balance_score_before
    must_change = worse and forced()
    if worse and not must_change and not request.allow_worse:
        notes.append(
            f"the plan would lower the balance score from {metrics.balance_score_before:g} to "
            f"{metrics.balance_score_after:g} and nothing forces a change: not committed "
            "(--allow-worse or planner.allow_worse = true commits it)"
        )
        return SKIPPED
    if worse:
        notes.append(
            f"the balance score drops from {metrics.balance_score_before:g} to {metrics.balance_score_after:g}"
            + (" (forced changes)" if must_change else " (allowed by allow_worse)")
        )
    return COMMITTED


def _placement(
    constraints: Constraints, prepared: pd.DataFrame, view: ClusterView
) -> tuple[Placement | None, np.ndarray | None]:
    """The cluster's placement rules, checked (:func:`check_placement`), and with them the live layout's replica
    matrix, which their checks and repairs read (built once: else after the plan, as the diff needs it)."""
    placement = resolve_placement(constraints, prepared, view)
    if placement is None:
        return None, None
    check_placement(placement, prepared, view)
    return placement, live_matrix(prepared)


def _apply_rules(
    rows: list[list[int]],
    prepared: pd.DataFrame,
    view: ClusterView,
    constraints: Constraints,
    rules: LeaderRules,
    strategy: str,
    notes: list[str],
    placed: frozenset[int] = frozenset(),
    placement: Placement | None = None,
) -> dict[str, int]:
    """Leadership rules, then the move budget, on any strategy's plan; in place. ``placed``: partitions the
    placement rules changed (forced: the budget never defers them, and their leaders stay).

    Returns the plan_runs counts they add (unmet affinity hints, deferred moves).
    """
    rebalance = STRATEGIES[strategy].balances_leader_counts
    unmet: list[str] = []
    fixed: frozenset[int] = frozenset()
    if rules.active:
        unmet, fixed = apply_leader_rules(rows, prepared, view, rules, rebalance, placement)
        if unmet:
            notes.append(f"{len(unmet)} affinity hints not met: {'; '.join(unmet[:5])}")
    fixed = fixed | placed
    pinned = leaders_pinned(rows, view, placement)
    if rebalance and pinned and placement is not None:  # leader_racks pinned leaders: the others even out
        balance_leaders(rows, view, fixed | pinned | frozenset(np.flatnonzero(placement.frozen).tolist()))
    budget = apply_move_budget(rows, prepared, view, constraints, fixed)
    notes.extend(budget.notes)
    if budget.moves_deferred and rebalance:
        balance_leaders(rows, view, fixed)  # reverted partitions came back with their old leaders
    return {"affinity_hints_unmet": len(unmet), "moves_deferred": budget.moves_deferred}
