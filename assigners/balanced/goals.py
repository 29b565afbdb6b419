"""Working one goal off its most loaded broker, and the notes for what stays out of reach.

Cruise Control's ``AbstractGoal.optimize``: while the most loaded broker is
above the threshold, apply the cheapest action that lowers it and that
every earlier goal accepts; stop when none is left. A goal that stays unmet
is named with the broker, and with the rack when the rack rule alone
forces it (every partition that must span every rack has a replica in the
smallest one) or the partition that stands in the way.
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from assigners.balanced.actions import (
    CANDIDATES,
    Held,
    LedHere,
    Option,
    later_excess,
    lowest,
    movable,
    moves_and_swaps,
    open_to,
    option_key,
    partner,
    transfer_chains,
    transfers,
)
from assigners.balanced.shed import shed, worth_shedding
from assigners.balanced.state import Change, GoalSearch, Resource
from assigners.model import row_any

ROUNDS_PER_GOAL = 2000
NOT_MET = "goal not met"  # in a note: the goal may be reachable (the rack rule alone does not forbid it)
OUT_OF_REACH = "goal out of reach"  # in a note: the rack rule puts the lower bound out of reach
PARTNER_BROKERS = 5  # least loaded brokers whose replicas are tried as swap partners
LATER_GOAL_TRIES = 6  # equally cheap accepted options compared by what they do to the later goals
BATCH_MORE_MOVES = 1  # moves an option of a round's batch may add beyond its first's (_apply_more)
SCREENED_PICKS = 20  # heaviest replicas of the top broker tried by improve_screened
WIDER = 4  # a widening search, where the usual candidates give no accepted action: this many times as many
DOMINANT = 0.5  # a replica carrying this share of its broker's load may be relocated whole (dominant_home)
RELOCATION_TRIES = 8  # brokers tried as the dominant replica's new home, least loaded holding it first
RANK = itemgetter(0, 1, 2, 3, 4)  # an Option's sort key: everything but its change


def balance_goal(search: GoalSearch, resource: Resource) -> str | None:
    """Work goal ``resource`` off its most loaded broker; a note when its threshold stays out of reach."""
    k = search.resources.index(resource)
    if search.bounds[k] <= 0:
        return None
    search.hold_earlier_goals(k)
    # first with actions that add no move (leadership, and exchanges that send a moved replica home),
    # then with any: the free pass lets the count balancing's choice of replicas carry the load goals
    for free in (True, False):
        _work_off(search, k, free, relocating=not free)
    return goal_note(search, resource)


def _work_off(search: GoalSearch, k: int, free: bool, relocating: bool) -> None:
    """Goal ``k``'s rounds on its most loaded broker until it is met or no action is left (``free``: see
    :func:`improve`; ``relocating``: a dominant replica its broker can never carry may be tried elsewhere
    first, :func:`relocated`)."""
    shedding = not free and search.batch > 1  # a large cluster's broker far above: see shed
    for _ in range(ROUNDS_PER_GOAL):
        top = int(np.argmax(search.load[k]))
        if search.load[k][top] <= search.target(k) * (1 + 1e-9):
            break
        if relocating and not search.forced(k) and (home := dominant_home(search, k, top)) is not None:
            relocating = False  # one trial a turn: where it fails, the rounds go on from the layout before it
            if relocated(search, k, *home):
                break
        if shedding and worth_shedding(search, k, top):
            # many rounds' swaps in one pass, then a round for the cheapest fix; once a shed finds none, the
            # rounds go on alone (bytes in held by disk at its threshold: 116 sheds, 29 swaps, +0.6 s)
            shedding = shed(search, k, top) > 0
        if (
            improve(search, k, top, free)
            or (search.widen and improve(search, k, top, free, WIDER))
            or improve(search, k, top, free, rack_mates=True)
        ):
            continue
        # the screened swaps are for a goal within reach: where the racks force this one, its floor is only
        # a lower bound, and the earlier goals hold the plan above it (50/25/25 % racks: 0.4 s of 1.4 s)
        if free or search.forced(k) or not improve_screened(search, k, top):
            break


def dominant_home(search: GoalSearch, k: int, top: int) -> tuple[int, Change] | None:
    """Where one replica carries at least :data:`DOMINANT` of broker ``top``'s load of goal ``k`` and ``top``
    can never carry it within the threshold (its frozen replicas and the lightest replicas that fill its
    count band leave no room: :func:`_least_kept`), the swap sending it to the broker that can, most room to
    spare first, for the lightest replica of the same role there that is legal and accepted by the earlier
    goals; with the relocated row. None where there is none.

    The usual actions lower the peak step by step, so none of them takes
    the heaviest replica to another broker: that broker's load would jump
    far above the peak before its other replicas go. Frozen partitions make
    it needed: a partition 2.5x the mean broker's disk whose broker also
    holds 4 % of the bound in frozen replicas stayed at 1.062x the bound
    after 4 searches (16 s on the 10k bench cluster with one frozen rule),
    where brokers holding 0.2 % frozen carry it at 1.025x.
    """
    mine = movable(search, search.rows_on(top))
    if not len(mine):
        return None
    h = heaviest(search, k, mine, 1)[0]
    cap = np.asarray(search.capacity[k], dtype=float)
    amount = float(search.row_amount[k][h])
    if amount / cap[top] < DOMINANT * float(search.load[k][top]):
        return None
    carried = amount / cap + _least_kept(search, k, cap)  # each broker's least load holding h
    limit = search.target(k) * (1 + 1e-9)
    if carried[top] <= limit:
        return None  # top can carry it: the usual actions are the way
    lead = bool(search.lead[h])
    by_room = np.argsort(carried, kind="stable")
    for c in open_to(search, [h], by_room[carried[by_room] <= limit], top, RELOCATION_TRIES):  # the rules' open ones
        if not search.may_step(h, c):
            continue
        theirs = movable(search, search.rows_on(c))
        theirs = theirs[search.lead[theirs] == lead]
        for s_row in theirs[np.argsort(search.amount(k, theirs), kind="stable")][:CANDIDATES].tolist():
            swap = ((h, c, lead, True), (s_row, top, lead, True))
            if search.legal(swap) and search.accepted_after(k, swap) is not None:
                return h, swap
    return None


def relocated(search: GoalSearch, k: int, row: int, swap: Change) -> bool:
    """Apply ``swap`` (``row`` to its new home), then goal ``k``'s rounds with ``row`` staying there; kept
    where the goal ends met, else every step taken back (:meth:`GoalSearch.roll_back`). Met?"""
    search.keep_journal(row)
    search.apply(swap)
    _work_off(search, k, free=False, relocating=False)
    if search.met(k):
        search.drop_journal()
        return True
    search.roll_back()
    return False


def _least_kept(search: GoalSearch, k: int, cap: np.ndarray) -> np.ndarray:
    """Per broker slot, the least load of goal ``k`` it carries whatever moves: its frozen replicas, and the
    lightest replicas of the cluster filling the rest of its replica band's low end. Kept per goal for the
    search's life: frozen replicas never move, and the bands never change."""
    least = search.least_kept.get(k)
    if least is None:
        slots = len(search.brokers)
        frozen = np.zeros(len(search.slot), dtype=bool)
        if search.placement is not None:
            frozen = search.placement.frozen[search.part]
        kept = np.bincount(search.slot[frozen], weights=search.row_amount[k][frozen], minlength=slots)
        held = np.bincount(search.slot[frozen], minlength=slots)
        lightest = np.concatenate(([0.0], np.cumsum(np.sort(search.row_amount[k][~frozen]))))
        low = np.array([search.band(b, 0)[0] for b in range(slots)], dtype=np.int64)
        fill = lightest[np.clip(low - held - 1, 0, len(lightest) - 1)]  # one place is the relocated replica's
        least = search.least_kept[k] = (kept + fill) / cap
    return least


