"""make bench, part 2: every strategy on one cluster, pure (no Spark), with quality figures.

Two sizes from issue 3: 10,000 partitions x RF 3 x 50 brokers (target <= 200 ms
median per strategy) and 1,000,000 partitions x RF 3 x 500 brokers (target
<= 30 s, peak memory reported). Each 1M run is its own process, so its peak
RSS is its own. Times are of ``plan_cluster``: checks, the strategy, the
validation of its plan, the diff and the metrics, as the job runs it.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from figures import record  # noqa: E402

from assigners import STRATEGIES, Constraints, PlanRequest, plan_cluster  # noqa: E402
from assigners.balanced.goals import NOT_MET  # noqa: E402
from assigners.model import PlacementRule  # noqa: E402


def cluster(partitions: int, brokers: int, racks: int, seed: int = 11) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Uniform brokers over ``racks``; RF 3; rank-Zipf(1.1) rates; a drifted, rack-blind current layout."""
    rng = np.random.default_rng(seed)
    ids = np.arange(1, brokers + 1)
    broker_frame = pd.DataFrame(
        {
            "broker_id": ids,
            "rack": [f"r{i % racks}" for i in range(brokers)],
            "state": "active",
            "cores": 8,
        }
    )
    # three distinct brokers per partition, skewed towards the low ids (drift)
    skew = rng.power(0.6, size=(partitions, 6))
    picks = np.minimum((skew * brokers).astype(np.int64), brokers - 1) + 1
    current = [list(dict.fromkeys(row))[:3] for row in picks.tolist()]
    current = [c if len(c) == 3 else rng.choice(ids, 3, replace=False).tolist() for c in current]
    rates = rng.permutation(1e7 / np.arange(1, partitions + 1) ** 1.1)
    topics = max(1, partitions // 50)
    part_frame = pd.DataFrame(
        {
            "topic": [f"topic-{i % topics:05d}" for i in range(partitions)],
            "partition": np.arange(partitions) // topics,
            "replicas": current,
            "size_bytes": (rates * 3600).astype(np.int64),
            "bytes_in": rates,
            "bytes_out": rates * 2,
            "has_throughput": True,
        }
    )
    return broker_frame, part_frame


def run_one(strategy: str, brokers: pd.DataFrame, parts: pd.DataFrame) -> tuple[float, dict[str, float | int | str]]:
    start = time.perf_counter()
    result = plan_cluster(brokers, parts, PlanRequest("bench", strategy, allow_worse=True))
    elapsed = time.perf_counter() - start
    m = result.metrics
    figures: dict[str, float | int | str] = {"status": result.status}
    if m is not None:
        figures |= {
            "max/bound": round(m.max_load_after / (m.load_lower_bound or 1), 3),
            "replica_spread": m.replica_spread_after,
            "leader_spread": m.leader_spread_after,
            "rack_violations": m.rack_violations_after,
            "moves": m.moves,
            "min_moves": m.min_moves,
            "gb_moved": round(m.bytes_to_move / 1e9, 1),  # fewer moves can copy more: a plan is judged on both
        }
    if result.error:
        figures["error"] = result.error[:120]
    return elapsed, figures


def small(repeat: int) -> None:
    brokers, parts = cluster(10_000, 50, 5)
    print(f"\n10,000 partitions x RF 3 x 50 brokers x 5 racks (target <= 200 ms median); {repeat} runs each")
    strategies = sorted(STRATEGIES)
    for strategy in strategies:
        run_one(strategy, brokers, parts)  # warm-up
    # rounds interleave the strategies, so a slow spell of this shared machine hits them all alike
    times: dict[str, list[float]] = {s: [] for s in strategies}
    figures: dict[str, dict[str, float | int | str]] = {}
    for _ in range(repeat):
        for strategy in strategies:
            elapsed, figures[strategy] = run_one(strategy, brokers, parts)
            times[strategy].append(elapsed)
    for strategy in strategies:
        median = statistics.median(times[strategy])
        goal = 0.12 if strategy == "balanced" else 0.2  # issue 40: balanced <= 120 ms on this cluster
        flag = "ok" if median <= goal else "OVER"
        print(f"  {strategy:<16} median {median * 1000:7.0f} ms  {flag:<4}  {json.dumps(figures[strategy])}")
        record(
            f"`{strategy}`, 10k partitions x 50 brokers",
            f"{median * 1000:.0f} ms",
            f"<= {goal * 1000:.0f} ms",
            median <= goal,
        )


def five_rules(brokers: pd.DataFrame) -> Constraints:
    """Five placement rules on the 10k cluster, one of each kind: a broker set with a toleration (two
    dedicated brokers), a frozen group, a second broker set (one cell), and two soft ones (a preferred cell,
    leader racks) that the hard rules' layer passes over."""
    ids = brokers["broker_id"].astype(int).tolist()
    return Constraints(
        broker_tags={b: {"tier": "ssd" if b % 2 or b >= 49 else "hdd", "cell": "a" if b <= 25 else "b"} for b in ids},
        broker_taints={49: ("dedicated=payments",), 50: ("dedicated=payments",)},
        placement=(
            PlacementRule("topic-0000[0-9]", require_tags={"tier": "ssd"}, tolerations=("dedicated",)),
            PlacementRule("topic-0001[0-9]", frozen=True),
            PlacementRule("topic-0002[0-9]", require_tags={"cell": "a"}),
            PlacementRule("topic-0003[0-9]", prefer_tags={"cell": "b"}, prefer_strength=0.7),
            PlacementRule("topic-0004[0-9]", leader_racks=("r0", "r1")),
        ),
    )


def with_rules(repeat: int) -> None:
    """Every strategy on the 10k cluster with and without :func:`five_rules`, rounds interleaved."""
    brokers, parts = cluster(10_000, 50, 5)
    rules = five_rules(brokers)
    print(f"\nthe 10k cluster with five placement rules (target <= 1.5x its time without); median of {repeat}")
    for strategy in sorted(STRATEGIES):
        times: dict[bool, list[float]] = {False: [], True: []}
        results = {}
        for _ in range(repeat):
            for ruled in (False, True):
                request = PlanRequest("bench", strategy, rules if ruled else Constraints(), allow_worse=True)
                start = time.perf_counter()
                results[ruled] = plan_cluster(brokers, parts, request)
                times[ruled].append(time.perf_counter() - start)
        plain, ruled_time = statistics.median(times[False]), statistics.median(times[True])
        ratio = ruled_time / plain
        m = results[True].metrics
        figures = "" if m is None else f"moves {m.moves}, max_load/bound {m.max_load_after / m.load_lower_bound:.3f}"
        print(
            f"  {strategy:<16} {plain * 1000:6.0f} ms -> {ruled_time * 1000:6.0f} ms  {ratio:4.2f}x  "
            f"{'ok' if ratio <= 1.5 else 'OVER':<4}  {results[True].status}, {figures}"
        )
        record(
            f"`{strategy}`, the 10k cluster with five placement rules",
            f"{ratio:.2f}x its time without",
            "<= 1.5x",
            ratio <= 1.5,
        )


def rules_one_by_one(repeat: int) -> None:
    """``balanced`` on the 10k cluster with each of :func:`five_rules` alone (the taints only with the first,
    which tolerates them, and alone): which rule costs what, and a rule that sends the search wide shows."""
    brokers, parts = cluster(10_000, 50, 5)
    rules = five_rules(brokers)
    variants = {"no rule": Constraints(), "the taints alone": replace(rules, placement=())}
    for n, rule in enumerate(rules.placement):
        variants[f"rule {n + 1} alone ({rule.topics})"] = replace(
            rules, placement=(rule,), broker_taints=rules.broker_taints if n == 0 else {}
        )
    print(f"\n  balanced with one rule at a time; median of {repeat}")
    for name, constraints in variants.items():
        request = PlanRequest("bench", "balanced", constraints, allow_worse=True)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            result = plan_cluster(brokers, parts, request)
            times.append(time.perf_counter() - start)
        m = result.metrics
        unmet = sum("not met" in note or "out of reach" in note for note in result.notes)
        print(
            f"  {name:<34} {statistics.median(times) * 1000:6.0f} ms  "
            f"moves {m.moves if m else '-'}, {unmet} goal notes unmet"
        )


def scenarios(repeat: int) -> None:
    """balanced beside sticky and lpt on clusters that need rebalancing (issue 12's table)."""
    from tests.unit.scenarios import SCENARIOS, scenario

    print("\nscenarios, 24 brokers x 3 racks x 3,000 partitions (RF 3): moves / min_moves, max / bound per resource")
    columns = ("ms", "moves/min", "GB", "load", "in", "out", "disk")
    print(f"  {'scenario':<15} {'strategy':<9} " + " ".join(f"{c:>6}" for c in columns) + " spreads")
    for kind in SCENARIOS:
        brokers, parts = scenario(kind, 24, 3_000, seed=7)
        for strategy in ("sticky", "lpt", "balanced"):
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                result = plan_cluster(brokers, parts, PlanRequest("bench", strategy, allow_worse=True))
                times.append(time.perf_counter() - start)
            m = result.metrics
            if m is None:
                print(f"  {kind:<15} {strategy:<9} {result.status}: {(result.error or '; '.join(result.notes))[:80]}")
                continue
            ratios = [m.max_load_after / (m.load_lower_bound or 1), m.bytes_in_ratio_after, m.bytes_out_ratio_after]
            ratios.append(m.disk_ratio_after)
            shown = " ".join(f"{r or 0:6.3f}" for r in ratios)
            print(
                f"  {kind:<15} {strategy:<9} {statistics.median(times) * 1000:6.0f} "
                f"{m.moves / max(m.min_moves, 1):9.2f} {m.bytes_to_move / 1e9:6.1f} {shown} "
                f"{m.replica_spread_after}/{m.leader_spread_after}"
            )


def scenarios_10k(repeat: int) -> None:
    """The 10k target on the scenario shapes too: the rank-Zipf cluster above is one shape of many."""
    from tests.unit.scenarios import SCENARIOS, scenario

    print(f"\nthe same target on the scenarios at 50 brokers x 3 racks x 10,000 partitions; median of {repeat}")
    print(f"  {'scenario':<15} {'balanced':>9} {'sticky':>7}   balanced: moves/min, GB moved, max/bound, spreads")
    for kind in SCENARIOS:
        brokers, parts = scenario(kind, 50, 10_000, seed=7)
        medians, figures = {}, {}
        for strategy in ("balanced", "sticky"):
            times = [run_one(strategy, brokers, parts) for _ in range(repeat)]
            medians[strategy] = statistics.median(t for t, _ in times)
            figures[strategy] = times[-1][1]
        f = figures["balanced"]
        flag = "ok" if medians["balanced"] <= 0.2 else "OVER"
        print(
            f"  {kind:<15} {medians['balanced'] * 1000:6.0f} ms {medians['sticky'] * 1000:4.0f} ms  {flag:<4} "
            f"{int(f['moves']) / max(int(f['min_moves']), 1):.2f}, {f['gb_moved']}, {f['max/bound']}, "
            f"{f['replica_spread']}/{f['leader_spread']}"
        )
        for strategy, median in medians.items():
            record(f"`{strategy}`, 10k {kind} shape", f"{median * 1000:.0f} ms", "<= 200 ms", median <= 0.2)


def seeds_10k(seeds: range) -> None:
    """balanced on more seeds of each scenario at 10k: one seed's figures can flatter a greedy search."""
    from tests.unit.scenarios import SCENARIOS, scenario

    print(
        f"\nbalanced on seeds {seeds.start}-{seeds.stop - 1} of each scenario at 50 brokers x 10,000 partitions: "
        "goals met (of those the rack rule leaves within reach), moves / min_moves, ms"
    )
    for kind in SCENARIOS:
        met, ratios, times = 0, [], []
        for seed in seeds:
            brokers, parts = scenario(kind, 50, 10_000, seed=seed)
            start = time.perf_counter()
            result = plan_cluster(brokers, parts, PlanRequest("bench", "balanced", allow_worse=True))
            times.append(time.perf_counter() - start)
            m = result.metrics
            met += m is not None and not any(NOT_MET in note for note in result.notes)
            ratios.append(m.moves / max(m.min_moves, 1) if m is not None else float("nan"))
        print(
            f"  {kind:<15} met on {met} of {len(seeds)}  moves/min mean {statistics.mean(ratios):.3f} "
            f"worst {max(ratios):.3f}  ms median {statistics.median(times) * 1000:.0f} max {max(times) * 1000:.0f}"
        )


ISSUE_38_SHAPES = [
    ("drifted", 30, 3_000),
    ("broker_added", 12, 600),
    ("rf_gt_racks", 8, 400),
    ("broker_removed", 12, 600),
    ("hot", 12, 600),
    ("racks_544", 13, 600),
    ("racks_633", 12, 600),
]


def reachable_bounds(brokers: pd.DataFrame, parts: pd.DataFrame) -> dict[str, float]:
    """Per balanced goal the racks force above its lower bound: the reachable bound over the lower bound."""
    from assigners import Constraints
    from assigners.balanced.state import GoalSearch
    from assigners.balanced.strategy import _resources
    from assigners.model import ClusterView, prepare_brokers, prepare_partitions

    c = Constraints()
    b, p = prepare_brokers(brokers, c), prepare_partitions(parts, c)
    view = ClusterView.from_brokers(b, c)
    search = GoalSearch([list(r) for r in p["current"]], p, view, _resources(p, b, view), c)
    return {r.name: search.reachable[k] / search.bounds[k] for k, r in enumerate(search.resources) if search.forced(k)}


def shapes() -> None:
    """Issue 38's shapes: moves / min_moves, max_load/bound and each resource's ratio, beside the reachable bound
    (x the lower bound) where the racks force one."""
    from tests.unit.scenarios import scenario

    print("\nissue 38's shapes (seed 7), balanced: moves/min, max_load/bound, disk/in/out ratios; reachable bounds")
    for kind, n_brokers, n_parts in ISSUE_38_SHAPES:
        brokers, parts = scenario(kind, n_brokers, n_parts, seed=7)
        start = time.perf_counter()
        result = plan_cluster(brokers, parts, PlanRequest("bench", "balanced", allow_worse=True))
        elapsed, m = time.perf_counter() - start, result.metrics
        if m is None:
            print(f"  {kind:<15} {result.status}: {(result.error or '; '.join(result.notes))[:80]}")
            continue
        reach = ", ".join(f"{goal} {ratio:.3f}" for goal, ratio in reachable_bounds(brokers, parts).items()) or "-"
        unmet = sum(NOT_MET in note for note in result.notes)
        print(
            f"  {kind:<15} {n_brokers:>3} x {n_parts:>5} {elapsed * 1000:6.0f} ms  {m.moves:>5} / {m.min_moves:<5} "
            f"{m.max_load_after / (m.load_lower_bound or 1):.3f}  {m.disk_ratio_after:.3f} "
            f"{m.bytes_in_ratio_after:.3f} {m.bytes_out_ratio_after:.3f}  goals not met {unmet}  reachable: {reach}"
        )


def mid_fleet(clusters: int = 100, partitions: int = 1_000) -> None:
    """``balanced`` on each cluster of the demo generator's fleet of ``clusters`` x ``partitions`` partitions
    (6 to 24 brokers, scrambled layouts), once each: the spread of a fleet's per-cluster times and the goals
    left unmet, where the 10k figures show one cluster (docs/balanced.md, known limits: leader goals on
    mid-size clusters)."""
    from jobs.demo import generate_fleet
    from tests.unit.clusters import demo_cluster

    fleet = generate_fleet(clusters=clusters, topics=max(200, partitions // 30), partitions=partitions)
    print(f"\nthe demo generator's fleet, {clusters} clusters x {partitions:,} partitions: `balanced` once each")
    times, missing = [], []
    for cluster_id in fleet["brokers"]["cluster_id"].unique().tolist():
        brokers, own = demo_cluster(fleet, cluster_id)
        start = time.perf_counter()
        result = plan_cluster(brokers, own, PlanRequest(str(cluster_id), "balanced"))
        times.append(time.perf_counter() - start)
        missed = [note for note in result.notes if NOT_MET in note]
        if missed:  # the first goal missed and by how much ("leader_bytes_in goal not met: broker 9 at 1.090x ...")
            at = re.search(r" at ([0-9.]+x)", missed[0])  # a count note names no ratio
            missing.append(f"{cluster_id} ({missed[0].split(' goal')[0]}{' ' + at[1] if at else ''})")
    ordered = sorted(times)
    median, p95 = statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]
    print(
        f"  total {sum(times):.1f} s; per cluster median {median * 1000:.0f} ms, p95 {p95:.2f} s, "
        f"max {ordered[-1]:.2f} s; a goal not met on {len(missing)}: {', '.join(missing) or '-'}"
    )
    record(
        f"`balanced`, the demo generator's {clusters} clusters x {partitions:,} partitions, per cluster",
        f"median {median * 1000:.0f} ms, max {ordered[-1]:.1f} s; {len(missing)} miss a goal"
        + (f": {', '.join(missing)}" if missing else ""),
    )


def big_child(strategy: str) -> None:
    brokers, parts = cluster(1_000_000, 500, 10)
    elapsed, figures = run_one(strategy, brokers, parts)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "peak_mib": peak_mib, **figures}))


