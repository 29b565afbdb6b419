"""Config parsing: unknown keys and bad values name the key; overrides merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from assigners import Constraints
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
        ({"constraints": {"excluded_brokers": "7"}}, "constraints.excluded_brokers must be a list"),
        ({"constraints": {"replication_factor": {"t": 0}}}, "constraints.replication_factor"),
        ({"clusters": {"c1": {"constraints": {"rackaware": True}}}}, "unknown key clusters.c1.constraints.rackaware"),
        ({"job": {"store": "hive"}}, "job.store = 'hive'"),
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
    assert local.strategy == "round_robin" and local.warehouse == "warehouse"
    assert example.for_cluster("kafka-eu-1").constraints.excluded_brokers == frozenset({1007})
    assert example.for_cluster("other").constraints.excluded_brokers == frozenset()


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
