"""Config parsing: unknown keys and bad values name the key; overrides merge."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from assigners import Constraints
from assigners.model import BALANCED_GOAL_THRESHOLDS
from jobs.config import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "raw,fragment",
    [
        ({"planner": {"strtegy": "x"}}, "unknown key planner.strtegy"),
        ({"planer": {}}, "unknown key planer"),
        ({"planner": {"strategy": "magic"}}, "planner.strategy = 'magic'"),
        ({"planner": {"seed": "1"}}, "planner.seed = '1' must be int"),
        ({"planner": {"wave_broker_limit": 0}}, "wave_broker_limit must be >= 1"),
        (
            {"planner": {"execution": {"max_moves_per_broker": 0}}},
            "planner.execution.max_moves_per_broker must be >= 1",
        ),
        ({"planner": {"execution": {"max_bytes_per_wave": -5}}}, "planner.execution.max_bytes_per_wave must be >= 1"),
        ({"planner": {"execution": {"move_order": "random"}}}, "planner.execution.move_order = 'random'"),
        ({"planner": {"execution": {"max_waves": 3}}}, "unknown key planner.execution.max_waves"),
        (
            {"planner": {"wave_broker_limit": 3, "execution": {"max_moves_per_broker": 2}}},
            "planner.execution.max_moves_per_broker or planner.wave_broker_limit, not both",
        ),
        ({"constraints": {"excluded_brokers": "7"}}, "constraints.excluded_brokers must be a list"),
        ({"constraints": {"replication_factor": {"t": 0}}}, "constraints.replication_factor"),
        ({"clusters": {"c1": {"constraints": {"rackaware": True}}}}, "unknown key clusters.c1.constraints.rackaware"),
        ({"job": {"store": "hive"}}, "job.store = 'hive'"),
        ({"job": {"max_snapshot_age": "6 hours"}}, "job.max_snapshot_age = '6 hours'; expected a duration"),
        ({"job": {"max_clock_skew": 5}}, "job.max_clock_skew = 5 must be str"),
    ],
)
def test_bad_config_names_the_key(raw, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config(raw, "test.toml")
    assert fragment in str(err.value)
    assert "test.toml" in str(err.value)


def test_shipped_configs_parse():
    local = load_config(ROOT / "conf" / "local.toml")
    example = load_config(ROOT / "conf" / "production.example.toml")
    assert local.strategy == "balanced" and local.warehouse == "warehouse"
    assert example.for_cluster("kafka-eu-1").constraints.excluded_brokers == frozenset({1007})
    assert example.for_cluster("other").constraints.excluded_brokers == frozenset()
    policies = load_config(ROOT / "conf" / "policies.toml")
    assert len(policies.constraints.placement) == 4 and policies.for_cluster("cluster-3").constraints.broker_taints


def test_the_readme_placement_example_parses_with_one_rule_of_each_kind():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Placement rules") : readme.index("## Guarantees")]
    block = section.split("```toml\n")[1].split("```")[0]
    rules = parse_config(tomllib.loads(block)).constraints
    kinds = [(bool(r.require_tags), r.frozen, bool(r.prefer_tags), bool(r.leader_racks)) for r in rules.placement]
    assert sorted(kinds) == sorted(tuple(k == n for k in range(4)) for n in range(4)), kinds
    assert rules.broker_taints and rules.broker_tags


def test_cluster_overrides_merge_and_change_the_hash():
    cfg = parse_config(
        {
            "constraints": {"excluded_brokers": [1], "replication_factor": {"a": 2}},
            "clusters": {"c2": {"constraints": {"excluded_brokers": [5], "replication_factor": {"b": 3}}}},
        }
    )
    c2 = cfg.for_cluster("c2").constraints
    assert c2.excluded_brokers == frozenset({1, 5})
    assert dict(c2.replication_factor) == {"a": 2, "b": 3}
    assert cfg.config_hash(["c1"]) != cfg.config_hash(["c2"])
    assert cfg.config_hash(["c1", "c2"]) == parse_config(
        {
            **{"constraints": {"excluded_brokers": [1], "replication_factor": {"a": 2}}},
            "clusters": {"c2": {"constraints": {"excluded_brokers": [5], "replication_factor": {"b": 3}}}},
        }
    ).config_hash(["c2", "c1"])


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_strategy_options_reach_the_constraints_of_every_cluster():
    config = parse_config({"planner": {"lpt_skip_ratio": 2, "vnodes_per_core": 50, "bounded_load_epsilon": 0.25}})
    settings = config.for_cluster("any")
    assert settings.constraints.lpt_skip_ratio == 2.0 and settings.constraints.vnodes_per_core == 50
    assert settings.constraints.bounded_load_epsilon == 0.25
    assert Constraints.from_dict(settings.constraints.to_dict()) == settings.constraints
    assert config.config_hash(["c"]) != parse_config({}).config_hash(["c"])


def test_a_balanced_goals_own_threshold_travels_and_an_unset_one_leaves_the_hash_alone():
    config = parse_config({"planner": {"balanced": {"disk_ratio": 1.2, "leader_slack": 2}}})
    constraints = config.for_cluster("any").constraints
    assert constraints.balanced_ratio("disk") == 1.2 and constraints.balanced_ratio("bytes_in") == 1.05
    assert constraints.balanced_slack(leaders=True) == 2 and constraints.balanced_slack(leaders=False) == 1
    assert Constraints.from_dict(constraints.to_dict()) == constraints
    assert config.config_hash(["c"]) != parse_config({}).config_hash(["c"])
    # configs that set none keep the hash they had before these thresholds existed
    assert set(Constraints().to_dict()).isdisjoint(BALANCED_GOAL_THRESHOLDS)


@pytest.mark.parametrize(
    "planner, fragment",
    [
        ({"lpt_skip_ratio": 0.5}, "planner.lpt_skip_ratio must be >= 1"),
        ({"vnodes_per_core": 0}, "planner.vnodes_per_core must be >= 1"),
        ({"bounded_load_epsilon": "x"}, "planner.bounded_load_epsilon = 'x' must be a number"),
    ],
)
def test_bad_strategy_options_name_the_key(planner, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config({"planner": planner})


def test_rule_keys_parse_merge_per_cluster_and_travel_to_the_workers():
    config = parse_config(
        {
            "planner": {"load_weights": {"leader_out": 2.5}},
            "constraints": {
                "preferred_leaders": {"orders:0": 3},
                "anti_affinity_groups": [["orders:0", "orders:1"]],
                "affinity_hints": [["orders", "payments"]],
                "max_moves": 100,
                "max_bytes_to_move": 10**12,
                "assign_cores": True,
                "core_capacity": 5000,
            },
            "clusters": {"c2": {"constraints": {"preferred_leaders": {"orders:1": 4}, "max_moves": 5}}},
        }
    )
    c2 = config.for_cluster("c2").constraints
    assert dict(c2.preferred_leaders) == {"orders:0": 3, "orders:1": 4} and c2.max_moves == 5
    assert c2.anti_affinity_groups == (("orders:0", "orders:1"),) and c2.affinity_hints == (("orders", "payments"),)
    assert c2.assign_cores and c2.core_capacity == 5000 and c2.max_bytes_to_move == 10**12
    assert c2.load_weights.leader_out == 2.5 and c2.load_weights.leader_in == 1.0
    assert Constraints.from_dict(c2.to_dict()) == c2
    assert config.config_hash(["c2"]) != parse_config({}).config_hash(["c2"])


@pytest.mark.parametrize(
    "constraints, fragment",
    [
        ({"preferred_leaders": {"orders": 3}}, 'constraints.preferred_leaders.orders = 3: expected "topic:partition"'),
        ({"anti_affinity_groups": ["orders:0"]}, "constraints.anti_affinity_groups must be a list of groups"),
        ({"affinity_hints": [[]]}, "constraints.affinity_hints must be a list of groups"),
        ({"max_moves": -1}, "constraints.max_moves must be >= 0"),
        ({"core_capacity": 2}, "constraints.core_capacity must be >= 3"),
        ({"assign_cores": "yes"}, "constraints.assign_cores = 'yes' must be bool"),
    ],
)
def test_bad_rule_keys_name_the_key(constraints, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config({"constraints": constraints})


@pytest.mark.parametrize(
    "weights, fragment",
    [
        ({"leader_inn": 1.0}, "unknown key planner.load_weights.leader_inn"),
        ({"follower_in": -1}, "planner.load_weights.follower_in must be >= 0"),
        ({"leader_in": 0, "leader_out": 0, "follower_in": 0}, "planner.load_weights are all 0"),
    ],
)
def test_bad_load_weights_name_the_key(weights, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config({"planner": {"load_weights": weights}})


def test_placement_rules_parse_travel_to_the_workers_and_leave_other_configs_hash_alone():
    config = parse_config(
        {
            "constraints": {
                "broker_tags": {"1": {"tier": "ssd", "cell": "a"}, "2": {"tier": "ssd"}},
                "broker_taints": {"9": ["dedicated=payments"]},
                "placement": [
                    {"topics": "payments.*", "require_tags": {"tier": "ssd"}, "tolerations": ["dedicated=payments"]},
                    {"topics": "audit", "frozen": True, "prefer_tags": {"cell": "a"}, "prefer_strength": 0.7},
                ],
            },
            "clusters": {"c2": {"constraints": {"broker_taints": {"3": ["maintenance"]}}}},
        }
    )
    c = config.for_cluster("c1").constraints
    assert c.broker_tags == {1: {"tier": "ssd", "cell": "a"}, 2: {"tier": "ssd"}}
    assert c.broker_taints == {9: ("dedicated=payments",)}
    assert [r.topics for r in c.placement] == ["payments.*", "audit"]
    assert c.placement[1].frozen and c.placement[1].prefer_strength == 0.7 and not c.placement[0].frozen
    assert Constraints.from_dict(c.to_dict()) == c
    assert config.for_cluster("c2").constraints.broker_taints == {3: ("maintenance",)}
    # a config without placement keys hashes as before they existed: no empty entries in the plain form
    assert "placement" not in parse_config({}).for_cluster("c").constraints.to_dict()
    assert config.config_hash(["c1"]) != parse_config({}).config_hash(["c1"])


@pytest.mark.parametrize(
    "constraints, fragment",
    [
        ({"broker_tags": {"one": {"tier": "ssd"}}}, "constraints.broker_tags: key 'one' must be a broker id"),
        ({"broker_tags": {"1": {"tier": 3}}}, "constraints.broker_tags.1 must map tag names to string values"),
        (
            {"broker_taints": {"9": "dedicated=payments"}},
            r"constraints.broker_taints.9 must be a list of \"key=value\"",
        ),
        ({"placement": {"topics": "x"}}, r"constraints.placement must be a list of tables"),
        ({"placement": [{"require_tags": {"tier": "ssd"}}]}, r"constraints.placement\[1\].topics must be a regular"),
        (
            {"placement": [{"topics": "pay(ments"}]},
            r"constraints.placement\[1\].topics = 'pay\(ments' is not a regular",
        ),
        (
            {"placement": [{"topics": "x", "frozn": True}]},
            r"unknown key constraints.placement\[1\].frozn \(did you mean frozen",
        ),
        ({"placement": [{"topics": "x", "prefer_strength": 2}]}, r"prefer_strength = 2.0 must be between 0.0 and 1.0"),
        ({"placement": [{"topics": "x", "frozen": "yes"}]}, r"constraints.placement\[1\].frozen = 'yes' must be bool"),
    ],
)
def test_bad_placement_keys_name_the_key(constraints, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_config({"constraints": constraints})


def test_affinity_hints_take_a_strength_and_the_plain_form_keeps_its_meaning_and_hash():
    plain = parse_config({"constraints": {"affinity_hints": [["orders", "payments"]]}})
    assert plain.constraints.affinity_hints == (("orders", "payments"),)
    assert plain.constraints.affinity_hint_strengths == ()  # every hint the default strength, hash unchanged
    assert "affinity_hint_strengths" not in plain.constraints.to_dict()
    mixed = parse_config(
        {"constraints": {"affinity_hints": [["a", "b"], {"members": ["orders", "payments"], "strength": 1.0}]}}
    )
    assert mixed.constraints.affinity_hints == (("a", "b"), ("orders", "payments"))
    assert mixed.constraints.affinity_hint_strengths == (0.5, 1.0)
    assert Constraints.from_dict(mixed.constraints.to_dict()) == mixed.constraints
    assert mixed.config_hash(["c"]) != plain.config_hash(["c"])
    for bad, fragment in (
        ({"members": ["a", "b"], "strength": 1.5}, r"affinity_hints\[1\].strength = 1.5 must be in 0.0-1.0"),
        ({"members": ["a", "b"], "strenght": 1.0}, r"unknown key constraints.affinity_hints\[1\].strenght"),
        ({"strength": 0.5}, "constraints.affinity_hints must be a list of groups"),
    ):
        with pytest.raises(ConfigError, match=fragment):
            parse_config({"constraints": {"affinity_hints": [bad]}})
