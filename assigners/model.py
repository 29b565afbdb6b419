"""The planner's view of one cluster: constraints, prepared frames, lookups.

The planner turns the raw snapshot frames into *prepared* frames once
(:func:`prepare_brokers`, :func:`prepare_partitions`); every strategy takes
those and returns ``topic, partition, replicas``. :class:`ClusterView` is the
plain-Python index of the same data that the strategies loop over.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import operator
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

ACTIVE, DRAINING, DEAD = "active", "draining", "dead"
BROKER_STATES = (ACTIVE, DRAINING, DEAD)


ASSIGNMENT_COLUMNS = ["topic", "partition", "replicas"]
# Per-core placement (assigners.cores): core 0 also runs the broker itself and
# counts this many partitions more (Redpanda's topic_partitions_reserve_shard0).
CORE0_RESERVE = 2
# A strategy that decides the cluster needs no new plan returns the baseline with this
# DataFrame.attrs key set to the reason; the planner then reports the cluster skipped.
SKIP_REASON = "skip_reason"
# ... and may list, under this key, notes for people (goals it could not meet and why).
NOTES = "notes"
# ... and, under this key, why a plan that lowers the balance score is what was asked for (``balanced``'s offload
# mode evens out only the brokers above its threshold): the planner commits it as if ``allow_worse`` were set.
ASKED_FOR = "asked_for"
# ClusterView.derived keeps this many values per name: a small cluster's searches alternate between a few
# partitions frames (the live one, its own plan as if executed) and subsets of the goals.
DERIVED_KEPT = 8
Derived = TypeVar("Derived")  # what ClusterView.derived keeps

# A strategy's assign function: (prepared brokers, prepared partitions, constraints, seed) -> assignment frame.
Assign = Callable[[pd.DataFrame, pd.DataFrame, "Constraints", int], pd.DataFrame]


@dataclass(frozen=True)
class StrategyOption:
    """One setting a strategy reads: ``[planner.<strategy>] key``, carried to the workers in a Constraints field.

    ``legacy``: the ``[planner]`` key earlier releases read, still accepted.
    """

    key: str
    field: str  # the Constraints field that carries it (its default is the option's default)
    kind: type  # int, float, or str (one of ``choices``)
    minimum: float
    strict: bool = False  # the value must be above the minimum, not at it
    optional: bool = False  # may stay unset (None: off)
    legacy: str | None = None
    choices: tuple[str, ...] = ()  # a str option's values


@dataclass(frozen=True)
class Strategy:
    """One registered strategy: its name, its assign function and the traits the planner needs.

    Each strategy module declares its record; :data:`assigners.planner.STRATEGIES`
    lists them, and nothing else names a strategy to decide how to treat it.
    """

    name: str
    assign: Assign
    balances_leader_counts: bool = True  # False: it places leaders for load, the planner keeps them
    options: tuple[StrategyOption, ...] = ()  # its [planner.<name>] settings


@dataclass(frozen=True)
class LoadWeights:
    """How a replica's load is made of its partition's rates (DESIGN.md: all 1).

    A leader serves produce (``leader_in``) and consume (``leader_out``); a
    follower only replicates the produce stream (``follower_in``). Operators
    whose brokers are bound by egress raise ``leader_out``.
    """

    leader_in: float = 1.0
    leader_out: float = 1.0
    follower_in: float = 1.0

    def replica_loads(self, bytes_in: np.ndarray, bytes_out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(leader load, follower load) of every partition."""
        return self.leader_in * bytes_in + self.leader_out * bytes_out, self.follower_in * bytes_in


@dataclass(frozen=True)
class PlacementRule:
    """``[[constraints.placement]]``: where the topics a regular expression names may place their replicas.

    The vocabulary is LaminarDB's node tags, Redpanda's taints and
    tolerations (its partition allocator RFC, with Kubernetes' meaning: a
    tainted broker takes only topics that tolerate every taint it has) and
    Cruise Control's broker sets (``BrokerSetAwareGoal``) and
    ``topics.excluded.from.partition.movement`` (``frozen``). The hard parts
    (``require_tags``, ``tolerations``, ``frozen``) are kept by every strategy
    (:mod:`assigners.policies`); ``prefer_tags``, ``prefer_strength`` and
    ``leader_racks`` are recorded for ``balanced``'s soft goals.
    """

    topics: str  # a regular expression, matched against the whole topic name
    require_tags: Mapping[str, str] = field(default_factory=dict)  # replicas only on brokers with all of these
    tolerations: tuple[str, ...] = ()  # taints its topics may sit beside
    prefer_tags: Mapping[str, str] = field(default_factory=dict)
    prefer_strength: float = 0.5  # 0.0 ignore ... 1.0 must
    leader_racks: tuple[str, ...] = ()
    frozen: bool = False  # never moved, except off a broker that may not keep it

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.topics, topic) is not None

    def to_dict(self) -> dict[str, Any]:
        """The plain form (TOML's keys), only what differs from the defaults: an old config keeps its hash."""
        out: dict[str, Any] = {"topics": self.topics}
        for name, default in (("require_tags", {}), ("tolerations", ()), ("prefer_tags", {}), ("leader_racks", ())):
            value = getattr(self, name)
            if value != default:
                out[name] = dict(sorted(value.items())) if isinstance(value, Mapping) else list(value)
        if self.prefer_tags:
            out["prefer_strength"] = self.prefer_strength
        if self.frozen:
            out["frozen"] = True
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PlacementRule:
        return cls(
            str(raw["topics"]),
            dict(raw.get("require_tags", {})),
            tuple(raw.get("tolerations", ())),
            dict(raw.get("prefer_tags", {})),
            float(raw.get("prefer_strength", 0.5)),
            tuple(raw.get("leader_racks", ())),
            bool(raw.get("frozen", False)),
        )


