"""``balanced``'s option helpers against the full sorts their docstrings say they stand for.

A round on a large cluster picks a few of a broker's tens of thousands of
replicas; each helper finds them without sorting them all, and each must
pick exactly what the stable full sort picks (ties in row order), or a plan
would depend on how the helper cut its corners.
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assigners import Constraints
from assigners.balanced.actions import CANDIDATES, _lowest_peaks, lowest
from assigners.balanced.goals import heaviest, lightest_fixing
from assigners.balanced.state import GoalSearch
from assigners.balanced.strategy import _resources
from assigners.model import ClusterView, prepare_brokers, prepare_partitions
from tests.unit.scenarios import scenario

# few distinct values: ties everywhere, which is where a shortcut and the stable sort part ways
TIED = st.lists(st.integers(0, 6).map(float), min_size=1, max_size=80)


@settings(max_examples=200, deadline=None)
@given(values=TIED, k=st.integers(1, 30))
@example(values=[1.0] * 40, k=3)  # all tied, long enough for the partition shortcut: the first k in order
def test_lowest_is_a_stable_sorts_first_k(values, k):
    array = np.array(values)
    assert lowest(array, k) == np.argsort(array, kind="stable")[:k].tolist()


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
    # after it, ranked lowest first and ties in row order, over every lighter replica
    rows = np.random.default_rng(seed).permutation(1000)[: len(amounts)]
    by_amount = np.lexsort((rows, amounts))  # as GoalSearch.by_role keeps them: amount, then row
    rows, amounts_sorted = rows[by_amount], np.array(amounts)[by_amount]
    mine = float(amounts_sorted.max()) + extra
    top_cap, c_cap = caps
    delta = mine - amounts_sorted
    peaks = np.maximum(top_load - delta / top_cap, c_load + delta / c_cap)
    expected = rows[np.lexsort((rows, peaks))[:CANDIDATES]].tolist()
    assert _lowest_peaks(rows, amounts_sorted, mine, top_load, top_cap, c_load, c_cap) == expected


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