def goal_note(search: GoalSearch, resource: Resource) -> str | None:
    """Why goal ``resource`` stays above its threshold, naming the broker and the rack or the replica in the
    way (None: met); where the rack rule puts the lower bound out of reach, what it leaves within reach and
    how close the plan gets, met or not."""
    k = search.resources.index(resource)
    met = search.met(k)
    if search.bounds[k] <= 0 or (met and not search.forced(k)):
        return None
    top = int(np.argmax(search.load[k]))
    where = f"broker {int(search.brokers[top])} at {search.ratio(k):.3f}x the lower bound"
    threshold = f"threshold {search.ratios[k]:g}"
    mine = search.rows_on(top)
    heaviest = mine[np.argmax(search.amount(k, mine))] if len(mine) else None
    hot = "" if heaviest is None else f"; its heaviest replica is {search.name(int(search.part[heaviest]))}"
    if search.forced(k):
        racks, floor, held_by = search.floors[k]
        confined, by_rules = search.placement_floors[k]
        reason = _rack_reason(search, racks, held_by)
        if by_rules > floor:  # the placement rules force more than the racks
            reason, floor = _placement_reason(search, confined), by_rules
        reach = (
            f"{resource.name} {OUT_OF_REACH}: {reason}, {floor / search.bounds[k]:.3f}x "
            f"the lower bound per unit of capacity"
        )
        held = f"{search.ratios[k]:g}x that ({search.target(k) / search.bounds[k]:.3f}x the bound)"
        if met:
            return f"{reach}; held to {held} instead: {where}"
        return f"{reach}; {NOT_MET} against {held}: {where}{hot}"
    return (
        f"{resource.name} {NOT_MET}: {where} ({threshold}){hot}; no legal action lowers it without "
        "breaking an earlier goal"
    )