DEFAULT_HINT_STRENGTH = 0.5  # a plain affinity hint: soft, tried in config order among its equals

# ``balanced``'s per-goal thresholds (Constraints fields; None: the shared slack or ratio)
BALANCED_GOAL_THRESHOLDS = (
    "balanced_replica_slack",
    "balanced_leader_slack",
    "balanced_disk_ratio",
    "balanced_bytes_in_ratio",
    "balanced_bytes_out_ratio",
    "balanced_leader_bytes_in_ratio",
)


@dataclass(frozen=True)
class Constraints:
    """Hard and soft rules every strategy honours (DESIGN.md "Constraints").

    Parameters
    ----------
    excluded_brokers
        Brokers that must hold no replica, whatever their state.
    rack_aware
        Spread each partition over min(RF, racks) distinct racks.
    replication_factor
        Per-topic RF overrides; other topics keep ``default_replication_factor``
        or, when that is None, their current RF.
    default_replication_factor
        RF for topics without an override (None: keep the current one).
    min_failure_domains
        Every partition spans at least min(this, RF) failure domains, on top
        of the rack rule (0: no extra rule).
    max_partitions
        Cluster-wide cap on replicas per broker; a broker row's own
        ``max_partitions`` wins when it is lower.
    preferred_leaders
        Pinned leaders: ``"topic:partition"`` -> broker id (hard).
    anti_affinity_groups
        Groups of ``"topic:partition"`` (or ``"topic"``: all its partitions)
        whose leaders must sit on distinct brokers (hard).
    affinity_hints
        Groups whose leaders should share a broker (soft): ``"topic:partition"``
        entries form one group; ``"topic"`` entries pair the topics partition
        by partition (co-partitioned streams). Unmet hints are reported.
    affinity_hint_strengths
        Each hint's strength (LaminarDB's affinity strength): 1.0 makes it a
        hard rule the plan is validated against, 0.0 ignores it, and between
        them the stronger hints are tried first; empty: every hint
        :data:`DEFAULT_HINT_STRENGTH` (the plain list form of the config).
    max_moves, max_bytes_to_move
        Move budget against the baseline: only the most valuable optional
        moves are kept (:mod:`assigners.budget`); forced moves always happen.
    assign_cores, core_capacity
        Also place every replica on a core of its broker (Redpanda's
        allocator); ``core_capacity`` partitions per core is a hard cap.
    load_weights
        Weights of the rates in a replica's load (:class:`LoadWeights`).
    broker_tags, broker_taints, placement
        Placement rules by topic (:class:`PlacementRule`, :mod:`assigners.policies`):
        each broker's tags (``key -> value``) and taints (``"key=value"``),
        and the rules, the first matching a topic applying to it.
    lpt_skip_ratio, vnodes_per_core, bounded_load_epsilon
        Strategy options that travel with the rules: ``lpt`` leaves a legal
        cluster whose max/min broker load is below the ratio (``skipped``);
        ``consistent_hash`` gives a broker weight x vnodes_per_core points on
        its ring and, with an epsilon, walks past brokers above (1 + eps) x
        their weighted share.
    balanced_count_slack, balanced_load_ratio
        ``balanced``'s thresholds (``[planner.balanced]``): replicas and
        leaders per broker within the slack of their weighted share, each load
        resource at most the ratio times its lower bound.
    balanced_replica_slack, balanced_leader_slack, balanced_disk_ratio, balanced_bytes_in_ratio, \
balanced_bytes_out_ratio, balanced_leader_bytes_in_ratio
        One goal's own threshold, as Cruise Control sets one per resource
        (``disk.balance.threshold``, ``network.inbound.balance.threshold``,
        ...); None: the slack or ratio above (:meth:`balanced_slack`,
        :meth:`balanced_ratio`).
    balanced_mode, balanced_offload_ratio
        ``"balance"`` (the goals), or ``"offload"``: only brokers above
        ``balanced_offload_ratio`` times a resource's bound give up replicas
        (topicmappr's ``rebalance --storage-threshold``); None: the load ratio.
    """

    excluded_brokers: frozenset[int] = frozenset()
    rack_aware: bool = True
    replication_factor: Mapping[str, int] = field(default_factory=dict)
    default_replication_factor: int | None = None
    min_failure_domains: int = 0
    max_partitions: int | None = None
    lpt_skip_ratio: float = 1.5
    vnodes_per_core: int = 150
    bounded_load_epsilon: float | None = None
    balanced_count_slack: int = 1
    balanced_load_ratio: float = 1.05
    balanced_replica_slack: int | None = None
    balanced_leader_slack: int | None = None
    balanced_disk_ratio: float | None = None
    balanced_bytes_in_ratio: float | None = None
    balanced_bytes_out_ratio: float | None = None
    balanced_leader_bytes_in_ratio: float | None = None
    balanced_mode: str = "balance"
    balanced_offload_ratio: float | None = None
    preferred_leaders: Mapping[str, int] = field(default_factory=dict)
    anti_affinity_groups: tuple[tuple[str, ...], ...] = ()
    affinity_hints: tuple[tuple[str, ...], ...] = ()
    affinity_hint_strengths: tuple[float, ...] = ()  # per hint (empty: every hint DEFAULT_HINT_STRENGTH)
    max_moves: int | None = None
    max_bytes_to_move: int | None = None
    assign_cores: bool = False
    core_capacity: int = 7000
    load_weights: LoadWeights = LoadWeights()
    broker_tags: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    broker_taints: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    placement: tuple[PlacementRule, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Constraints:
        """Inverse of :meth:`to_dict` (the plain form that travels to Spark workers)."""
        return cls(
            excluded_brokers=frozenset(int(b) for b in raw.get("excluded_brokers", ())),
            rack_aware=bool(raw.get("rack_aware", True)),
            replication_factor=dict(raw.get("replication_factor", {})),
            default_replication_factor=raw.get("default_replication_factor"),
            min_failure_domains=int(raw.get("min_failure_domains", 0)),
            max_partitions=raw.get("max_partitions"),
            lpt_skip_ratio=float(raw.get("lpt_skip_ratio", cls.lpt_skip_ratio)),
            vnodes_per_core=int(raw.get("vnodes_per_core", cls.vnodes_per_core)),
            bounded_load_epsilon=raw.get("bounded_load_epsilon"),
            balanced_count_slack=int(raw.get("balanced_count_slack", cls.balanced_count_slack)),
            balanced_load_ratio=float(raw.get("balanced_load_ratio", cls.balanced_load_ratio)),
            **{name: raw[name] for name in BALANCED_GOAL_THRESHOLDS if raw.get(name) is not None},
            balanced_mode=str(raw.get("balanced_mode", cls.balanced_mode)),
            balanced_offload_ratio=raw.get("balanced_offload_ratio"),
            preferred_leaders={str(k): int(v) for k, v in raw.get("preferred_leaders", {}).items()},
            anti_affinity_groups=tuple(tuple(map(str, g)) for g in raw.get("anti_affinity_groups", ())),
            affinity_hints=tuple(tuple(map(str, g)) for g in raw.get("affinity_hints", ())),
            affinity_hint_strengths=tuple(float(s) for s in raw.get("affinity_hint_strengths", ())),
            max_moves=raw.get("max_moves"),
            max_bytes_to_move=raw.get("max_bytes_to_move"),
            assign_cores=bool(raw.get("assign_cores", False)),
            core_capacity=int(raw.get("core_capacity", cls.core_capacity)),
            load_weights=LoadWeights(**raw.get("load_weights", {})),
            broker_tags={int(b): dict(t) for b, t in raw.get("broker_tags", {}).items()},
            broker_taints={int(b): tuple(t) for b, t in raw.get("broker_taints", {}).items()},
            placement=tuple(PlacementRule.from_dict(r) for r in raw.get("placement", ())),
        )

    def balanced_slack(self, leaders: bool) -> int:
        """``balanced``'s slack for leader counts (``leaders``) or replica counts."""
        own = self.balanced_leader_slack if leaders else self.balanced_replica_slack
        return self.balanced_count_slack if own is None else own

    def balanced_ratio(self, goal: str) -> float:
        """``balanced``'s threshold for load goal ``goal`` (disk, bytes_in, bytes_out, leader_bytes_in)."""
        own = getattr(self, f"balanced_{goal}_ratio")
        return self.balanced_load_ratio if own is None else float(own)

    def rf_for(self, topic: str, current_rf: int) -> int:
        if topic in self.replication_factor:
            return int(self.replication_factor[topic])
        if self.default_replication_factor is not None:
            return int(self.default_replication_factor)
        return current_rf

    def to_dict(self) -> dict[str, Any]:
        return {
            "excluded_brokers": sorted(self.excluded_brokers),
            "rack_aware": self.rack_aware,
            "replication_factor": dict(sorted(self.replication_factor.items())),
            "default_replication_factor": self.default_replication_factor,
            "min_failure_domains": self.min_failure_domains,
            "max_partitions": self.max_partitions,
            "lpt_skip_ratio": self.lpt_skip_ratio,
            "vnodes_per_core": self.vnodes_per_core,
            "bounded_load_epsilon": self.bounded_load_epsilon,
            "balanced_count_slack": self.balanced_count_slack,
            "balanced_load_ratio": self.balanced_load_ratio,
            # a goal's own threshold only where set: a config without them keeps its hash
            **{name: getattr(self, name) for name in BALANCED_GOAL_THRESHOLDS if getattr(self, name) is not None},
            # offload mode only where chosen: a config without it keeps its hash
            **({"balanced_mode": self.balanced_mode} if self.balanced_mode != "balance" else {}),
            **(
                {"balanced_offload_ratio": self.balanced_offload_ratio}
                if self.balanced_offload_ratio is not None
                else {}
            ),
            "preferred_leaders": dict(sorted(self.preferred_leaders.items())),
            "anti_affinity_groups": [list(g) for g in self.anti_affinity_groups],
            "affinity_hints": [list(g) for g in self.affinity_hints],
            # strengths only where one is given: a config of plain hints keeps its hash
            **({"affinity_hint_strengths": list(self.affinity_hint_strengths)} if self.affinity_hint_strengths else {}),
            "max_moves": self.max_moves,
            "max_bytes_to_move": self.max_bytes_to_move,
            "assign_cores": self.assign_cores,
            "core_capacity": self.core_capacity,
            "load_weights": asdict(self.load_weights),
            # placement only where set: a config without it keeps its hash
            **(
                {"broker_tags": {str(b): dict(sorted(t.items())) for b, t in sorted(self.broker_tags.items())}}
                if self.broker_tags
                else {}
            ),
            **(
                {"broker_taints": {str(b): list(t) for b, t in sorted(self.broker_taints.items())}}
                if self.broker_taints
                else {}
            ),
            **({"placement": [r.to_dict() for r in self.placement]} if self.placement else {}),
        }


def stable_hash(*parts: object) -> int:
    """A 64-bit hash that is the same in every process (unlike ``hash()``)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _resolved_weight(weight: object, cores: object) -> float:
    if weight is not None and not pd.isna(weight):
        return float(weight)  # type: ignore[arg-type]
    if cores is not None and not pd.isna(cores) and int(cores) > 0:  # type: ignore[call-overload]
        return float(cores)  # type: ignore[arg-type]
    return 1.0


def prepare_brokers(brokers: pd.DataFrame, constraints: Constraints) -> pd.DataFrame:
    """Resolve weight, failure domain and eligibility of every broker.

    A broker without a rack is its own failure domain, so clusters without
    rack data get "distinct brokers" as their spread rule.
    """
    pdf = brokers.sort_values("broker_id", kind="stable").reset_index(drop=True)
    ids = pdf["broker_id"].astype("int64")
    weights = [
        _resolved_weight(w, c)
        for w, c in zip(pdf.get("weight", [None] * len(pdf)), pdf.get("cores", [None] * len(pdf)))
    ]
    racks = pdf["rack"] if "rack" in pdf else pd.Series([None] * len(pdf))
    domains = [str(r) if r is not None and not pd.isna(r) else f"broker:{b}" for r, b in zip(racks, ids)]
    eligible = (pdf["state"] == ACTIVE) & ~ids.isin(list(constraints.excluded_brokers))
    return pd.DataFrame(
        {
            "broker_id": ids,
            "rack": racks.values,
            "state": pdf["state"].values,
            "weight": np.asarray(weights, dtype="float64"),
            "cores": pdf.get("cores", pd.Series([None] * len(pdf))).values,
            "domain": domains,
            "eligible": eligible.values,
            "disk_capacity_bytes": pdf.get("disk_capacity_bytes", pd.Series([None] * len(pdf))).values,
            "max_partitions": pdf.get("max_partitions", pd.Series([None] * len(pdf))).values,
        }
    )


def prepare_partitions(partitions: pd.DataFrame, constraints: Constraints) -> pd.DataFrame:
    """Sort partitions, resolve the target RF, the live layout, the preference and the loads.

    ``current`` is the live layout of the snapshot (``replicas``): the
    baseline every move, figure and lower bound is measured against.
    ``preferred`` is where a strategy starts from and keeps what it may: the
    previous committed plan's target (``previous_replicas``) where there is
    one, else the live layout, so a plan being executed wave by wave is not
    replaced by a different one. ``bytes_in``/``bytes_out`` default to zero;
    ``leader_load`` and ``follower_load`` weigh them with
    ``constraints.load_weights``.
    """
    pdf = partitions.sort_values(["topic", "partition"], kind="stable").reset_index(drop=True)
    current_matrix = replica_matrix(pdf["replicas"].tolist())
    current = matrix_rows(current_matrix)
    preferred = current
    previous: list[list[int] | None] = [None] * len(pdf)
    if "previous_replicas" in pdf:
        planned = replica_matrix(pdf["previous_replicas"].tolist())
        has_plan = row_any(planned != PAD)
        if has_plan.any():
            planned_rows = iter(matrix_rows(planned, has_plan))
            previous = [next(planned_rows) if ok else None for ok in has_plan.tolist()]
            preferred = [p if p is not None else c for p, c in zip(previous, current)]
    rf = row_lengths(current_matrix)
    if constraints.replication_factor or constraints.default_replication_factor is not None:
        rf = np.asarray([constraints.rf_for(t, int(c)) for t, c in zip(pdf["topic"], rf)], dtype=np.int64)
    zeros = pd.Series(np.zeros(len(pdf)))
    bytes_in = pdf.get("bytes_in", zeros).fillna(0.0).to_numpy(dtype="float64")
    bytes_out = pdf.get("bytes_out", zeros).fillna(0.0).to_numpy(dtype="float64")
    leader_load, follower_load = constraints.load_weights.replica_loads(bytes_in, bytes_out)
    prepared = pd.DataFrame(
        {
            "topic": pdf["topic"].astype(str).values,
            "partition": pdf["partition"].astype("int64").values,
            "current": object_column(current),
            "preferred": object_column(preferred),
            "previous": object_column(previous),
            "rf": np.asarray(rf, dtype="int64"),
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
            "leader_load": leader_load,
            "follower_load": follower_load,
            "size_bytes": pdf.get("size_bytes", zeros).fillna(0).astype("int64").values,
            "size_known": pdf["size_bytes"].notna().to_numpy() if "size_bytes" in pdf else np.zeros(len(pdf), bool),
            "previous_cores": object_column(_planned_cores(pdf, previous)),
        }
    )
    frame_derived(prepared, "live matrix", lambda: current_matrix)  # its rows are what "current" lists
    return prepared


def _planned_cores(pdf: pd.DataFrame, previous: list[list[int] | None]) -> list[list[int] | None]:
    """The previous plan's core per replica of its target, None where it has none (or no longer fits)."""
    if "previous_cores" not in pdf:
        return [None] * len(pdf)
    return [
        [int(c) for c in cores]
        if base is not None and isinstance(cores, list | np.ndarray) and len(cores) == len(base)
        else None
        for cores, base in zip(pdf["previous_cores"].tolist(), previous)
    ]


@dataclass
class ClusterView:
    """Plain-Python lookups over prepared frames, for the strategies' loops."""

    eligible: list[int]
    domain_of: dict[int, str]
    weight_of: dict[int, float]
    n_domains: int
    rack_aware: bool
    min_failure_domains: int = 0
    max_replicas: dict[int, float] = field(default_factory=dict)  # hard caps; inf when none
    max_disk: dict[int, float] = field(default_factory=dict)
    eligible_set: frozenset[int] = frozenset()
    cores_of: dict[int, float] = field(default_factory=dict)
    core_capacity: int | None = None  # set when per-core placement caps the brokers too
    # what a plan derives from this view and inputs it never changes, kept for the same inputs (see derived)
    memo: dict[str, list[tuple[tuple[object, ...], Any]]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.eligible_set = frozenset(self.eligible)

    def derived(self, name: str, inputs: tuple[object, ...], build: Callable[[], Derived]) -> Derived:
        """``build()``, kept for the same ``inputs`` (the same objects, held here so their ids stay theirs; a
        plan never changes its frames in place): a small cluster's ``balanced`` plan builds 50-120 searches of
        the same inputs, each deriving the placement rules and the floors they and the racks force (with five
        rules on 10k partitions those take ~6 ms of a search's ~20 to build). The last :data:`DERIVED_KEPT`
        per ``name``.

        Examples
        --------
        >>> view = ClusterView([1], {1: "a"}, {1: 1.0}, 1, False)
        >>> frame, built = [3, 4], []
        >>> view.derived("sum", (frame,), lambda: built.append(1) or sum(frame))
        7
        >>> view.derived("sum", (frame,), lambda: built.append(1) or sum(frame)), len(built)
        (7, 1)
        >>> view.derived("sum", (list(frame),), lambda: built.append(1) or 0), len(built)  # equal, not the same
        (0, 2)
        """
        kept = self.memo.setdefault(name, [])
        for held, value in kept:
            if len(held) == len(inputs) and all(a is b for a, b in zip(held, inputs)):
                return value  # type: ignore[no-any-return]
        value = build()
        kept.append((inputs, value))
        del kept[:-DERIVED_KEPT]
        return value

    @classmethod
    def from_brokers(cls, brokers: pd.DataFrame, constraints: Constraints) -> ClusterView:
        ids = [int(b) for b in brokers["broker_id"]]
        eligible = sorted(int(b) for b, ok in zip(brokers["broker_id"], brokers["eligible"]) if ok)
        domain_of = dict(zip(ids, brokers["domain"]))
        global_cap = math.inf if constraints.max_partitions is None else float(constraints.max_partitions)
        cores_of = {b: float(c) for b, c in zip(ids, brokers.get("cores", [None] * len(ids))) if _cap(c) < math.inf}
        max_replicas = {b: min(global_cap, _cap(c)) for b, c in zip(ids, brokers["max_partitions"])}
        if constraints.assign_cores:  # the per-core cap is a broker cap the strategies plan around
            for b in ids:
                cores = max(int(cores_of.get(b, 1)), 1)
                max_replicas[b] = min(max_replicas[b], cores * constraints.core_capacity - CORE0_RESERVE)
        return cls(
            eligible=eligible,
            domain_of=domain_of,
            weight_of={b: float(w) for b, w in zip(ids, brokers["weight"])},
            n_domains=len({domain_of[b] for b in eligible}),
            rack_aware=constraints.rack_aware,
            min_failure_domains=constraints.min_failure_domains,
            max_replicas=max_replicas,
            max_disk={b: _cap(c) for b, c in zip(ids, brokers["disk_capacity_bytes"])},
            cores_of=cores_of,
            core_capacity=constraints.core_capacity if constraints.assign_cores else None,
        )

    def domain_matrix(self, matrix: np.ndarray) -> np.ndarray:
        """Failure-domain code of every cell of a replica matrix (-1 for padding).

        A broker the view does not know counts as a domain of its own.
        """
        names = sorted(set(self.domain_of.values()))
        ids = np.fromiter(self.domain_of, dtype=np.int64, count=len(self.domain_of))
        codes = np.asarray([names.index(self.domain_of[int(b)]) for b in ids], dtype=np.int64)
        domains = broker_codes(matrix, ids, codes, PAD)
        out: np.ndarray = np.where((matrix != PAD) & (domains == PAD), len(names) + matrix, domains)
        return out

    def required_domains(self, rf: int) -> int:
        """Distinct failure domains a partition of this RF must span.

        ``min_failure_domains`` may ask for more than the eligible racks can
        give; :func:`assigners.validate.check_feasible` reports that up front.
        """
        rack_rule = min(rf, self.n_domains) if self.rack_aware else 1
        return max(rack_rule, min(rf, self.min_failure_domains))

    def required_domains_each(self, rf: np.ndarray) -> np.ndarray:
        """:meth:`required_domains` of every element of an RF array."""
        rack_rule = np.minimum(rf, self.n_domains) if self.rack_aware else np.ones_like(rf)
        required: np.ndarray = np.maximum(rack_rule, np.minimum(rf, self.min_failure_domains))
        return required

    @property
    def has_caps(self) -> bool:
        return any(c < math.inf for c in self.max_replicas.values()) or any(
            c < math.inf for c in self.max_disk.values()
        )

    def capped(self, broker: int) -> bool:
        """Does ``broker`` have a cap on its replicas or its bytes?"""
        return self.max_replicas.get(broker, math.inf) < math.inf or self.max_disk.get(broker, math.inf) < math.inf

    def pins_racks(self, rf: np.ndarray) -> bool:
        """Does the rack rule pin every rack's total for partitions of RFs ``rf``: each has one replica in every
        rack (two racks at least), so a replica may only move within its rack?"""
        return self.n_domains >= 2 and bool(((rf == self.n_domains) & (self.required_domains_each(rf) == rf)).all())

    def rack_shares(self, rf: np.ndarray, rack_totals: Mapping[str, float]) -> dict[int, float] | None:
        """Each eligible broker's share by weight of its rack's replicas (``rack_totals``), where the rack rule
        pins every rack's total (each partition of RFs ``rf`` has one replica in every rack) and the racks
        hold different amounts per weight; None where the cluster's share is the one to even to.

        With RF 3 over racks of 17, 17 and 16 brokers each rack holds one
        replica of every partition whatever a plan does: the 16 brokers
        hold more than the cluster's share, the others less, and evened
        counts are each rack's share.
        """
        if not self.pins_racks(rf):
            return None
        weight_of_rack: dict[str, float] = {}
        for b in self.eligible:
            weight_of_rack[self.domain_of[b]] = weight_of_rack.get(self.domain_of[b], 0.0) + self.weight_of[b]
        per_weight = {rack: rack_totals.get(rack, 0) / weight for rack, weight in weight_of_rack.items()}
        if max(per_weight.values()) - min(per_weight.values()) <= 1e-9 * max(per_weight.values()):
            return None
        return {b: per_weight[self.domain_of[b]] * self.weight_of[b] for b in self.eligible}

    def rack_alternated(self) -> list[int]:
        """Eligible brokers interleaved by rack: r1b1, r2b1, r3b1, r1b2, ...

        Kafka's ``getRackAlternatedBrokerList``: consecutive entries sit in
        different racks, so consecutive replicas of a partition do too.
        """
        by_domain: dict[str, list[int]] = {}
        for b in self.eligible:
            by_domain.setdefault(self.domain_of[b], []).append(b)
        columns = [by_domain[d] for d in sorted(by_domain)]
        out: list[int] = []
        for i in range(max((len(c) for c in columns), default=0)):
            out.extend(c[i] for c in columns if i < len(c))
        return out


def topic_codes(partitions: pd.DataFrame) -> np.ndarray:
    """An integer per topic (partitions are sorted, so codes follow topic order); read-only, coded once per frame
    (:func:`frame_derived`)."""
    return frame_derived(
        partitions, "topic codes", lambda: pd.factorize(partitions["topic"], sort=True)[0].astype(np.int64)
    )


def _cap(value: object) -> float:
    """A nullable cap column value as a float bound (inf: no cap)."""
    return math.inf if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def assignment_frame(
    topics: list[str] | np.ndarray, partitions: list[int] | np.ndarray, replicas: list[list[int]]
) -> pd.DataFrame:
    """The strategies' return value: ``topic, partition, replicas``."""
    columns = {  # as arrays: from lists, pandas infers each element's type (10k rows: ~1.9 -> ~0.6 ms)
        "topic": np.asarray(topics, dtype=object),
        "partition": np.asarray(partitions, dtype=np.int64),
        "replicas": object_column(replicas),
    }
    return pd.DataFrame(columns, columns=ASSIGNMENT_COLUMNS)


def object_column(values: list[Any]) -> np.ndarray:
    """A list (of replica lists, say) as an object array, each element kept as it is: what pandas builds from
    the list, without its per-element inference (10k lists: ~2.4 -> ~1.6 ms a frame)."""
    return np.fromiter(values, dtype=object, count=len(values))


# -- replica lists as a matrix ------------------------------------------------------
# Checks, diffs and metrics run over every partition; on a padded int matrix
# (one row per partition, -1 after the last replica) they are numpy operations
# instead of Python loops, which is what keeps a 1M-partition cluster in seconds.

PAD = -1
Replicas = list[list[int]] | np.ndarray  # replica lists, or their padded matrix


# per partitions frame (by id, while the frame lives): what is derived from its columns alike, see frame_derived
_FRAME_DERIVED: dict[int, tuple[weakref.ref[pd.DataFrame], dict[str, np.ndarray]]] = {}


def frame_derived(partitions: pd.DataFrame, name: str, build: Callable[[], np.ndarray]) -> np.ndarray:
    """``build()``, read-only and kept under ``name`` while the ``partitions`` frame lives: what a plan derives
    from the prepared frame's columns in many places (:func:`live_matrix`, :func:`topic_codes`; the drifted
    10k shape listed the live layout 11 times, ~1.5 ms each, and coded the topics 4 times). A frame's columns
    are never changed in place (a search's own layout goes into a new frame, ``partitions.assign(...)``).
    Kept by the frame, not by :meth:`ClusterView.derived`: the planner and the strategy each build their own
    view of one prepared frame, and a view holds its inputs alive.

    Examples
    --------
    >>> p, built = pd.DataFrame({"x": [1, 2]}), []
    >>> frame_derived(p, "twice", lambda: built.append(1) or p["x"].to_numpy() * 2).tolist()
    [2, 4]
    >>> frame_derived(p, "twice", lambda: built.append(1) or p["x"].to_numpy()) is frame_derived(p, "twice", list)
    True
    >>> len(built), frame_derived(p, "twice", list).flags.writeable
    (1, False)
    """
    key = id(partitions)
    held = _FRAME_DERIVED.get(key)
    if held is None or held[0]() is not partitions:

        def forget(_: weakref.ref[pd.DataFrame]) -> None:
            _FRAME_DERIVED.pop(key, None)

        held = _FRAME_DERIVED[key] = (weakref.ref(partitions, forget), {})
    kept = held[1]
    if name not in kept:
        value = build()
        value.flags.writeable = False
        kept[name] = value
    return kept[name]


def live_matrix(partitions: pd.DataFrame) -> np.ndarray:
    """``partitions["current"]`` (the live layout) as a read-only :func:`replica_matrix`, listed once per frame
    (:func:`frame_derived`).

    Examples
    --------
    >>> p = pd.DataFrame({"current": [[1, 2], [2]]})
    >>> live_matrix(p).tolist(), live_matrix(p) is live_matrix(p), live_matrix(p).flags.writeable
    ([[1, 2], [2, -1]], True, False)
    """
    return frame_derived(partitions, "live matrix", lambda: replica_matrix(partitions["current"].tolist()))


def layout_matrix(rows: Sequence[Any], partitions: pd.DataFrame) -> np.ndarray:
    """``rows``' :func:`replica_matrix`: the frame's :func:`live_matrix` where ``rows`` are its live rows (the
    same row objects: ``partitions["current"].tolist()``, or ``"preferred"``'s where no plan is pending, which
    lists the live rows; a pointer compare each), else listed (not to be changed in place either way)."""
    current = partitions["current"]
    if len(rows) == len(current) and all(map(operator.is_, rows, current)):
        return live_matrix(partitions)
    return replica_matrix(rows)


def replica_matrix(replicas: Sequence[Any], width: int = 0) -> np.ndarray:
    """Replica lists (lists or arrays, None = empty) as an int64 matrix padded with -1.

    Examples
    --------
    >>> replica_matrix([[3, 1], [2], None]).tolist()
    [[3, 1], [2, -1], [-1, -1]]
    """
    n = len(replicas)
    present = replicas if isinstance(replicas, list) else list(replicas)
    try:  # map(len) is ~4x faster than a generator; None (an empty row) makes it raise
        lengths = np.fromiter(map(len, present), dtype=np.int64, count=n)
    except TypeError:
        lengths = np.fromiter((0 if r is None else len(r) for r in present), dtype=np.int64, count=n)
        present = [r for r in present if r is not None]
    width = max(width, int(lengths.max()) if n else 0, 1)
    total = int(lengths.sum())
    if not total:
        return np.full((n, width), PAD, dtype=np.int64)
    flat = np.concatenate(present) if isinstance(present[0], np.ndarray) else None  # Arrow's lists: 6x faster
    if flat is not None and flat.dtype.kind in "iu":
        flat = flat.astype(np.int64, copy=False)
    else:  # Python lists, or a null id inside (float NaN / None), which raises here as it should
        flat = np.fromiter(itertools.chain.from_iterable(present), dtype=np.int64, count=total)
    if total == n * width:  # every row full (one RF): the flat values are the matrix
        return flat.reshape(n, width)
    out = np.full((n, width), PAD, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    out[np.repeat(np.arange(n), lengths), np.arange(total) - np.repeat(starts, lengths)] = flat
    return out


def as_matrix(replicas: Replicas) -> np.ndarray:
    return replicas if isinstance(replicas, np.ndarray) else replica_matrix(replicas)


def matrix_rows(matrix: np.ndarray, mask: np.ndarray | None = None) -> list[list[int]]:
    """The replica lists of a padded matrix (only the rows where ``mask`` is set)."""
    if mask is not None:
        matrix = matrix[mask]
    lengths = row_lengths(matrix)
    matrix = shared_ints(matrix)
    if len(lengths) and lengths.min() == lengths.max():  # one RF (the usual case): one tolist() does it all
        rows: list[list[int]] = matrix[:, : int(lengths[0])].tolist()
        return rows
    # One tolist() per distinct row length (rows are padded on the right only)
    # instead of slicing every row: the lists come out ~5x faster.
    order = np.argsort(lengths, kind="stable")
    grouped: list[list[int]] = []
    for k in np.unique(lengths).tolist():
        grouped.extend(matrix[order[lengths[order] == k], :k].tolist())
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    return [grouped[j] for j in position.tolist()]


def shared_ints(values: np.ndarray) -> np.ndarray:
    """``values`` (ints, any shape) as objects whose equal cells are one Python int, so the lists ``tolist()``
    makes share one int object per distinct value instead of holding one per cell (a million replica lists
    of three: 129 -> 84 MiB, as fast); ``values`` itself where they are too spread out for a table to pay."""
    if values.size == 0:
        return values
    low, high = int(values.min()), int(values.max())
    if high - low > values.size:
        return values
    table = np.empty(high - low + 1, dtype=object)
    table[:] = range(low, high + 1)
    return table[values - low]  # type: ignore[no-any-return]


# Row-wise reductions over the narrow replica matrices (a row per partition, a column per replica), a column at
# a time: numpy reduces a 3-wide last axis 10-20x slower than it combines whole columns (10k x 3: any 140 -> 8 us,
# sum 106 -> 14 us, sort 161 -> ~30 us). Wider matrices take numpy's own.
NARROW = 8


def row_any(cells: np.ndarray) -> np.ndarray:
    """``cells.any(axis=1)``."""
    if cells.shape[1] > NARROW:
        return np.asarray(cells.any(axis=1))
    out = np.zeros(len(cells), dtype=bool)
    for j in range(cells.shape[1]):
        out |= cells[:, j]
    return out


def row_all(cells: np.ndarray) -> np.ndarray:
    """``cells.all(axis=1)``."""
    return ~row_any(~cells)


def row_sum(values: np.ndarray) -> np.ndarray:
    """``values.sum(axis=1)`` of bools or ints, as int64."""
    if values.shape[1] > NARROW:
        wide: np.ndarray = values.sum(axis=1, dtype=np.int64)
        return wide
    out = np.zeros(len(values), dtype=np.int64)
    for j in range(values.shape[1]):
        out += values[:, j]
    return out


def sorted_rows(values: np.ndarray) -> np.ndarray:
    """``np.sort(values, axis=1)`` of ints: odd-even transposition sort by column pairs (``width`` passes of
    compare-exchanges, exact) where the rows are narrow."""
    width = values.shape[1]
    if width > NARROW or values.dtype.kind not in "iub":
        wide: np.ndarray = np.sort(values, axis=1)
        return wide
    columns = [values[:, j] for j in range(width)]
    for sweep in range(width):
        for j in range(sweep % 2, width - 1, 2):
            columns[j], columns[j + 1] = np.minimum(columns[j], columns[j + 1]), np.maximum(columns[j], columns[j + 1])
    return np.stack(columns, axis=1) if width else values.copy()


def _column_cumsum(cells: np.ndarray) -> np.ndarray:
    """``np.cumsum(cells, axis=1)`` of bools, as int64."""
    out = np.empty(cells.shape, dtype=np.int64)
    running = np.zeros(len(cells), dtype=np.int64)
    for j in range(cells.shape[1]):
        running = running + cells[:, j]
        out[:, j] = running
    return out


def packed_left(matrix: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """The marked cells of each row moved to its left in their order, the rest padding.

    Examples
    --------
    >>> packed_left(np.array([[4, 5, 6], [7, 8, 9]]), np.array([[False, True, True], [True, False, False]])).tolist()
    [[5, 6, -1], [7, -1, -1]]
    """
    row, column = np.nonzero(marked)
    packed = np.full(matrix.shape, PAD, dtype=np.int64)
    rank = np.cumsum(marked, axis=1) if marked.shape[1] > NARROW else _column_cumsum(marked)
    packed[row, (rank - 1)[row, column]] = matrix[row, column]
    return packed


def row_lengths(matrix: np.ndarray) -> np.ndarray:
    return row_sum(matrix != PAD)


def row_contains(matrix: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per cell of ``matrix``: does the same row of ``values`` hold it (padding never matches)?"""
    hit = np.zeros(matrix.shape, dtype=bool)
    for j in range(values.shape[1]):  # a column at a time: a row x cell x cell cube cost 7x more (10k x 3)
        hit |= matrix == values[:, j : j + 1]
    out: np.ndarray = hit & (matrix != PAD)
    return out


def positions(ids: np.ndarray, values: np.ndarray | int) -> np.ndarray:
    """``np.searchsorted(ids, values)`` for sorted, unique ``ids``: broker ids are small non-negative ints, and
    where ``ids`` hold every one of ``values`` a table of them answers ~40x faster than a binary search per
    replica (10k x 3 replicas over 50 brokers: 0.67 -> 0.02 ms)."""
    values = np.asarray(values)
    if len(ids) and values.size and ids[0] >= 0 and ids[-1] <= 4 * values.size + 1024:
        table = np.full(int(ids[-1]) + 2, -1, dtype=np.int64)  # the last: every value above the ids
        table[ids] = np.arange(len(ids))
        found: np.ndarray = table[np.clip(values, -1, int(ids[-1]) + 1)]
        if found.min() >= 0:
            return found
    out: np.ndarray = np.searchsorted(ids, values)
    return out


def id_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.union1d`` of two arrays of broker ids, through a table of them where they are small and
    non-negative (as :func:`positions`)."""
    both = np.concatenate([np.asarray(a, dtype=np.int64).ravel(), np.asarray(b, dtype=np.int64).ravel()])
    if both.size and both.min() >= 0 and both.max() <= 4 * both.size + 1024:
        seen = np.zeros(int(both.max()) + 1, dtype=bool)
        seen[both] = True
        return np.flatnonzero(seen)
    out: np.ndarray = np.union1d(a, b)
    return out


def distinct_per_row(codes: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Distinct values per row among the ``valid`` cells."""
    if codes.shape[1] == 0:
        return np.zeros(len(codes), dtype=np.int64)
    filled = np.where(valid, codes, np.iinfo(np.int64).min)
    ordered = sorted_rows(filled)
    starts = np.ones_like(ordered, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    return row_sum(starts & (ordered != np.iinfo(np.int64).min))


def same_sets(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: do two padded matrices hold the same set of brokers (rows have no repeats)?"""
    width = max(a.shape[1], b.shape[1])
    a, b = pad_to(a, width), pad_to(b, width)
    return row_all(sorted_rows(a) == sorted_rows(b))


def argsort_small(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of small non-negative ints (broker slots, flags): as int16 numpy
    sorts them by radix, ~5x faster over millions of replicas."""
    if len(values) and values.min() >= 0 and values.max() < 2**15:
        values = values.astype(np.int16)
    order: np.ndarray = np.argsort(values, kind="stable")
    return order


def pad_to(matrix: np.ndarray, width: int) -> np.ndarray:
    if matrix.shape[1] >= width:
        return matrix
    return np.pad(matrix, ((0, 0), (0, width - matrix.shape[1])), constant_values=PAD)


def broker_codes(matrix: np.ndarray, broker_ids: np.ndarray, codes: np.ndarray, missing: int) -> np.ndarray:
    """Map every broker id in ``matrix`` to its code (``missing`` for unknown ids and padding)."""
    order = np.argsort(broker_ids, kind="stable")
    ids, mapped = broker_ids[order], codes[order]
    if not len(ids):
        return np.full(matrix.shape, missing, dtype=np.int64)
    if ids[0] >= 0 and ids[-1] <= 4 * matrix.size + 1024 and (ids[1:] != ids[:-1]).all():  # see positions
        table = np.full(int(ids[-1]) + 2, missing, dtype=np.int64)  # the last: padding and ids above them all
        table[ids] = mapped
        by_table: np.ndarray = table[np.clip(matrix, -1, int(ids[-1]) + 1)]
        return by_table
    pos = np.clip(np.searchsorted(ids, matrix), 0, len(ids) - 1)
    out: np.ndarray = np.where((ids[pos] == matrix) & (matrix != PAD), mapped[pos], missing)
    return out
