"""The job config: TOML (``conf/local.toml``), validated at start, hashed for run ids.

Unknown keys and bad values raise :class:`ConfigError` naming the key; the
CLI turns it into exit code 2. Values not set anywhere take the defaults
below, which are also the embedded default used without a config file.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from assigners import STRATEGIES, Constraints
from assigners.leadership import parse_ref
from assigners.model import CORE0_RESERVE, DEFAULT_HINT_STRENGTH, LoadWeights, PlacementRule, StrategyOption
from assigners.waves import MOVE_ORDERS, WaveCaps
from schemas import ALL_TABLES

STORE_BACKENDS = ("auto", "delta-rs", "delta-spark")
TABLE_NAMES = tuple(ALL_TABLES)  # declared once, in schemas
# Constraints fields set under [planner] (global only): the load weights and every strategy's options
STRATEGY_OPTIONS = ("load_weights", *(o.field for s in STRATEGIES.values() for o in s.options))
# [planner] keys earlier releases read a strategy option from, still accepted
LEGACY_OPTION_KEYS = tuple(o.legacy for s in STRATEGIES.values() for o in s.options if o.legacy)
LOAD_WEIGHT_KEYS = tuple(LoadWeights.__dataclass_fields__)
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "conf" / "local.toml"


class ConfigError(ValueError):
    pass


DEFAULT_THROTTLE = 50_000_000  # bytes/s, the rate Kafka's own docs use in their --throttle example


@dataclass(frozen=True)
class Execution:
    """``[planner.execution]``: how the moves are cut into waves (part of the plan) and the throttle
    ``export`` writes into the runbook by default (not part of the plan, so not of the config hash)."""

    waves: WaveCaps = field(default_factory=WaveCaps)
    throttle_bytes_per_sec: int = DEFAULT_THROTTLE


@dataclass(frozen=True)
class ClusterSettings:
    strategy: str
    constraints: Constraints


@dataclass(frozen=True)
class Config:
    source: str = "<defaults>"
    warehouse: str | None = None
    store: str = "auto"
    tables: Mapping[str, str] = field(default_factory=dict)
    strategy: str = "balanced"
    seed: int = 0
    execution: Execution = field(default_factory=Execution)
    constraints: Constraints = field(default_factory=Constraints)
    cluster_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    allow_worse: bool = False
    max_snapshot_age: dt.timedelta | None = None  # [job]: fail a cluster whose newest snapshot is older
    max_clock_skew: dt.timedelta = dt.timedelta(minutes=5)  # [job]: snapshots dated later than now + this are ignored
    max_partitions_per_cluster: int | None = None  # [job]: a larger cluster fails instead of taking a worker down
    import_fan_out: float = 1.0  # [import] fan_out: estimated bytes_out = estimated bytes_in x this

    def for_cluster(self, cluster_id: str, strategy_override: str | None = None) -> ClusterSettings:
        """Effective strategy and constraints of one cluster (cluster section over global)."""
        override = self.cluster_overrides.get(cluster_id, {})
        strategy = strategy_override or override.get("strategy", self.strategy)
        merged = self.constraints.to_dict()
        for key, value in override.get("constraints", {}).items():
            if key in ("replication_factor", "preferred_leaders"):  # maps merge, the cluster's entries win
                merged[key] = {**merged[key], **value}
            elif key == "excluded_brokers":  # a global exclusion applies to every cluster
                merged[key] = sorted(set(merged[key]) | set(value))
            else:
                merged[key] = value
        options = {key: getattr(self.constraints, key) for key in STRATEGY_OPTIONS}  # [planner]: global only
        for key in STRATEGY_OPTIONS:
            merged.pop(key, None)  # a goal threshold left unset is not in the dict
        constraints = _constraints(merged, f"clusters.{cluster_id}.constraints", self.source)
        return ClusterSettings(strategy, replace(constraints, **options))

    def planning_dict(self, cluster_id: str, strategy_override: str | None = None) -> dict[str, Any]:
        """What one cluster's plan depends on (not where tables live): the input of its config hash."""
        settings = self.for_cluster(cluster_id, strategy_override)
        return {
            "seed": self.seed,
            "waves": asdict(self.execution.waves),
            "allow_worse": self.allow_worse,
            "strategy": settings.strategy,
            "constraints": settings.constraints.to_dict(),
        }

    def cluster_json(self, cluster_id: str, strategy_override: str | None = None) -> str:
        """One cluster's effective config as JSON (``plan_runs.config_json``; its hash is the config hash)."""
        return json.dumps(self.planning_dict(cluster_id, strategy_override), sort_keys=True, separators=(",", ":"))

    def cluster_hash(self, cluster_id: str, strategy_override: str | None = None) -> str:
        """Hash of one cluster's effective config (``plan_runs.config_hash``)."""
        return _hash(self.planning_dict(cluster_id, strategy_override))

    def config_hash(self, clusters: list[str], strategy_override: str | None = None) -> str:
        """Hash of the effective config of every cluster of a run."""
        return _hash({c: self.planning_dict(c, strategy_override) for c in sorted(clusters)})


