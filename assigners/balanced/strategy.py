"""Goal-based balancing: even replicas, leaders and every load resource with few moves (``balanced``).

Cruise Control's goal optimizer (``GoalOptimizer``, ``AbstractGoal``), offline
and deterministic. Goals run one after another in priority order, and an
action a later goal takes must be accepted by every earlier one (Cruise
Control's ``ActionAcceptance``), so a later goal never pushes an earlier one
past its threshold:

1. replicas per broker, per weight, within ``count_slack`` of the share
   (where racks allow), and leaders the same: :func:`assigners.balance.settle`
   after keeping every legal replica of the preferred layout, as ``sticky``
   (a replica that must go leaves the broker most above its share, the
   leader's too: :func:`assigners.placement.keep_valid_each`);
2. disk: ``size_bytes`` per broker against ``disk_capacity_bytes`` (per
   weight when capacities are unknown);
3. network in: ``bytes_in`` of every replica per broker;
4. network out: ``bytes_out`` of the leaders per broker;
5. load: the weighted load the summary line, the report and
   ``plan_runs.max_load_after`` show (``[planner.load_weights]``: leader
   bytes in + out, follower bytes in by default; Cruise Control's CPU
   estimate has the same shape), held to ``load_ratio``; after network out
   as Cruise Control's default goals rank ``CpuUsageDistributionGoal`` after
   ``NetworkOutboundUsageDistributionGoal``;
6. leader ``bytes_in`` per broker.

Each load goal is met when its most loaded broker (per capacity) is at most
``load_ratio`` times the resource's lower bound, max(total / total capacity,
largest replica / largest capacity) (:func:`assigners.metrics.resource_ratios`).
A goal may have its own threshold (``disk_ratio``, ``replica_slack``, ...:
:meth:`assigners.model.Constraints.balanced_ratio`), as Cruise Control sets a
balance threshold per resource; it is met, noted and accepted against that.
It works off the most loaded broker with Cruise Control's three actions:
leadership transfer (moves no data), single replica move (only while the
replica counts stay within the slack) and replica swap between two brokers
(counts unchanged); and where the most loaded broker can never carry
its one dominant replica (its frozen replicas leave no room), that replica
swapped whole onto a broker that can, kept only where the goal ends met
(:func:`assigners.balanced.goals.dominant_home`). Among the actions
that bring the broker under the threshold, the one moving the fewest bytes
wins (small or cold partitions first, a leadership transfer above all);
otherwise the best gain per byte.
On a large cluster a round also takes the next few actions of its ranking
that add no more moves (:func:`assigners.balanced.goals._apply_more`).
A replica moves at most once in a plan, and never A->B and B->A in one topic.

Where a goal on the leaders' load stays unmet, the leaders are annealed
(:mod:`assigners.balanced.leaders`): leadership moves no data, so a wider
search there costs no move. Where a greedy search ends depends on where
it starts: a cluster that stays short of a reachable goal is searched
again wider and from counts evened in another order, and a small one from
every order (and, where a load goal is still stuck, with that goal
searched first), keeping the plan that meets more goals, then moves
fewer, and then rebuilt around parts of itself while that moves fewer
(:mod:`assigners.balanced.searches`).

A legal cluster that gained empty brokers is a scale-out (Cruise Control's
``add_broker``): replicas move only onto the new brokers, and a goal that
this cannot meet is named in the notes (planning again once it is executed
may even out the rest). A legal cluster already within every threshold is
left as it is (``skipped``).
Goals that cannot be met are named in the notes with the broker and the
partition that stands in the way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from assigners.balance import balance_leaders, settles_as_it_is
from assigners.balanced.donate import donate, donation_amounts
from assigners.balanced.offload import offload
from assigners.balanced.prefer import search_preferring, soft_rules
from assigners.balanced.searches import Plan, reach_goals
from assigners.balanced.state import GoalSearch, Resource, counts_outside_bands
from assigners.model import (
    ASKED_FOR,
    NOTES,
    SKIP_REASON,
    ClusterView,
    Constraints,
    Strategy,
    StrategyOption,
    assignment_frame,
    layout_matrix,
    live_matrix,
    topic_codes,
)
from assigners.placement import Usage, evict_over_capacity, keep_valid_each, refill
from assigners.policies import repair_placement, resolve_placement

LOAD_GOALS = ("disk", "bytes_in", "bytes_out", "load", "leader_bytes_in")  # in priority order; see _resources
OWN_RATIOS = ("disk", "bytes_in", "bytes_out", "leader_bytes_in")  # load's threshold is the shared load_ratio


def assign(brokers: pd.DataFrame, partitions: pd.DataFrame, constraints: Constraints, seed: int = 0) -> pd.DataFrame:
    """Keep the preferred layout where legal, even out the counts, then each load goal in turn.

    Examples
    --------
    >>> from assigners.model import prepare_brokers, prepare_partitions
    >>> b = prepare_brokers(pd.DataFrame({"broker_id": [1, 2, 3, 4], "rack": ["a", "b", "a", "b"],
    ...     "state": ["active"] * 4}), Constraints())
    >>> p = prepare_partitions(pd.DataFrame({"topic": ["t"] * 4, "partition": [0, 1, 2, 3],
    ...     "replicas": [[1, 2], [1, 2], [1, 2], [3, 4]], "bytes_in": [5.0, 5.0, 1.0, 1.0],
    ...     "bytes_out": [0.0] * 4}), Constraints())
    >>> assign(b, p, Constraints())["replicas"].tolist()  # 2 moves even the counts; the hot partitions sit apart
    [[2, 3], [4, 1], [1, 2], [3, 4]]
    """
    view = ClusterView.from_brokers(brokers, constraints)
    topics = partitions["topic"].tolist()
    numbers = partitions["partition"].tolist()
    preferred = partitions["preferred"].tolist()
    rf = partitions["rf"].tolist()
    resources = _resources(partitions, brokers, view)
    options = constraints
    preferred_matrix = layout_matrix(preferred, partitions)
    replicas = keep_valid_each(preferred, rf, view, even_out=True, matrix=preferred_matrix)
    preferred = [list(r) for r in preferred]
    placement = resolve_placement(options, partitions, view)
    if placement is not None:  # what the rules forbid goes now (the frozen stay): the layout is not kept as it is
        repair_placement(replicas, partitions, view, placement)
    if options.balanced_mode == "offload":
        return _offloaded(replicas, partitions, view, resources, options)
    # is the layout as it is as even as the counts go? None: only the count balancing can tell, asked only
    # where the answer counts (a drifted 10k layout: 8 ms to learn what a plan meeting more goals never reads)
    preferred_even: bool | None = False
    preferred_met: list[bool] = []
    empty = frozenset[int]()
    if view.eligible and replicas == preferred:  # every replica may stay: judge the layout as it is
        kept = GoalSearch(preferred, partitions, view, resources, options, matrix=preferred_matrix)
        preferred_even, preferred_met = _even_by_bands(kept, view), kept.goals_met()
        empty = frozenset(int(b) for b, n in zip(kept.brokers, kept.count) if n == 0)
        del kept  # one search alive at a time: at 1M partitions each holds ~1 GiB
    del preferred_matrix  # where a pending plan is preferred, its own matrix (the live one is kept per frame)
    soft = placement is not None and bool(placement.preferred or any(rule.leader_racks for rule in placement.rules))
    if all(preferred_met) and (preferred_even := _settles(preferred_even, preferred, partitions, view)):
        return _within_thresholds(preferred, partitions, view, resources, options, soft)
    # a scale-out's donations do not know the placement rules: planned as any other layout there
    onto_new = _onto_new_brokers(partitions, view, resources, options, empty) if empty and placement is None else None
    judge = None  # the search that judged the plan, where one did: the soft rules start from it
    if onto_new is not None:  # a scale-out: replicas land only on the new brokers, the goals as far as that goes
        replicas, (notes, met) = onto_new
        if not all(met):
            new = ", ".join(str(b) for b in sorted(empty))
            notes = [*notes, f"scale-out: replicas move only onto the new brokers {new}; plan again once executed"]
    else:
        (replicas, (notes, met)), judge = search_preferring(replicas, partitions, view, resources, options)
    gains = any(now and not before for before, now in zip(preferred_met, met))
    if preferred_met and not gains:
        preferred_even = _settles(preferred_even, preferred, partitions, view) or (
            # counts the racks force off their bands, as far off in all as the plan's: as even as they go (a
            # rack's brokers may trade a replica up to their held ceiling, GoalSearch.ceiling, and the count
            # balancing would even them back)
            counts_outside_bands(preferred, view, options) <= counts_outside_bands(replicas, view, options)
        )
    if preferred_even and not gains:
        # what is out of reach stays so: moving replicas for a partial gain would only cost moves, and
        # re-planning the plan in force must move nothing (sticky keeps its load pass on the same rule)
        stays = [*notes, "no goal the layout misses can be met: it stays as it is"]
        if soft:  # but the soft rules may still gain, where every goal accepts
            return _softened(preferred, partitions, view, resources, options, stays)
        frame = assignment_frame(topics, numbers, preferred)
        frame.attrs[NOTES] = stays
        return frame
    if soft:
        replicas, (notes, met) = soft_rules((replicas, (notes, met)), partitions, view, resources, options, judge)
    frame = assignment_frame(topics, numbers, replicas)
    frame.attrs[NOTES] = notes
    return frame


def _within_thresholds(
    preferred: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
    soft: bool,
) -> pd.DataFrame:
    """A layout within every threshold: kept as it is (a skip), but for the gains of the soft rules (``soft``:
    there are some) that every goal accepts; they are goals too."""
    if soft:
        frame = _softened(preferred, partitions, view, resources, options, [])
    else:
        frame = assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), preferred)
    if frame["replicas"].map(list).tolist() == preferred:
        gains = "; the soft rules gain nothing every goal accepts" if soft else ""
        frame.attrs[SKIP_REASON] = f"within every balance threshold ({_thresholds(options)}): nothing to change{gains}"
    return frame


def _softened(
    layout: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
    notes: list[str],
) -> pd.DataFrame:
    """A copy of ``layout`` with the soft rules' gains that every goal accepts (:func:`soft_rules`), as a frame
    whose notes are ``notes`` and those of the soft rules still short."""
    replicas = [list(r) for r in layout]
    search = GoalSearch(replicas, partitions, view, resources, options)
    replicas, (soft_notes, _) = soft_rules(
        (replicas, ([], search.goals_met())), partitions, view, resources, options, search
    )
    frame = assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)
    frame.attrs[NOTES] = [*notes, *soft_notes]
    return frame


def _offloaded(
    replicas: list[list[int]],
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
) -> pd.DataFrame:
    """Offload mode (:mod:`assigners.balanced.offload`): the legal part of the preferred layout, the replicas
    above a broker's cap off it and the missing ones on the emptiest legal brokers (forced), then only the
    brokers above the offload threshold give."""
    placement = resolve_placement(options, partitions, view)
    usage = Usage(replicas, partitions["size_bytes"].to_numpy(), view)
    evict_over_capacity(replicas, usage)
    since = partitions["current"].tolist()
    allowed_of = None if placement is None else placement.allowed_of
    refill(replicas, partitions["rf"].to_numpy(), usage, since, topic_codes(partitions), None, allowed_of)
    search = GoalSearch(replicas, partitions, view, resources, options)
    ratio = options.balanced_offload_ratio or options.balanced_load_ratio
    _, notes = offload(search, ratio)
    frame = assignment_frame(partitions["topic"].tolist(), partitions["partition"].tolist(), replicas)
    if not notes and replicas == partitions["preferred"].tolist():
        frame.attrs[SKIP_REASON] = f"offload: no broker above {ratio:g}x a goal's bound: nothing to offload"
    frame.attrs[NOTES] = notes
    frame.attrs[ASKED_FOR] = "offload mode"  # the brokers below the threshold keep their replicas, even if uneven
    return frame


def _onto_new_brokers(
    partitions: pd.DataFrame,
    view: ClusterView,
    resources: list[Resource],
    options: Constraints,
    new: frozenset[int],
) -> Plan | None:
    """With ``new`` brokers that hold nothing yet in a legal layout, the plan whose replicas land only on
    them (or go back home), with its notes and goals met (None when the live layout is not the one to keep,
    or when the rack rule or the caps keep the counts from evening out that way).

    Cruise Control's ``add_broker`` moves replicas only onto the added brokers: an operator scaling out
    expects the old brokers to give, not to trade among themselves. Which replicas each old broker gives
    is chosen by load (:mod:`assigners.balanced.donate`), first by every resource at once, then, while a
    goal stays unmet, by that goal's resource alone; the load goals then take leadership transfers, moves
    onto new brokers and exchanges that send a replica home. The best attempt is returned (goals in
    priority order).
    """
    live = partitions["current"].tolist()
    if live != partitions["preferred"].tolist():
        return None
    sizes = partitions["size_bytes"].to_numpy()
    usage = Usage(live, sizes, view, live_matrix(partitions))
    if any(usage.over_capacity(b) for b in view.eligible):
        return None  # replicas must leave a broker over its cap, wherever they can go
    best: Plan | None = None
    for goal, amounts in donation_amounts(resources):
        if best is not None and (all(best[1][1]) or (goal is not None and best[1][1][goal])):
            continue  # a goal's resource alone is tried only while that goal is unmet
        replicas = donate(
            live, view, new, amounts, resources[0].capacity, Usage(live, sizes, view, live_matrix(partitions))
        )
        if replicas is None:
            return None
        balance_leaders(replicas, view)
        reached = reach_goals(replicas, partitions, view, resources, options, landing=new)
        if best is None or reached[1] > best[1][1]:
            best = replicas, reached
    return best


def _thresholds(options: Constraints) -> str:
    """The thresholds in words, each goal's own where it has one."""
    replicas, leaders = options.balanced_slack(False), options.balanced_slack(True)
    counts = f"counts within {replicas}" if replicas == leaders else f"replicas within {replicas}, leaders {leaders}"
    ratios = {goal: options.balanced_ratio(goal) for goal in LOAD_GOALS}
    if len(set(ratios.values())) == 1:  # one ratio for all, whichever key set it
        return f"{counts}, loads within {ratios['disk']:g}x their bounds"
    return f"{counts}, " + ", ".join(f"{goal} {ratio:g}x" for goal, ratio in ratios.items()) + " their bounds"


