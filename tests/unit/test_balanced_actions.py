"""``balanced``'s options: the helpers that pick them against the full sorts they stand for, each listed
option's key against what it does, the options a bound skips against the listing without it, and the
earlier goals' acceptance against its rule.

A round on a large cluster picks a few of a broker's tens of thousands of
replicas; each helper finds them without sorting them all, and each must
pick exactly what the stable full sort picks (ties in row order), or a plan
would depend on how the helper cut its corners. An option's key is scored
in bulk on one goal's loads; checked here from the resource's own arrays
and the live layout.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assigners import Constraints
from assigners.balanced import actions, goals
from assigners.balanced.actions import (
    CANDIDATES,
    LedHere,
    _lowest_peaks,
    _two_lowest,
    lowest,
    moves_and_swaps,
    partner,
    transfer_chains,
    transfers,
)
from assigners.balanced.goals import _screened_swaps, _sure_refusals, heaviest, lightest_fixing
from assigners.balanced.state import GoalSearch
from assigners.balanced.strategy import _resources
from assigners.model import ClusterView, prepare_brokers, prepare_partitions
from tests.unit.scenarios import scenario
from tests.unit.test_balanced import settled_search

# few distinct values: ties everywhere, which is where a shortcut and the stable sort part ways
TIED = st.lists(st.integers(0, 6).map(float), min_size=1, max_size=80)


@settings(max_examples=200, deadline=None)
@given(values=TIED, k=st.integers(1, 30))
@example(values=[1.0] * 40, k=3)  # all tied, long enough for the partition shortcut: the first k in order
def test_lowest_is_a_stable_sorts_first_k(values, k):
    array = np.array(values)
    assert lowest(array, k) == np.argsort(array, kind="stable")[:k].tolist()


@settings(max_examples=200, deadline=None)
@given(values=TIED)
@example(values=[2.0, 1.0, 1.0, 1.0])  # the least tied three times: the first two of them, in order
def test_two_lowest_are_a_stable_sorts_first_two(values):
    array = np.array(values)
    assert _two_lowest(array.copy()) == np.argsort(array, kind="stable")[:2].tolist()


@settings(max_examples=300, deadline=None)
@given(
    amounts=TIED,
    extra=st.integers(0, 4),
    top_load=st.floats(5.0, 50.0),
    c_load=st.floats(0.0, 50.0),
    caps=st.tuples(st.sampled_from([0.5, 1.0, 2.0, 3.0]), st.sampled_from([0.5, 1.0, 2.0, 3.0])),
    seed=st.integers(0, 100),
)
@example(amounts=[0.0] * 60, extra=1, top_load=20.0, c_load=19.0, caps=(1.0, 1.0), seed=0)  # one wide tie
def test_lowest_peaks_are_the_swaps_a_full_sort_ranks_first(amounts, extra, top_load, c_load, caps, seed):
    # a swap sends `mine` to the partner and one of its lighter replicas back: the peak of the two loads
    # after it, ranked lowest first and ties in row order, over every lighter replica (the partner's
    # heavier ones, here as many again, follow them in the arrays and are never ranked)
    rng = np.random.default_rng(seed)
    mine = max(amounts) + extra + 0.5
    amounts = [*amounts, *(mine + rng.integers(0, 3, len(amounts)))]
    rows = rng.permutation(1000)[: len(amounts)]
    by_amount = np.lexsort((rows, amounts))  # as GoalSearch.by_role keeps them: amount, then row
    rows, amounts_sorted = rows[by_amount], np.array(amounts, dtype=float)[by_amount]
    lighter = int(amounts_sorted.searchsorted(mine, "left"))
    top_cap, c_cap = caps
    delta = mine - amounts_sorted[:lighter]
    peaks = np.maximum(top_load - delta / top_cap, c_load + delta / c_cap)
    expected = rows[np.lexsort((rows[:lighter], peaks))[:CANDIDATES]].tolist()
    assert _lowest_peaks(rows, amounts_sorted, lighter, mine, (top_load, top_cap, c_load, c_cap)) == expected


def _search() -> GoalSearch:
    brokers, parts = scenario("skewed", 6, 120, seed=5)
    prepared_brokers, prepared = prepare_brokers(brokers, Constraints()), prepare_partitions(parts, Constraints())
    view = ClusterView.from_brokers(prepared_brokers, Constraints())
    replicas = [list(r) for r in prepared["current"]]
    return GoalSearch(replicas, prepared, view, _resources(prepared, prepared_brokers, view), Constraints())


SEARCH = _search()  # read only: the helpers below never change it


@settings(max_examples=200, deadline=None)
@given(goal=st.integers(0, len(SEARCH.resources) - 1), picked=st.data(), n=st.integers(1, 12))
def test_heaviest_and_lightest_fixing_are_the_ends_of_a_stable_sort(goal, picked, n):
    # a broker's rows (ascending), the heaviest first with ties in row order: heaviest takes the first n,
    # lightest_fixing the last n of those whose amount covers the excess
    everything = np.arange(len(SEARCH.part))
    rows = np.array(sorted(picked.draw(st.sets(st.sampled_from(everything.tolist()), min_size=1, max_size=60))))
    amounts = SEARCH.amount(goal, rows)
    excess = picked.draw(st.sampled_from([0.0, *amounts.tolist(), float(amounts.max()) + 1]))
    ranked = sorted(range(len(rows)), key=lambda j: (-amounts[j], j))
    assert heaviest(SEARCH, goal, rows, n) == rows[ranked[:n]].tolist()
    covering = [j for j in ranked if amounts[j] >= excess]
    assert lightest_fixing(SEARCH, goal, rows, excess, n) == rows[covering[-n:]].tolist()


def _loads_after(search: GoalSearch, k: int, change: tuple) -> dict[int, float]:
    """Goal ``k``'s load on the brokers ``change`` touches after it, from the resource's own arrays."""
    resource, loads = search.resources[k], {}
    for row, slot, lead, _ in change:
        i, old = int(search.part[row]), int(search.slot[row])
        was = resource.leader[i] if search.lead[row] else resource.follower[i]
        now = resource.leader[i] if lead else resource.follower[i]
        loads[old] = loads.get(old, float(search.load[k][old])) - was / resource.capacity[old]
        loads[slot] = loads.get(slot, float(search.load[k][slot])) + now / resource.capacity[slot]
    return loads


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("drifted", 3), ("capped", 4)])
def test_each_listed_option_lowers_the_top_broker_and_is_keyed_by_what_it_does(kind, seed):
    # one round's moves, swaps and leadership transfers off each goal's top broker: each lowers the peak of
    # the brokers it touches below the top broker's load, says whether that peak is within the threshold, and
    # counts the replica moves it adds against the live layout and the bytes they copy (per unit of gain
    # when it does not fix the goal)
    search = settled_search(kind, 12, 1000, seed)
    live = [set(r) for r in search.live.lists]
    seen = set()
    for k in range(len(search.resources)):
        options = _round_options(search, k)
        top = int(np.argmax(search.load[k]))
        peak, target = float(search.load[k][top]), search.target(k)
        for not_fixing, moves, cost, kind_of, _, change in options:
            after = _loads_after(search, k, change)
            assert max(after.values()) < peak
            assert not_fixing == (0.0 if max(after.values()) <= target * (1 + 1e-9) else 1.0)
            relocating = [(row, slot) for row, slot, _, relocates in change if relocates]
            added = [_added(search, live, row, slot) for row, slot in relocating]
            assert moves == sum(added)
            copied = sum(n * int(search.sizes[search.part[row]]) for n, (row, _) in zip(added, relocating))
            gain = peak - max(after.values())
            assert cost == pytest.approx(copied if not not_fixing else copied / gain)
            seen.add((kind_of, not_fixing))
    assert {(0, 1.0), (2, 1.0)} <= seen  # transfers and swaps short of the threshold, on every cluster


@pytest.mark.parametrize("kind, seed", [("drifted", 3), ("uneven_racks", 1), ("rf_gt_racks", 2)])
def test_the_second_screen_lists_the_lowest_peak_swaps_of_those_the_rules_allow(kind, seed, monkeypatch):
    # the second screen of improve_screened stands for: the first screen's ranking of every swap (lowest peak
    # first), cut to those GoalSearch.legal allows, the first CANDIDATES of each (replica, partner) kept. Of
    # those, it tries first the legal ones among the CANDIDATES lowest peaks of all (the first screen, the
    # rules not asked); offered all at once, a round took cheaper swaps of less gain, and the demo generator's
    # 1,000-partition cluster-84 ended with leader bytes in at 1.196x instead of 1.115x
    search = settled_search(kind, 12, 1000, seed)
    refused = listed = firsts = 0
    for k in range(len(search.resources)):
        top = int(np.argmax(search.load[k]))
        mine = search.rows_on(top)
        for r in heaviest(search, k, mine[search.amount(k, mine) > 0], 4):
            for c in [c for c in range(len(search.brokers)) if c != top]:
                first: list = []
                second = _screened_swaps(search, k, r, top, c, {}, first)
                of_all = _screened_swaps(search, k, r, top, c)
                with monkeypatch.context() as m:
                    m.setattr(goals, "CANDIDATES", 10**6)
                    ranked = _screened_swaps(search, k, r, top, c)
                legal = [o for o in ranked if search.legal(o[-1])]
                assert second == legal[:CANDIDATES], (k, r, c)
                assert first == [o for o in of_all if search.legal(o[-1])], (k, r, c)
                refused, listed, firsts = refused + len(ranked) - len(legal), listed + len(second), firsts + len(first)
    assert refused and listed  # the rules refuse some swaps and allow others: the cut is what is tested
    assert 0 < firsts < listed  # some listed swaps are tried first, not all: the split is what is tested


@pytest.mark.parametrize("kind, seed", [("drifted", 3), ("uneven_racks", 1), ("rf_gt_racks", 2), ("skewed", 4)])
def test_the_sure_refusals_are_steps_the_rules_refuse(kind, seed):
    # improve_screened fills in the rack rule's and the topic rule's refusals for a partner's replicas at once:
    # each one filled in must be a step GoalSearch.may_step refuses (the others are asked one by one)
    search = _worked_search(kind, seed, 1000)  # moves the plan made, so that the topic rule has pairs to refuse
    sure = 0
    for top in range(len(search.brokers)):
        partners = [c for c in range(len(search.brokers)) if c != top]
        for (c, lead), known in _sure_refusals(search, 0, top, partners).items():
            rows = search.by_role(0, c)[int(lead)][0]
            for place in np.flatnonzero(np.frombuffer(known, dtype=np.uint8) == 0).tolist():
                assert not search.may_step(int(rows[place]), top), (top, c, lead, place)
                sure += 1
    assert sure  # the layouts give it refusals to fill in: the check is not vacuous


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("hot", 2), ("uneven_racks", 5)])
def test_the_leadership_pairs_and_cycles_skipped_are_none_that_lower_the_peak(kind, seed, monkeypatch):
    # transfers and transfer_chains skip a follower's pairs, and a chain's cycles, where the least peak any of
    # them could reach (LedHere.span: the least and most amount its candidates pass back) is no gain: every
    # broker as the top, they list exactly the options they list with the bound taken away, and skip some
    search = _worked_search(kind, seed)
    asked = {True: 0, False: 0}  # lowest() calls with and without the bound: what a skip saves

    def listed(k: int, top: int, bounded: bool) -> list:
        def counted(values: np.ndarray, n: int) -> list[int]:
            asked[bounded] += 1
            return lowest(values, n)

        def counted_two(values: np.ndarray) -> list[int]:  # a cycle's pick
            asked[bounded] += 1
            return _two_lowest(values)

        with monkeypatch.context() as m:
            m.setattr(actions, "lowest", counted)
            m.setattr(actions, "_two_lowest", counted_two)
            if not bounded:  # a span no peak can be above: nothing skipped
                m.setattr(LedHere, "span", lambda self, c: (-np.inf, np.inf) if len(self.on(c)[0]) else None)
            led_here, mine = LedHere(search, top, k), search.rows_on(top)
            leaders = mine[search.lead[mine]]
            return [
                option
                for r in heaviest(search, k, leaders, CANDIDATES)
                for option in transfers(search, k, r, top, led_here) + transfer_chains(search, k, r, top, led_here)
            ]

    for k, resource in enumerate(search.resources):
        if np.array_equal(resource.leader, resource.follower):
            continue  # leadership moves nothing of this goal
        for top in range(len(search.brokers)):
            assert listed(k, top, bounded=True) == listed(k, top, bounded=False), (k, top)
    assert asked[True] < asked[False]  # the bound skipped some: the equality is not vacuous


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("hot", 2), ("drifted", 1)])
def test_a_free_round_lists_every_move_and_swap_that_adds_no_replica_move(kind, seed, monkeypatch):
    # a free round keeps the options that add no move; moves_and_swaps(free=True) skips a partner's swaps
    # where r leaving top adds a move and the partner holds none of top's moved-away replicas lighter than r
    # (the only ones whose way back saves one): every broker as the top, it lists exactly what the full
    # listing holds that adds no move, and skips some
    search = _worked_search(kind, seed)
    ranked = {True: 0, False: 0}  # _lowest_peaks calls, free and full: what the skip saves

    def listed(k: int, top: int, free: bool) -> list:
        def counted(*args):
            ranked[free] += 1
            return _lowest_peaks(*args)

        with monkeypatch.context() as m:
            m.setattr(actions, "_lowest_peaks", counted)
            led_here = LedHere(search, top, k)
            held = [partner(search, k, c, led_here) for c in range(len(search.brokers)) if c != top]
            mine = search.rows_on(top).tolist()
            return [option for r in mine for option in moves_and_swaps(search, k, r, top, held, free)]

    free_swaps = 0
    for k in range(len(search.resources)):
        for top in range(len(search.brokers)):
            free = listed(k, top, free=True)
            assert free == [option for option in listed(k, top, free=False) if option[1] <= 0], (k, top)
            free_swaps += sum(option[3] == 2 for option in free)
    assert free_swaps and ranked[True] < ranked[False]  # free swaps listed, and some partners skipped


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("hot", 2), ("uneven_racks", 5), ("capped", 4)])
def test_an_option_is_accepted_exactly_where_no_earlier_goal_rises_above_its_limit(kind, seed):
    # GoalSearch.accepted_after asks the goals before k one at a time, the first refusal ending it; the rule, from
    # every goal's own loads after the option: refused where a broker it touches rises, and above the goal's
    # threshold (where the racks force some goal, above the goal's peak if that is higher); else every goal's
    # loads after it
    search = _worked_search(kind, seed)
    forced, verdicts = search.any_forced, set()
    for k in range(len(search.resources)):
        for option in _round_options(search, k):
            change = option[-1]
            after = [_loads_after(search, j, change) for j in range(len(search.resources))]
            refused = False
            for j in range(k):
                limit = search.target(j)
                if forced:
                    limit = max(limit, float(search.load[j].max())) if search.bounds[j] > 0 else np.inf
                rising = [b for b, value in after[j].items() if value > float(search.load[j][b]) + 1e-12]
                refused |= any(after[j][b] > limit * (1 + 1e-9) for b in rising)
            answer = search.accepted_after(k, change)
            assert (answer is None) == refused, (k, change)
            if answer is not None:
                assert answer == after, (k, change)
            verdicts.add((k > 0, refused))
    assert {(True, False), (True, True)} <= verdicts  # earlier goals both accept and refuse: the check is not vacuous


@pytest.mark.parametrize("kind, seed", [("skewed", 0), ("drifted", 1)])
def test_the_leaders_a_round_reads_follow_every_step(kind, seed):
    # GoalSearch.led_by keeps each broker's leaders across rounds and LedHere.on each one's row on the top
    # broker: from scratch, before and after leadership and replicas move (what a round then reads must be
    # what the layout holds, or the next options are scored on a layout that is gone)
    search = _worked_search(kind, seed)
    k = next(k for k, r in enumerate(search.resources) if not np.array_equal(r.leader, r.follower))
    steps, handed_back = search.steps, 0
    for _ in range(3):
        for c in range(len(search.brokers)):
            rows, passed = search.led_by(k, c)
            mine = search.rows_on(c)
            expected = mine[search.lead[mine]]
            assert rows.tolist() == expected.tolist(), c
            leader_amount = np.asarray(search.resources[k].leader, dtype=float)[search.part[expected]]
            follower_amount = np.asarray(search.resources[k].follower, dtype=float)[search.part[expected]]
            assert passed.tolist() == (leader_amount - follower_amount).tolist(), c
        top = int(np.argmax(search.load[k]))
        led_here = LedHere(search, top, k)
        for c in range(len(search.brokers)):
            rows, _, tops = led_here.on(c)
            assert [search.row_of(int(search.part[row]), top) for row in rows.tolist()] == tops.tolist(), (top, c)
            handed_back += len(rows)
        goals.improve(search, k, top, width=4) or goals.improve(search, 0, int(np.argmax(search.load[0])), width=4)
    assert handed_back and search.steps > steps  # rows to check, and steps between the checks


def _worked_search(kind: str, seed: int, n_parts: int = 60) -> GoalSearch:
    """A settled cluster of 12 brokers after up to 40 rounds off its worst goal: leadership and loads the search
    has moved, as where its rounds get stuck."""
    search = settled_search(kind, 12, n_parts, seed)
    for _ in range(40):
        k = int(np.argmax([search.ratio(j) for j in range(len(search.resources))]))
        if not goals.improve(search, k, int(np.argmax(search.load[k]))):
            break
    return search


def _round_options(search: GoalSearch, k: int) -> list:
    """The options a round lists off goal ``k``'s top broker: its heaviest and lightest fixing replicas to
    the five least loaded brokers, and leadership passed along three brokers (as
    :func:`assigners.balanced.goals.improve` lists them)."""
    top = int(np.argmax(search.load[k]))
    mine = search.rows_on(top)
    mine = mine[search.amount(k, mine) > 0]
    excess = (search.load[k][top] - search.target(k)) * search.capacity[k][top]
    led_here = LedHere(search, top, k)
    partners = [c for c in np.argsort(search.load[k], kind="stable")[:6].tolist() if c != top][:5]
    held = [partner(search, k, c, led_here) for c in partners]
    options = []
    for r in dict.fromkeys([*heaviest(search, k, mine, CANDIDATES), *lightest_fixing(search, k, mine, excess, 5)]):
        options += transfers(search, k, r, top, led_here) + moves_and_swaps(search, k, r, top, held)
    for r in heaviest(search, k, mine[search.lead[mine]], CANDIDATES):
        options += transfer_chains(search, k, r, top, led_here)
    return options


def _added(search: GoalSearch, live: list[set[int]], row: int, slot: int) -> int:
    """Replica moves a step adds against the live layout: onto a broker not holding its partition live
    adds one, off one (back home) saves one."""
    i = int(search.part[row])
    return (int(search.brokers[slot]) not in live[i]) - (int(search.brokers[search.slot[row]]) not in live[i])