def improve(search: GoalSearch, k: int, top: int, free: bool = False, width: int = 1, rack_mates: bool = False) -> bool:
    """Apply the best accepted action that lowers broker ``top``'s load of goal ``k`` (``free``: only
    actions that add no replica move, with the brokers holding replicas moved away from ``top`` as partners;
    ``width``: how many times the usual replicas and partner brokers to try; ``rack_mates``: partners from
    ``top``'s own rack only, where none of the least loaded gives an accepted action).

    With uneven racks the least loaded brokers sit in the large rack, which
    already holds a replica of every partition that spans every rack: a
    swap with them breaks the rack rule, while one within ``top``'s rack
    never does (13 brokers over 3 racks: disk 1.20x -> 1.08x the bound).

    Options are scored on goal ``k``'s loads alone, in bulk; the rules
    (racks, caps, counts, earlier goals) are checked down the sorted list
    until one passes, which is far cheaper than checking every option.
    """
    mine = movable(search, search.rows_on(top))
    mine = mine[search.amount(k, mine) > 0]
    if not len(mine):
        return False
    excess = (search.load[k][top] - search.target(k)) * search.capacity[k][top]
    tries, brokers = CANDIDATES * width, PARTNER_BROKERS * width
    picks = list(dict.fromkeys([*heaviest(search, k, mine, tries), *lightest_fixing(search, k, mine, excess, tries)]))
    candidates = np.argsort(search.load[k], kind="stable")
    if rack_mates:
        candidates = candidates[search.rack_of[candidates] == search.rack_of[top]]
    partners = open_to(search, picks, candidates, top, brokers)
    if free:  # and the least loaded of those holding replicas moved away from top, to swap one back
        away = sorted(search.holding_moved_from(top), key=lambda c: (search.load[k][c], c))
        partners = list(dict.fromkeys([*partners, *away[:PARTNER_BROKERS]]))
    cached: dict[int, Held] = {}
    led_here = LedHere(search, top, k)

    def held_by(c: int) -> Held:
        if c not in cached:
            cached[c] = partner(search, k, c, led_here)
        return cached[c]

    held = [held_by(c) for c in partners]
    options: list[Option] = []
    for r in picks:
        options += transfers(search, k, r, top, led_here)
        options += moves_and_swaps(search, k, r, top, held, free)
    # replicas the plan moved onto top, towards their live home: sending one back (or swapping it
    # for one from there) undoes a move instead of adding one
    for r in heaviest(search, k, mine[search.moved_in[mine]], CANDIDATES):
        homes = [
            search.slot_of(b)
            for b in sorted(search.live[int(search.part[r])] - set(search.replicas[int(search.part[r])]))
        ]
        home_held = [held_by(c) for c in homes if c is not None and c != top]
        options += moves_and_swaps(search, k, r, top, home_held, free)
    if not any(o[0] == 0.0 and o[1] <= 0 for o in options):
        # nothing fixes the goal for free: try leadership passed along three brokers (costlier to list)
        for r in heaviest(search, k, mine[search.lead[mine]], CANDIDATES):
            options += transfer_chains(search, k, r, top, led_here)
    if free:
        options = [o for o in options if o[1] <= 0]
    return _apply_best(search, k, top, options)