def _resources(partitions: pd.DataFrame, brokers: pd.DataFrame, view: ClusterView) -> list[Resource]:
    """The load goals in priority order, with each broker's capacity for them."""
    weight = np.array([view.weight_of[b] for b in view.eligible], dtype=float)
    disk = pd.to_numeric(brokers.set_index("broker_id")["disk_capacity_bytes"], errors="coerce")
    disk_of = disk.reindex(view.eligible).to_numpy(dtype=float)
    disk_capacity = disk_of if len(disk_of) and not np.isnan(disk_of).any() else weight
    sizes = partitions["size_bytes"].to_numpy(dtype=float)
    bytes_in = partitions["bytes_in"].to_numpy(dtype=float)
    zero = np.zeros(len(partitions))
    bytes_out = partitions["bytes_out"].to_numpy(dtype=float)
    leader_load = partitions["leader_load"].to_numpy(dtype=float)
    follower_load = partitions["follower_load"].to_numpy(dtype=float)
    # (as leader, as follower, capacity) per goal of LOAD_GOALS
    amounts = [
        (sizes, sizes, disk_capacity),
        (bytes_in, bytes_in, weight),
        (bytes_out, zero, weight),
        (leader_load, follower_load, weight),
        (bytes_in, zero, weight),
    ]
    return [Resource(goal, *amount) for goal, amount in zip(LOAD_GOALS, amounts, strict=True)]


