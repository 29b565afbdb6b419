"""The user-facing documents say what the code does: contract columns, links, command flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assigners import STRATEGIES
from jobs import cli
from jobs.config import ConfigError, load_config
from schemas import ALL_TABLES

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "docs" / "contract.md"
README = ROOT / "README.md"


def documented_columns(text: str) -> dict[str, list[tuple[str, str]]]:
    """Per ``#### `table` `` heading of the contract, the (column, type) rows of the table under it."""
    tables: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in text.splitlines():
        heading = re.match(r"^#### `(\w+)`", line)
        if heading:
            current = tables.setdefault(heading.group(1), [])
            continue
        row = re.match(r"^\| (\w+) \| ([\w<>]+) \| (yes|no) \|", line)
        if current is not None and row:
            current.append((row.group(1), row.group(2)))
    return tables


def test_the_contract_documents_every_column_of_every_table_in_order():
    documented = documented_columns(CONTRACT.read_text())
    assert sorted(documented) == sorted(ALL_TABLES)
    for name, spec in ALL_TABLES.items():
        assert documented[name] == [(c.name, c.type) for c in spec.columns], name


def test_the_readme_keeps_balanced_to_two_sentences_and_links_its_page():
    row = next(line for line in README.read_text().splitlines() if line.startswith("| `balanced` |"))
    idea = row.split(" | ")[2]
    assert "(docs/balanced.md)" in idea and (ROOT / "docs" / "balanced.md").exists()
    assert len(re.findall(r"[.!?](?:\s|$)", idea)) <= 2, idea
    page = (ROOT / "docs" / "balanced.md").read_text()
    for key in ("count_slack", "load_ratio", "replica_slack", "leader_slack", "disk_ratio", "bytes_in_ratio"):
        assert f"`{key}`" in page, key


def test_the_readme_links_the_contract_inside_the_repository():
    text = README.read_text()
    assert "(docs/contract.md)" in text
    assert "../shared" not in text


def readme_commands() -> dict[str, set[str]]:
    """The flags each ``partition-planner <command>`` line of the README's synopsis shows."""
    block = README.read_text().split("## Command line", 1)[1].split("```", 2)[1]
    flags: dict[str, set[str]] = {}
    command = None
    for line in block.splitlines():
        start = re.match(r"^partition-planner (\w+)", line)
        if start:
            command = start.group(1)
        if command:
            flags.setdefault(command, set()).update(re.findall(r"--[a-z][a-z-]*", line))
    return flags


@pytest.mark.parametrize("command", sorted(readme_commands()))
def test_every_flag_the_readme_shows_is_one_the_command_takes(command, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    missing = sorted(f for f in readme_commands()[command] if f not in shown)
    assert not missing, f"README shows {missing} for {command}, its --help does not"


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_registered_strategy_is_documented_and_configurable(name, tmp_path):
    strategy = STRATEGIES[name]
    assert strategy.name == name and callable(strategy.assign)
    assert f"| `{name}` |" in README.read_text(), "README's strategy table lacks it"
    assert name in (ROOT / "conf" / "local.toml").read_text(), "conf/local.toml's strategy line lacks it"
    config = tmp_path / "c.toml"
    config.write_text(f'[planner]\nstrategy = "{name}"\n[clusters."c1"]\nstrategy = "{name}"\n')
    assert load_config(str(config)).for_cluster("c1").strategy == name


def test_an_unknown_strategy_is_refused_naming_the_key_and_the_known_ones(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[clusters."c1"]\nstrategy = "balancd"\n')
    with pytest.raises(ConfigError, match=r"clusters\.c1.*strategy = 'balancd'; known strategies: balanced, "):
        load_config(str(config))


OPTIONS = [(name, option) for name, s in sorted(STRATEGIES.items()) for option in s.options]


@pytest.mark.parametrize(("name", "option"), OPTIONS, ids=[f"{n}.{o.key}" for n, o in OPTIONS])
def test_every_strategy_option_parses_from_its_section_and_rejects_bad_values_by_key(name, option, tmp_path):
    config = tmp_path / "c.toml"
    good = option.choices[-1] if option.kind is str else option.minimum + (2 if option.kind is int else 0.5)
    config.write_text(f"[planner.{name}]\n{option.key} = {good!r}\n")
    assert getattr(load_config(str(config)).constraints, option.field) == good
    for bad in (option.minimum - 1, '"many"'):
        config.write_text(f"[planner.{name}]\n{option.key} = {bad}\n")
        with pytest.raises(ConfigError, match=rf"planner\.{name}\.{option.key}"):
            load_config(str(config))
    if option.legacy:  # the [planner] key of earlier releases still works, and both at once are refused
        config.write_text(f"[planner]\n{option.legacy} = {good!r}\n")
        assert getattr(load_config(str(config)).constraints, option.field) == good
        config.write_text(f"[planner]\n{option.legacy} = {good!r}\n[planner.{name}]\n{option.key} = {good!r}\n")
        with pytest.raises(ConfigError, match="not both"):
            load_config(str(config))
    section = README.read_text().split("[planner.lpt]")[1].split("[planner.load_weights]")[0]
    assert f"[planner.{name}]" in README.read_text() and option.key in section, "README's config example lacks it"


def test_an_unknown_key_in_a_strategy_section_is_named(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[planner.balanced]\ncount_slak = 2\n")
    with pytest.raises(
        ConfigError,
        match=r"unknown key planner\.balanced\.count_slak \(did you mean count_slack\?\); known keys here: .*load_",
    ):
        load_config(str(config))


def test_the_readmes_bench_table_is_written_between_its_markers_and_nowhere_else(tmp_path):
    """make bench-readme (bench/figures.py) replaces the README's table of figures, keeping every other line."""
    import datetime as dt
    import importlib.util

    spec = importlib.util.spec_from_file_location("figures", ROOT / "bench" / "figures.py")
    assert spec is not None and spec.loader is not None
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    text = README.read_text(encoding="utf-8")
    assert text.count(figures.START) == 1 and text.count(figures.END) == 1
    copy = tmp_path / "README.md"
    copy.write_text(text, encoding="utf-8")
    rows = [{"figure": "plan, tiny", "measured": "9.1 s", "goal": "<= 10 s", "ok": True}]
    rows.append({"figure": "floor", "measured": "8.9 s", "goal": "", "ok": None})
    figures.into_readme(copy, figures.table(rows), dt.date(2030, 1, 2))
    written = copy.read_text(encoding="utf-8")
    block = written.split(figures.START)[1].split(figures.END)[0]
    assert "on 2030-01-02" in block and "| plan, tiny | 9.1 s | <= 10 s | ok |" in block
    assert "| floor | 8.9 s | - |  |" in block and "export --out-dir" not in block  # the old table is gone
    assert written.split(figures.START)[0] == text.split(figures.START)[0]  # before the block: unchanged
    assert written.split(figures.END)[1] == text.split(figures.END)[1]  # after it: unchanged
    unmarked = tmp_path / "unmarked.md"
    unmarked.write_text("# no table here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no <!-- bench-table:start -->"):
        figures.into_readme(unmarked, "", dt.date(2030, 1, 2))
    garbled = tmp_path / "figures.jsonl"
    garbled.write_text('{"figure": "a", "measured": "1 s", "goal": "", "ok": null}\n[1]\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="line 2 is not a recorded figure"):
        figures.read_rows(garbled)
