"""The README's walk run as written (issue 37, acceptance 6): "Try it on your cluster" then "Executing a plan",
command by command, in a fresh folder, and what the README says each gives.

No Kafka cluster can run here: the Kafka tools the walk calls are stand-ins on PATH. The three that describe a
cluster print what Kafka prints for a demo cluster (``tests/kafka_samples.py``); the two that execute a plan
record their arguments and answer ``--verify`` as Kafka does (``tests/e2e/test_execute_script.py``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from jobs import cli
from tests import kafka_samples
from tests.e2e.test_execute_script import ELECT, REASSIGN
from tests.e2e.test_import import demo_fleet, of

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(title)
    following = re.search(r"^#{2,3} ", text[start + len(title) :], flags=re.MULTILINE)
    return text[start : start + len(title) + (following.start() if following else len(text))]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block)
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def stand_ins(folder: Path, cluster: str) -> dict[str, str]:
    """Kafka's tools as small scripts: three print a demo cluster's state, two record what they are asked."""
    folder.mkdir()
    fleet = demo_fleet()
    partitions, brokers = of(fleet["partitions"], cluster), of(fleet["brokers"], cluster)
    printed = {
        "kafka-topics.sh": kafka_samples.describe(partitions, brokers),
        "kafka-broker-api-versions.sh": kafka_samples.api_versions(brokers),
        "kafka-log-dirs.sh": kafka_samples.log_dirs(partitions, brokers),
    }
    scripts = {name: f"#!/bin/sh\ncat '{folder / (name + '.out')}'\n" for name in printed}
    scripts |= {"kafka-reassign-partitions.sh": REASSIGN, "kafka-leader-election.sh": ELECT}
    for name, text in printed.items():
        (folder / f"{name}.out").write_text(text)
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}", "STANDIN_LOG": str(folder / "calls.log")}


def run_shell(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], check=False, env=env, cwd=cwd, capture_output=True, text=True)


def test_the_readme_notes_of_demo_brokers_13_are_what_it_prints(spark, tmp_path, capsys):
    """The README quotes `partition-planner demo --brokers 13`'s notes: a real run's, so they cannot go stale."""
    text = README.read_text()
    quoted = text.split("with `partition-planner demo --brokers 13`")[1].split("```")[1].strip().splitlines()
    assert cli.main(["demo", "--warehouse", str(tmp_path / "wh"), "--brokers", "13"]) == 0
    printed = [line.strip() for line in capsys.readouterr().out.splitlines()]
    missing = [line for line in quoted if line.strip() not in printed]
    assert not missing, "README's --brokers 13 notes are stale; the run printed:\n" + "\n".join(printed)


def test_the_readme_walk_from_kafka_tool_output_to_an_executed_plan(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env = stand_ins(tmp_path / "kafka-bin", "cluster-1") | {"POLL_SECONDS": "0"}

    # "Try it on your cluster": collect with Kafka's tools, then import, plan, report, export
    collect, walk = bash_blocks(section("## Try it on your cluster"))
    for line in commands(collect):
        done = run_shell(line, env, tmp_path)
        assert done.returncode == 0, (line, done.stderr)
    for name in ("topics.txt", "brokers.txt", "log-dirs.txt"):
        assert (tmp_path / name).stat().st_size > 0
    for line in commands(walk):
        assert line.startswith("partition-planner ")
        assert cli.main(shlex.split(line)[1:]) == 0, line
    assert (tmp_path / "reports" / "prod-eu-1" / "v1" / "index.html").exists()  # as the README's comment says
    waves = sorted(p.name for p in (tmp_path / "exec" / "v1").glob("wave-*.json"))
    assert waves and (tmp_path / "exec" / "v1" / "execute.sh").exists()

    # "Executing a plan": the same cluster, the same steps, then execute.sh and status
    (block,) = bash_blocks(section("### Executing a plan"))
    capsys.readouterr()
    ran = []
    for line in commands(block):
        if line.startswith("partition-planner "):
            code = cli.main(shlex.split(line)[1:])
            assert code == 0, line
            ran.append(line.split()[1])
        elif "execute.sh" in line:
            done = run_shell(line, env, tmp_path)
            assert done.returncode == 0, done.stderr
            ran.append("execute.sh")
        else:  # step 5, the way back: for an emergency, not part of the walk
            assert line.startswith("kafka-reassign-partitions.sh") and ("--cancel" in line or "rollback" in line)
    assert ran == ["plan", "report", "export", "execute.sh", "status"]
    calls = Path(env["STANDIN_LOG"]).read_text().splitlines()
    assert [c.split("--reassignment-json-file ")[1].split()[0].rsplit("/", 1)[1] for c in calls[::3][:-1]] == waves
    assert calls[-1].startswith("kafka-leader-election --bootstrap-server kafka-1.example:9092 --election-type")

    # what status printed is what the README shows (below its first line, which names the run and the times)
    printed = capsys.readouterr().out
    status = printed[printed.index("prod-eu-1 plan v1") :].strip().splitlines()[1:]
    shown = section("### Executing a plan").split("`status` right after the export")[1].split("```")[1].strip("\n")
    assert "\n".join(status) == shown, "\n".join(status)