def _settles(even: bool | None, preferred: list[list[int]], partitions: pd.DataFrame, view: ClusterView) -> bool:
    """``even`` (:func:`_even_by_bands`), or where that cannot tell, whether the count balancing leaves ``preferred``
    as it is."""
    if even is not None:
        return even
    return settles_as_it_is(preferred, partitions, view, since=partitions["current"].tolist())


def _even_by_bands(search: GoalSearch, view: ClusterView) -> bool | None:
    """In the search's legal layout no cap is broken, and every replica and leader count is in its band (True);
    a cap broken (False); None: counts off their bands, settled only if the shared count balancing finds
    nothing to move (as close as racks allow: :func:`settles_as_it_is`, which the caller asks where it counts).

    The bands come first: the balancing evens counts to within 1, so with a
    wider slack (``count_slack`` 3, say) it would move replicas the slack
    allows to stay, and a cluster within every threshold would get a plan.
    """
    if any(search.usage.over_capacity(b) for b in view.eligible):
        return False
    if not any(any(search.count_band(b, leaders)) for b in range(len(search.brokers)) for leaders in (0, 1)):
        return True
    return None


STRATEGY = Strategy(
    "balanced",
    assign,
    options=(
        StrategyOption("count_slack", "balanced_count_slack", int, 1),
        StrategyOption("load_ratio", "balanced_load_ratio", float, 1),
        # each goal's own threshold (unset: the two above)
        StrategyOption("replica_slack", "balanced_replica_slack", int, 1, optional=True),
        StrategyOption("leader_slack", "balanced_leader_slack", int, 1, optional=True),
        *(StrategyOption(f"{goal}_ratio", f"balanced_{goal}_ratio", float, 1, optional=True) for goal in OWN_RATIOS),
        StrategyOption("mode", "balanced_mode", str, 0, choices=("balance", "offload")),
        StrategyOption("offload_ratio", "balanced_offload_ratio", float, 1, optional=True),
    ),
)