def _hash(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_SECTIONS = {
    "job": {"warehouse", "store", "max_snapshot_age", "max_clock_skew", "max_partitions_per_cluster"},
    "tables": set(TABLE_NAMES),
    "planner": {
        "strategy",
        "seed",
        "wave_broker_limit",
        "allow_worse",
        "execution",
        "load_weights",
        *LEGACY_OPTION_KEYS,
        *(name for name, s in STRATEGIES.items() if s.options),
    },
    # every Constraints field but those set under [planner]: the dataclass is the one list
    "constraints": {f.name for f in fields(Constraints)} - set(STRATEGY_OPTIONS),
    "clusters": None,  # free-form cluster ids, checked below
    "import": {"fan_out"},
}


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate a TOML config; ``None`` reads ``conf/local.toml`` if present, else defaults."""
    if path is None:
        if not DEFAULT_CONFIG.exists():
            return Config()
        path = DEFAULT_CONFIG
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return parse_config(raw, str(path))


def parse_config(raw: Mapping[str, Any], source: str = "<dict>") -> Config:
    _check_keys(raw, set(_SECTIONS), "", source)
    for section, keys in _SECTIONS.items():
        if section in raw and not isinstance(raw[section], dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        if keys is not None and section in raw:
            _check_keys(raw[section], keys, f"{section}.", source)
    job, planner, tables = raw.get("job", {}), raw.get("planner", {}), raw.get("tables", {})
    store = _typed(job, "store", str, "auto", "job.", source)
    if store not in STORE_BACKENDS:
        raise ConfigError(f"{source}: job.store = {store!r}; expected one of {', '.join(STORE_BACKENDS)}")
    for name, location in tables.items():
        if not isinstance(location, str) or not location:
            raise ConfigError(f"{source}: tables.{name} must be a non-empty path")
    strategy = check_strategy(
        _typed(planner, "strategy", str, "balanced", "planner.", source), "planner.strategy", source
    )
    seed = _typed(planner, "seed", int, 0, "planner.", source)
    execution = _execution(planner, source)
    constraints = replace(
        _constraints(raw.get("constraints", {}), "constraints", source), **_strategy_options(planner, source)
    )
    overrides = _cluster_overrides(raw.get("clusters", {}), source)
    return Config(
        source,
        _typed(job, "warehouse", str, None, "job.", source),
        store,
        dict(tables),
        strategy,
        seed,
        execution,
        constraints,
        overrides,
        _typed(planner, "allow_worse", bool, False, "planner.", source),
        _duration(job, "max_snapshot_age", None, source),
        _duration(job, "max_clock_skew", "5m", source) or dt.timedelta(0),
        _at_least(job, "max_partitions_per_cluster", 1, "job", source),
        _fan_out(raw.get("import", {}), source),
    )


def _fan_out(section: Mapping[str, Any], source: str) -> float:
    """``[import] fan_out``: consumers per byte produced, for bytes_out estimated from size growth."""
    value = _number(section, "fan_out", 1.0, source, "import.")
    if value is None or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{source}: import.fan_out = {value!r} must be a number >= 0")
    return value


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(table: Mapping[str, Any], key: str, default: str | None, source: str) -> dt.timedelta | None:
    """A ``[job]`` duration (None when unset and without default)."""
    text = _typed(table, key, str, default, "job.", source)
    return None if text is None else parse_duration(text, f"{source}: job.{key}")


def parse_duration(text: str, what: str) -> dt.timedelta:
    """``"90s"``, ``"5m"``, ``"6h"``, ``"7d"`` as a timedelta; ConfigError naming ``what`` otherwise."""
    number, unit = text.strip()[:-1], text.strip()[-1:]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _DURATION_UNITS or value < 0:
        raise ConfigError(f'{what} = {text!r}; expected a duration like "90s", "5m", "6h" or "7d"')
    return dt.timedelta(seconds=value * _DURATION_UNITS[unit])


def _check_keys(table: Mapping[str, Any], known: set[str], prefix: str, source: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        near = difflib.get_close_matches(unknown[0], sorted(known), n=1)  # a typo names what was meant
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise ConfigError(
            f"{source}: unknown key {prefix}{unknown[0]}{hint}; known keys here: {', '.join(sorted(known))}"
        )


def _typed(table: Mapping[str, Any], key: str, kind: type, default: Any, prefix: str, source: str) -> Any:
    if key not in table or (table[key] is None and default is None):  # TOML has no null; merged dicts do
        return default
    value = table[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{source}: {prefix}{key} = {value!r} must be {kind.__name__}")
    return value


def check_strategy(name: str, key: str, source: str) -> str:
    if name not in STRATEGIES:
        raise ConfigError(f"{source}: {key} = {name!r}; known strategies: {', '.join(sorted(STRATEGIES))}")
    return name


def _constraints(raw: Mapping[str, Any], prefix: str, source: str = "config") -> Constraints:
    _check_keys(raw, _SECTIONS["constraints"] or set(), f"{prefix}.", source)
    excluded = raw.get("excluded_brokers", [])
    if not isinstance(excluded, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in excluded):
        raise ConfigError(f"{source}: {prefix}.excluded_brokers must be a list of broker ids, got {excluded!r}")
    rack_aware = _typed(raw, "rack_aware", bool, True, f"{prefix}.", source)
    rf = raw.get("replication_factor", {})
    if not isinstance(rf, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in rf.values()
    ):
        raise ConfigError(f"{source}: {prefix}.replication_factor must map topic names to integers >= 1, got {rf!r}")
    default_rf = raw.get("default_replication_factor")
    if default_rf is not None and (not isinstance(default_rf, int) or isinstance(default_rf, bool) or default_rf < 1):
        raise ConfigError(f"{source}: {prefix}.default_replication_factor must be an integer >= 1, got {default_rf!r}")
    min_domains = _typed(raw, "min_failure_domains", int, 0, f"{prefix}.", source)
    if min_domains < 0:
        raise ConfigError(f"{source}: {prefix}.min_failure_domains must be >= 0, got {min_domains}")
    max_partitions = _typed(raw, "max_partitions", int, None, f"{prefix}.", source)
    if max_partitions is not None and max_partitions < 1:
        raise ConfigError(f"{source}: {prefix}.max_partitions must be >= 1, got {max_partitions}")
    return Constraints(
        frozenset(excluded),
        rack_aware,
        dict(rf),
        default_rf,
        min_domains,
        max_partitions,
        preferred_leaders=_preferred_leaders(raw.get("preferred_leaders", {}), prefix, source),
        anti_affinity_groups=_groups(raw, "anti_affinity_groups", prefix, source),
        **_hints(raw, prefix, source),
        max_moves=_at_least(raw, "max_moves", 0, prefix, source),
        max_bytes_to_move=_at_least(raw, "max_bytes_to_move", 0, prefix, source),
        assign_cores=_typed(raw, "assign_cores", bool, False, f"{prefix}.", source),
        core_capacity=_at_least(raw, "core_capacity", CORE0_RESERVE + 1, prefix, source) or Constraints.core_capacity,
        broker_tags=_broker_tags(raw.get("broker_tags", {}), f"{prefix}.broker_tags", source),
        broker_taints=_broker_taints(raw.get("broker_taints", {}), f"{prefix}.broker_taints", source),
        placement=_placement_rules(raw.get("placement", []), f"{prefix}.placement", source),
    )


def _broker_id(key: str, where: str, source: str) -> int:
    try:
        return int(key)
    except ValueError:
        raise ConfigError(f'{source}: {where}: key {key!r} must be a broker id, e.g. "1"') from None


def _string_map(value: Any, where: str, source: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        example = '{ tier = "ssd" }'
        raise ConfigError(f"{source}: {where} must map tag names to string values, e.g. {example}, got {value!r}")
    return dict(value)


def _broker_tags(raw: Any, where: str, source: str) -> dict[int, dict[str, str]]:
    """``"broker id" = { key = "value", ... }``."""
    if not isinstance(raw, dict):
        raise ConfigError(f'{source}: {where} must map broker ids to tag tables, e.g. "1" = {{ tier = "ssd" }}')
    return {_broker_id(b, where, source): _string_map(t, f"{where}.{b}", source) for b, t in raw.items()}


def _taint_list(value: Any, where: str, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and t and not t.startswith("=") for t in value):
        raise ConfigError(f'{source}: {where} must be a list of "key=value" (or "key") strings, got {value!r}')
    return tuple(value)


def _broker_taints(raw: Any, where: str, source: str) -> dict[int, tuple[str, ...]]:
    """``"broker id" = ["key=value", ...]``."""
    if not isinstance(raw, dict):
        example = '"9" = ["dedicated=payments"]'
        raise ConfigError(f"{source}: {where} must map broker ids to lists of taints, e.g. {example}")
    return {_broker_id(b, where, source): _taint_list(t, f"{where}.{b}", source) for b, t in raw.items()}


_RULE_KEYS = {f.name for f in fields(PlacementRule)}


def _placement_rules(raw: Any, where: str, source: str) -> tuple[PlacementRule, ...]:
    """``[[constraints.placement]]`` tables, each with a ``topics`` regular expression."""
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise ConfigError(f"{source}: {where} must be a list of tables ([[{where}]])")
    rules = []
    for n, rule in enumerate(raw, start=1):
        at = f"{where}[{n}]"
        _check_keys(rule, _RULE_KEYS, f"{at}.", source)
        topics = rule.get("topics")
        if not isinstance(topics, str) or not topics:
            raise ConfigError(f'{source}: {at}.topics must be a regular expression over topic names, e.g. "payments.*"')
        try:
            re.compile(topics)
        except re.error as exc:
            raise ConfigError(f"{source}: {at}.topics = {topics!r} is not a regular expression: {exc}") from None
        strength = _number(rule, "prefer_strength", 0.5, source, f"{at}.")
        if strength is None or not 0.0 <= strength <= 1.0:
            raise ConfigError(f"{source}: {at}.prefer_strength = {strength!r} must be between 0.0 and 1.0")
        racks = rule.get("leader_racks", [])
        if not isinstance(racks, list) or not all(isinstance(r, str) and r for r in racks):
            raise ConfigError(f"{source}: {at}.leader_racks must be a list of rack names, got {racks!r}")
        rules.append(
            PlacementRule(
                topics,
                _string_map(rule.get("require_tags", {}), f"{at}.require_tags", source),
                _taint_list(rule.get("tolerations", []), f"{at}.tolerations", source),
                _string_map(rule.get("prefer_tags", {}), f"{at}.prefer_tags", source),
                strength,
                tuple(racks),
                _typed(rule, "frozen", bool, False, f"{at}.", source),
            )
        )
    return tuple(rules)


def _at_least(raw: Mapping[str, Any], key: str, low: int, prefix: str, source: str) -> int | None:
    value = _typed(raw, key, int, None, f"{prefix}.", source)
    if value is not None and value < low:
        raise ConfigError(f"{source}: {prefix}.{key} must be >= {low}, got {value}")
    return value  # type: ignore[no-any-return]


def _preferred_leaders(raw: Any, prefix: str, source: str) -> dict[str, int]:
    """``"topic:partition" = broker_id`` entries."""
    if not isinstance(raw, dict):
        raise ConfigError(f'{source}: {prefix}.preferred_leaders must map "topic:partition" to a broker id')
    for ref, broker in raw.items():
        if parse_ref(ref)[1] is None or not isinstance(broker, int) or isinstance(broker, bool):
            raise ConfigError(
                f'{source}: {prefix}.preferred_leaders.{ref} = {broker!r}: expected "topic:partition" = broker id'
            )
    return dict(raw)


def _groups(raw: Mapping[str, Any], key: str, prefix: str, source: str) -> tuple[tuple[str, ...], ...]:
    """A list of groups, each a list of "topic" or "topic:partition" names."""
    groups = raw.get(key, [])
    if not isinstance(groups, list) or not all(
        isinstance(g, list) and g and all(isinstance(r, str) and r for r in g) for g in groups
    ):
        raise ConfigError(
            f'{source}: {prefix}.{key} must be a list of groups, each a list of "topic" or '
            f'"topic:partition" names, got {groups!r}'
        )
    return tuple(tuple(g) for g in groups)


def _hints(raw: Mapping[str, Any], prefix: str, source: str) -> dict[str, Any]:
    """``affinity_hints``: groups as lists (strength DEFAULT_HINT_STRENGTH) or tables ``{ members = [...],
    strength = 0.8 }``; the strengths only where a table gives one."""
    entries = raw.get("affinity_hints", [])
    if not isinstance(entries, list):
        entries = [entries]  # refused below, naming the key
    plain, strengths = [], []
    for n, entry in enumerate(entries, start=1):
        if isinstance(entry, dict):
            _check_keys(entry, {"members", "strength"}, f"{prefix}.affinity_hints[{n}].", source)
            strength = _number(entry, "strength", DEFAULT_HINT_STRENGTH, source, f"{prefix}.affinity_hints[{n}].")
            if strength is None or not 0.0 <= strength <= 1.0:
                raise ConfigError(f"{source}: {prefix}.affinity_hints[{n}].strength = {strength!r} must be in 0.0-1.0")
            plain.append(entry.get("members"))
            strengths.append(strength)
        else:
            plain.append(entry)
            strengths.append(DEFAULT_HINT_STRENGTH)
    groups = _groups({"affinity_hints": plain}, "affinity_hints", prefix, source)
    if all(s == DEFAULT_HINT_STRENGTH for s in strengths):
        return {"affinity_hints": groups}
    return {"affinity_hints": groups, "affinity_hint_strengths": tuple(strengths)}


def _strategy_options(planner: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``[planner.<strategy>]`` options of every registered strategy, and the load weights, as Constraints
    fields (carried in Constraints to the workers). Defaults are the Constraints dataclass's."""
    out: dict[str, Any] = {"load_weights": _load_weights(planner.get("load_weights", {}), source)}
    for name, strategy in STRATEGIES.items():
        if not strategy.options:
            continue
        section = planner.get(name, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: [planner.{name}] must be a table")
        _check_keys(section, {o.key for o in strategy.options}, f"planner.{name}.", source)
        for option in strategy.options:
            out[option.field] = _option(planner, section, name, option, source)
    return out


def _option(
    planner: Mapping[str, Any], section: Mapping[str, Any], name: str, option: StrategyOption, source: str
) -> Any:
    """One strategy option from ``[planner.<name>]`` (or its legacy ``[planner]`` key), type and bound checked."""
    if option.legacy and option.legacy in planner and option.key in section:
        raise ConfigError(f"{source}: give planner.{name}.{option.key} or planner.{option.legacy}, not both")
    table, key, prefix = (
        (planner, option.legacy, "planner.") if option.legacy in planner else (section, option.key, f"planner.{name}.")
    )
    assert key is not None
    default = getattr(Constraints(), option.field)
    if option.kind is str:
        value = _typed(table, key, str, default, prefix, source)
        if value not in option.choices:
            raise ConfigError(f"{source}: {prefix}{key} = {value!r}; expected one of {', '.join(option.choices)}")
        return value
    if option.kind is int:
        value = _typed(table, key, int, default, prefix, source)
    else:
        value = _number(table, key, default, source, prefix)
    if value is None and option.optional:
        return None
    if value is None or value < option.minimum or (option.strict and value <= option.minimum):
        sign = ">" if option.strict else ">="
        raise ConfigError(f"{source}: {prefix}{key} must be {sign} {option.minimum:g}, got {value}")
    return value


_EXECUTION_LIMITS = ("max_moves_per_broker", "max_moves_per_wave", "max_leader_moves_per_wave", "max_bytes_per_wave")


def _execution(planner: Mapping[str, Any], source: str) -> Execution:
    """``[planner.execution]``; ``[planner] wave_broker_limit`` is what earlier releases called
    ``max_moves_per_broker``."""
    raw = planner.get("execution", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [planner.execution] must be a table")
    _check_keys(raw, {*_EXECUTION_LIMITS, "move_order", "throttle_bytes_per_sec"}, "planner.execution.", source)
    if "wave_broker_limit" in planner and "max_moves_per_broker" in raw:
        raise ConfigError(
            f"{source}: give planner.execution.max_moves_per_broker or planner.wave_broker_limit, not both"
        )
    limits = {key: _at_least(raw, key, 1, "planner.execution", source) for key in _EXECUTION_LIMITS}
    if "wave_broker_limit" in planner:
        limits["max_moves_per_broker"] = _at_least(planner, "wave_broker_limit", 1, "planner", source)
    caps = {key: value for key, value in limits.items() if value is not None}  # unset: WaveCaps' default
    order = _typed(raw, "move_order", str, WaveCaps.move_order, "planner.execution.", source)
    if order not in MOVE_ORDERS:
        expected = ", ".join(MOVE_ORDERS)
        raise ConfigError(f"{source}: planner.execution.move_order = {order!r}; expected one of {expected}")
    throttle = _at_least(raw, "throttle_bytes_per_sec", 1, "planner.execution", source)
    return Execution(WaveCaps(**caps, move_order=order), throttle or DEFAULT_THROTTLE)


def _load_weights(raw: Any, source: str) -> LoadWeights:
    """``[planner.load_weights]``: leader_in, leader_out, follower_in, each a number >= 0."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [planner.load_weights] must be a table")
    _check_keys(raw, set(LOAD_WEIGHT_KEYS), "planner.load_weights.", source)
    weights = {}
    for key in LOAD_WEIGHT_KEYS:
        value = _number(raw, key, 1.0, source, "planner.load_weights.")
        if value is None or value < 0:
            raise ConfigError(f"{source}: planner.load_weights.{key} must be >= 0, got {value}")
        weights[key] = value
    if not any(weights.values()):
        raise ConfigError(f"{source}: planner.load_weights are all 0: every replica would weigh nothing")
    return LoadWeights(**weights)


def _number(
    table: Mapping[str, Any], key: str, default: float | None, source: str, prefix: str = "planner."
) -> float | None:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{source}: {prefix}{key} = {value!r} must be a number")
    return float(value)


def _cluster_overrides(raw: Mapping[str, Any], source: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for cluster_id, section in raw.items():
        prefix = f"clusters.{cluster_id}"
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: [{prefix}] must be a table")
        _check_keys(section, {"strategy", "constraints"}, f"{prefix}.", source)
        entry: dict[str, Any] = {}
        if "strategy" in section:
            entry["strategy"] = check_strategy(
                _typed(section, "strategy", str, None, f"{prefix}.", source), f"{prefix}.strategy", source
            )
        if "constraints" in section:
            _constraints(section["constraints"], f"{prefix}.constraints", source)  # validate now, merge later
            entry["constraints"] = dict(section["constraints"])
        out[str(cluster_id)] = entry
    return out