def big(timeout: float) -> None:
    print(
        "\n1,000,000 partitions x RF 3 x 500 brokers x 10 racks (target <= 30 s, balanced <= 15 s, peak <= 1.5 GiB); "
        f"one process each, timeout {timeout:.0f} s"
    )
    for strategy in sorted(STRATEGIES):
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", strategy],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=True,
            ).stdout
            row = json.loads(out.strip().splitlines()[-1])
            seconds, peak = row.pop("seconds"), row.pop("peak_mib")
            goal = 15 if strategy == "balanced" else 30  # issue 40, with a peak of 1.5 GiB at most
            ok = seconds <= goal and peak <= 1536
            print(
                f"  {strategy:<16} {seconds:6.1f} s  {'ok' if ok else 'OVER':<4}  peak {peak:6.0f} MiB  "
                f"{json.dumps(row)}"
            )
            record(
                f"`{strategy}`, 1M partitions x 500 brokers",
                f"{seconds:.1f} s, peak {peak:,.0f} MiB",
                f"<= {goal} s, <= 1,536 MiB",
                ok,
            )
        except subprocess.TimeoutExpired:
            print(f"  {strategy:<16} did not finish within {timeout:.0f} s")
            record(f"`{strategy}`, 1M partitions x 500 brokers", f"not done in {timeout:.0f} s", "<= 30 s", False)
        except subprocess.CalledProcessError as exc:
            print(f"  {strategy:<16} crashed: {exc.stderr.strip().splitlines()[-1] if exc.stderr else exc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--skip-1m", action="store_true", help="only the 10k cluster")
    parser.add_argument("--only-1m", action="store_true", help="only the 1M cluster")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per strategy on the 1M cluster")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        big_child(args.child)
        return 0
    if not args.only_1m:
        small(args.repeat)
        with_rules(3)
        rules_one_by_one(3)
        shapes()
        scenarios(3)
        scenarios_10k(3)
        seeds_10k(range(1, 6))
        mid_fleet()
    if not args.skip_1m:
        big(args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