def _apply_best(search: GoalSearch, k: int, top: int, options: list[Option]) -> bool:
    """Apply the best of ``options`` that is legal and accepted by the earlier goals (among the first few of
    its class, the one best for the later goals), then the round's batch (:func:`_apply_more`)."""
    options.sort(key=RANK)
    best: tuple[float, int, Change] | None = None
    tried, first_class = 0, None
    for option in options:
        change = option[-1]
        if first_class is not None and (option[:2] != first_class or tried >= LATER_GOAL_TRIES):
            break
        after = search.accepted_after(k, change) if search.legal(change) else None
        if after is None:
            continue
        first_class = option[:2]
        candidate = (later_excess(search, k, after), tried, change)
        best = candidate if best is None else min(best, candidate, key=lambda c: c[:2])
        tried += 1
    if best is not None:
        search.apply(best[2])
        _apply_more(search, k, top, options, best[2])
    return best is not None


def _apply_more(search: GoalSearch, k: int, top: int, options: list[Option], first: Change) -> None:
    """After ``first``, the next options of the round's ranking that add at most one replica move more than
    it, up to ``search.batch`` in all, while ``top`` stays above goal ``k``'s threshold: each of a partition
    the round has not touched (its rows are where the option found them), still legal, accepted by the
    earlier goals, and leaving both brokers it touches below ``top``'s load before it.

    A broker far above the threshold on a large cluster takes tens of
    actions, and each round lists nearly the same options again: taking the
    next ones of one ranking does the rounds that would follow without
    listing them (10k partitions: 305 rounds -> 157, 0.74 -> 0.51 s, 8,391
    -> 8,363 moves; the job's 33k-partition 6-broker cluster 6.8 -> 3.3 s).
    An option adding two moves more waits for a round of its own, which may
    find a cheaper one (sending a replica home) after these. One more may
    follow: the first is often a swap sending a replica home (one move),
    the next ones plain swaps (two), which the next round takes anyway
    (10k: 184 rounds -> 129, ~317 -> ~274 ms, 7,557 -> 7,553 moves; 75
    scenario clusters +6 moves of 50,710; two more: +33, no faster).
    """
    most = next(option[1] for option in options if option[-1] is first) + BATCH_MORE_MOVES
    part_of = search.part_of
    touched = {part_of[row] for row, _, _, _ in first}
    applied, limit, top_load = 1, search.target(k) * (1 + 1e-9), float(search.load[k][top])
    for option in options:  # most are passed over (a partition touched, a rule): each test as cheap as it goes
        if applied >= search.batch or option[1] > most or top_load <= limit:
            return
        change = option[-1]
        if any(part_of[row] in touched for row, _, _, _ in change) or not search.legal(change):
            continue
        after = search.accepted_after(k, change)
        if after is None or max(after[k].values()) >= top_load * (1 - 1e-9):
            continue
        search.apply(change)
        touched.update(part_of[row] for row, _, _, _ in change)
        top_load = float(search.load[k][top])
        applied += 1


def improve_screened(search: GoalSearch, k: int, top: int) -> bool:
    """Where no usual option is accepted and the goal is within reach: apply the best swap of one of ``top``'s
    :data:`SCREENED_PICKS` heaviest replicas for any lighter one of the same role on a partner broker (the
    least loaded of ``top``'s rack and of all), every such swap screened in bulk for what the earlier goals
    accept.

    The usual options take each partner's lightest replicas, blind to the
    earlier goals; where those sit at their thresholds (disk at 1.05x, the
    next goal's heaviest replicas also its largest), every one is refused,
    while the swaps that leave the earlier goals where they are lie deeper
    in the list (skewed, 50 brokers, 10k partitions, seeds 1 and 5: bytes
    in stuck at 1.060x and 1.058x after 1.2 s of wider searches; screened,
    met in 0.35 s, +15 and +5 moves). The swaps listed are the lowest-peak
    ones among those the rules allow (:func:`_screened_swaps` with
    ``returns``); the legal ones among the lowest-peak swaps of all (the
    first of those listed) are tried first, the deeper ones only where none
    of those is accepted: offered all at once, a round takes cheaper swaps
    of less gain (the demo generator's 1,000-partition cluster-84: leader
    bytes in 1.196x the bound against 1.115x). Listed once, legal ones only:
    after the rack repair of a scrambled layout the rules refuse every
    lowest-peak swap of all (the demo generator's 6-broker cluster of 10k
    partitions: 33 of 37 such rounds; asking the rules of each cost a third
    of its 3 s plan).
    """
    mine = movable(search, search.rows_on(top))
    mine = mine[search.amount(k, mine) > 0]
    if not len(mine):
        return False
    picks = heaviest(search, k, mine, SCREENED_PICKS)
    by_load = np.argsort(search.load[k], kind="stable")
    mates = by_load[search.rack_of[by_load] == search.rack_of[top]]
    nearest = [
        *open_to(search, picks, mates, top, PARTNER_BROKERS + 1),
        *open_to(search, picks, by_load, top, PARTNER_BROKERS + 1),
    ]
    partners = list(dict.fromkeys(nearest))
    returns = _sure_refusals(search, k, top, partners)
    options: list[Option] = []
    first: list[Option] = []  # the listed ones among the lowest-peak swaps of all (the rules not asked): tried first
    for r in picks:
        for c in partners:
            options += _screened_swaps(search, k, r, top, c, returns, first)
    return (bool(first) and _apply_best(search, k, top, first)) or _apply_best(search, k, top, options)


def _sure_refusals(search: GoalSearch, k: int, top: int, partners: list[int]) -> dict[tuple[int, bool], bytearray]:
    """Per partner and role, which of its replicas may step onto ``top`` as :func:`_screened_swaps` records them
    (2: not asked yet), with the sure refusals of :meth:`GoalSearch.may_enter` filled in at once: the rack rule
    (the partition would span too few racks with ``top`` for the partner), and the topic rule where the
    partition holds no replica the plan moved in and is not live on ``top`` while its topic already moves one
    from ``top`` to the partner (the step's pairs include that move's reverse). After the rack repair of a
    scrambled layout nearly every replica is refused so, and asking them one by one cost the 1M fleet's
    6-broker cluster a third of its plan (~190k steps asked)."""
    returns: dict[tuple[int, bool], bytearray] = {}
    part, slot, n_racks = search.part, search.slot, len(search.racks)
    count = np.diff(search.first_row)
    # each partition's replicas per rack as its rows stand, where its rows are all its replicas (its RF of them)
    per_rack = np.bincount(part * n_racks + search.rack_of[slot], minlength=len(count) * n_racks)
    per_rack = per_rack.reshape(len(count), n_racks)
    whole, needs = count == search.rf, search.view.required_domains_each(count)
    top_rack = int(search.rack_of[top])
    changed = np.zeros(len(count), dtype=bool)
    changed[part[search.moved_in]] = True
    topic_rule = search.since is search.live  # else the pairs count from another layout: asked one by one
    free = ~changed & ~row_any(search.live_matrix == int(search.broker_ids[top]))
    top_id, span, counts = int(search.broker_ids[top]), search.moved.span, search.moved.counts
    for c in partners:
        c_id, c_rack = int(search.broker_ids[c]), int(search.rack_of[c])
        # the topics (of c's replicas) the plan moves from top to c: a step back adds that move's reverse
        reversed_topics = np.zeros(int(search.topic.max(initial=-1)) + 1, dtype=bool)
        held = np.unique(search.topic[part[np.concatenate([rows for rows, _ in search.by_role(k, c)])]])
        reversed_topics[[t for t in held.tolist() if counts.get((t * span + top_id) * span + c_id, 0)]] = True
        for lead, (rows, _) in enumerate(search.by_role(k, c)):
            parts = part[rows]
            after = per_rack[parts]
            after[:, c_rack] -= 1
            after[:, top_rack] += 1
            sure = whole[parts] & ((after > 0).sum(axis=1) < needs[parts])
            if topic_rule:
                sure |= free[parts] & reversed_topics[search.topic[parts]]
            returns[c, bool(lead)] = bytearray(np.where(sure, 0, 2).astype(np.uint8).tobytes())
    return returns


def _screened_swaps(
    search: GoalSearch,
    k: int,
    r: int,
    top: int,
    c: int,
    returns: dict[tuple[int, bool], bytearray] | None = None,
    first: list[Option] | None = None,
) -> list[Option]:
    """Swaps of ``top``'s replica ``r`` for a lighter one of the same role on ``c``: of those every earlier goal
    accepts (:meth:`GoalSearch.accepted_after`, for all at once: a screen, which :func:`_apply_best` checks again
    option by option), the :data:`CANDIDATES` leaving the lowest peak. With ``returns`` (per partner and role,
    which of its replicas may step onto ``top``, filled as asked), only swaps the rules allow: the partner's
    replicas are asked lowest peak first, until enough may (asking all of a partner's thousands up front cost a
    6-broker 10k cluster a third of its plan); ``first``, where given, gets those of them that are among the
    :data:`CANDIDATES` lowest peaks of all (the rules not asked: what ``returns`` None lists).

    The lowest peaks come from the partner's lightest replicas, and after
    the rack repair of a scrambled layout the topic rule may refuse every
    one of them while thousands of other swaps are legal (6 brokers in 3
    racks of 2, 10k partitions: disk stuck at 1.43x the bound, met once the
    second screen takes the lowest legal ones).
    """
    lead, mine = bool(search.lead[r]), float(search.row_amount[k][r])
    if returns is not None and not search.may_step(r, c):
        return []  # no swap sends r there
    rows, amounts = search.by_role(k, c)[int(lead)]
    known = None if returns is None else returns.setdefault((c, lead), bytearray(b"\x02") * len(rows))
    lighter = int(amounts.searchsorted(mine, "left"))
    if not lighter:
        return []  # a third of the calls on a small cluster: nothing lighter to swap for
    rows, amounts, at = rows[:lighter], amounts[:lighter], np.arange(lighter)  # at: each one's place on c
    if (rules := search.placement) is not None:  # only swaps the placement rules allow both ways
        if not rules.may_move(int(search.part[r]), search.broker_ids[c]):
            return []
        allowed = rules.movable_to(search.part[rows], search.broker_ids[top])
        rows, amounts, at = rows[allowed], amounts[allowed], at[allowed]
    load, cap = search.load[k], search.capacity[k]
    delta = mine - amounts
    after_top, after_c = load[top] - delta / cap[top], load[c] + delta / cap[c]
    kept = np.maximum(after_top, after_c) < float(load[top]) * (1 - 1e-9)
    for j in range(k):
        load, cap, limit = search.load[j], search.capacity[j], search.target(j) * (1 + 1e-9)
        delta = search.row_amount[j][rows] - float(search.row_amount[j][r])
        new_top, new_c = load[top] + delta / cap[top], load[c] - delta / cap[c]
        kept &= (new_top <= load[top] + 1e-12) | (new_top <= limit)
        kept &= (new_c <= load[c] + 1e-12) | (new_c <= limit)
    of_all = set[int]() if first is None else _lowest_peak_rows(rows[kept], np.maximum(after_top, after_c)[kept])
    firsts = [] if first is None else first
    if known is not None:
        kept &= search.topic[search.part[rows]] != search.topic[search.part[r]]  # one topic: A->B and B->A
    if not kept.any():
        return []  # most calls: the earlier goals refuse every swap
    rows, after_top, after_c, at = rows[kept], after_top[kept], after_c[kept], at[kept]
    peaks = np.maximum(after_top, after_c)
    if known is not None:
        picked = _first_legal(search, rows, at, top, np.argsort(peaks, kind="stable"), known)
    else:
        picked = lowest(peaks, CANDIDATES) if len(rows) else []
    there, out = search.cost(r, c), list[Option]()
    for n in picked:
        s_row = int(rows[n])
        back = search.cost(s_row, top)
        cost = (there[0] + back[0], there[1] + back[1])
        if (key := option_key(search, k, top, c, float(after_top[n]), float(after_c[n]), cost)) is not None:
            out.append((*key, 2, s_row, ((r, c, lead, True), (s_row, top, lead, True))))
            if s_row in of_all:
                firsts.append(out[-1])
    return out


def _lowest_peak_rows(rows: np.ndarray, peaks: np.ndarray) -> set[int]:
    """The rows of the :data:`CANDIDATES` lowest ``peaks``, ties in their order in ``rows`` (the swaps listed
    with the rules not asked)."""
    return set(rows[lowest(peaks, CANDIDATES)].tolist()) if len(rows) else set()


def _first_legal(
    search: GoalSearch, rows: np.ndarray, at: np.ndarray, top: int, order: np.ndarray, known: bytearray
) -> list[int]:
    """The first :data:`CANDIDATES` of ``order`` (indexes into ``rows``) whose replica may step onto ``top``;
    ``known``: the answers so far by place on the partner (``at``), 2 where not asked yet."""
    picked: list[int] = []
    asked = order[np.frombuffer(known, dtype=np.uint8)[at[order]] != 0]  # the refused ones stay so
    for n in asked.tolist():
        place = int(at[n])
        if known[place] == 2:
            known[place] = search.may_step(int(rows[n]), top)
        if known[place]:
            picked.append(n)
            if len(picked) == CANDIDATES:
                break
    return picked


def heaviest(search: GoalSearch, k: int, rows: np.ndarray, n: int) -> list[int]:
    """The ``n`` heaviest of ``rows`` (in row order) by goal ``k``'s amounts, heaviest first, ties in row
    order: a stable sort's first ``n``, without sorting a broker's tens of thousands of rows."""
    if not len(rows):
        return []
    picked: list[int] = rows[lowest(-search.amount(k, rows), n)].tolist()
    return picked


def lightest_fixing(search: GoalSearch, k: int, rows: np.ndarray, excess: float, n: int) -> list[int]:
    """The ``n`` lightest of ``rows`` (in row order) whose amount of goal ``k`` covers ``excess``, in the order
    of :func:`heaviest` (the last ``n`` of a stable sort, heaviest first, of those that cover it)."""
    amounts = search.amount(k, rows)
    covering = np.flatnonzero(amounts >= excess)
    if len(covering) > 4 * n:  # only the n lightest (and any tied with the n-th) can be among the last n
        covering = covering[amounts[covering] <= np.partition(amounts[covering], n - 1)[n - 1]]
    ordered = covering[np.lexsort((rows[covering], -amounts[covering]))]
    picked: list[int] = rows[ordered[-n:]].tolist() if len(ordered) else []
    return picked


def count_notes(search: GoalSearch) -> list[str]:
    """Why replica or leader counts stay outside their band, naming the broker furthest out (and the racks
    when the rack rule forces it: racks too small for their share, which also keeps a large one from
    filling up)."""
    notes = []
    for leaders, what in ((0, "replicas"), (1, "leaders")):
        off = [sum(search.count_band(b, leaders)) for b in range(len(search.brokers))]
        if not off or max(off) == 0:
            continue
        b = int(np.argmax(off))
        low, high = search.band(b, leaders)
        have = int((search.leaders if leaders else search.count)[b])
        where = f"broker {int(search.brokers[b])} holds {have} {what} (band {low}-{high})"
        weight = search.weight
        racks, floor, _ = search.rack_floor(np.ones(len(search.rf)), weight)
        if not leaders and any(floor * weight[x] > search.band(x, 0)[1] for x in search.in_racks(racks).tolist()):
            notes.append(f"replica count goal out of reach: {_rack_reason(search, racks)}; {where}")
        else:
            rules = "racks, caps or pins" if search.placement is None else "racks, caps, pins or placement rules"
            notes.append(f"{what} count {NOT_MET}: {where}; {rules} leave no legal move")
    return notes


def _placement_reason(search: GoalSearch, confined: list[int]) -> str:
    """What the placement rules make the brokers ``confined`` hold, naming the fewer of them or the rest."""
    rest = sorted(set(search.broker_ids) - set(confined))
    if rest and len(rest) < len(confined):
        noun, their = ("broker", "its") if len(rest) == 1 else ("brokers", "their")
        return (
            f"the placement rules keep {noun} {', '.join(map(str, rest))} short of {their} share, the others carry it"
        )
    return f"the placement rules confine load to brokers {', '.join(map(str, confined))}"


def _rack_reason(search: GoalSearch, racks: list[str], held_by: str = "") -> str:
    """What the rack rule makes ``racks`` hold (see :meth:`GoalSearch.rack_floor`), and lead where an earlier
    goal ``held_by``, kept within its threshold on the other racks, makes them lead more."""
    rest = sorted(set(search.racks) - set(racks))
    held = f", and lead what {', '.join(rest)} cannot while keeping {held_by} within its threshold" if held_by else ""
    if len(racks) == 1:
        spanning = int(search.spans_every_rack.sum())
        return f"rack {racks[0]} must hold a replica of each of the {spanning:,} partitions that span every rack{held}"
    need = search.replicas_in_any(len(racks))
    spans = " or ".join(str(d) for d in sorted(set(search.required[need > 0].tolist())))
    return (
        f"racks {', '.join(racks)} must hold {int(need.sum()):,} replicas at least: each partition must span "
        f"{spans} racks and {', '.join(rest)} {'is' if len(rest) == 1 else 'are'} only {_count(len(rest))} of them"
        f"{held}"
    )


def _count(n: int) -> str:
    return "one" if n == 1 else str(n)
