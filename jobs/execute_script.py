"""``execute.sh``: the whole execution of an exported plan in one resumable command.

For each wave file in order: ``kafka-reassign-partitions --execute --throttle R``, then ``--verify`` every
``POLL_SECONDS`` until no partition is in progress, then the next wave; after the last one, one preferred-leader
election of the partitions the plan moves (``election.json``). Each step that finished is recorded in
``execute.state`` beside the script, so a rerun starts where the last run stopped: a wave already executed but
not yet verified is only verified again (re-executing it would meet Kafka's "existing assignment" refusal).

``--verify`` wording understood (Kafka's ``ReassignPartitionsCommand``):

* Kafka 2.0-2.4 (ZooKeeper tool): ``Reassignment of partition t-0 completed successfully`` / ``... is still in
  progress`` / ``... failed``;
* Kafka 2.5+ and 3.x / 4.x (KIP-455 tool): ``Reassignment of partition t-0 is complete.`` (``is completed.`` in
  the Java port) / ``... is still in progress.`` / ``There is no active reassignment of partition t-0, but
  replica set is [..] rather than [..].`` (the reassignment was cancelled or overridden: a failure here).

Bash (arrays, ``set -euo pipefail``); ``tests/e2e/test_execute_script.py`` runs it against stand-ins of the two
Kafka tools and checks it with shellcheck.
"""

from __future__ import annotations

import shlex

SCRIPT = r"""#!/usr/bin/env bash
# Executes plan v@VERSION@ of cluster @CLUSTER_TEXT@ (written by partition-planner export): every wave in order,
# each verified complete before the next, then one preferred-leader election of the partitions it moves.
#
#   BOOTSTRAP=kafka-1:9092 ./execute.sh
#
# Environment: BOOTSTRAP (required); COMMAND_CONFIG (admin client properties, passed as --command-config);
# THROTTLE (bytes/s per broker, default @THROTTLE@); POLL_SECONDS (between --verify calls, default 10);
# KAFKA_BIN (folder of the Kafka tools; else they are looked up on PATH, with or without .sh).
# Resumable: each finished step is recorded in execute.state beside this script; rerun it after a failure
# and it starts at the first unfinished wave. Delete execute.state to start over.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
state="$here/execute.state"
plan=@PLAN@  # the state lines of this plan start with it: another plan's state in the folder is ignored
status_command=@STATUS@
: "${BOOTSTRAP:?set BOOTSTRAP to the bootstrap servers of the cluster, e.g. BOOTSTRAP=kafka-1:9092 $0}"
throttle=${THROTTLE:-@THROTTLE@}
poll=${POLL_SECONDS:-10}
waves=(
@WAVES@
)

say() { printf '%s execute.sh: %s\n' "$(date -u +%H:%M:%SZ)" "$*"; }

stop() {  # stop: wave, what failed
    say "wave $1: $2; nothing more was run. Fix the cause, then resume with: $0" >&2
    exit 1
}

tool() {  # the path of a Kafka tool: $KAFKA_BIN first, then PATH (Apache's name.sh, Confluent's name)
    local name=$1 candidate
    for candidate in ${KAFKA_BIN:+"$KAFKA_BIN/$name.sh" "$KAFKA_BIN/$name"}; do
        if [ -x "$candidate" ]; then printf '%s\n' "$candidate"; return 0; fi
    done
    command -v "$name.sh" || command -v "$name" || {
        say "$name.sh not found under \$KAFKA_BIN (${KAFKA_BIN:-unset}) nor on PATH" >&2
        exit 1
    }
}

recorded() { [ -f "$state" ] && grep -qxF "$plan $1" "$state"; }
record() { printf '%s\n' "$plan $1" >> "$state"; }

reassign=$(tool kafka-reassign-partitions)
elect=$(tool kafka-leader-election)
common=(--bootstrap-server "$BOOTSTRAP")
if [ -n "${COMMAND_CONFIG:-}" ]; then common+=(--command-config "$COMMAND_CONFIG"); fi

total=${#waves[@]}
n=0
for wave in "${waves[@]}"; do
    n=$((n + 1))
    file="$here/$wave"
    if recorded "verified $wave"; then continue; fi
    if ! recorded "executed $wave"; then
        say "wave $n of $total: $wave: --execute --throttle $throttle"
        "$reassign" "${common[@]}" --reassignment-json-file "$file" --execute --throttle "$throttle" \
            || stop "$wave" "kafka-reassign-partitions --execute failed (exit $?)"
        record "executed $wave"
    fi
    while :; do
        out=$("$reassign" "${common[@]}" --reassignment-json-file "$file" --verify) \
            || stop "$wave" "kafka-reassign-partitions --verify failed (exit $?): $out"
        if grep -q 'still in progress' <<< "$out"; then
            sleep "$poll"
            continue
        fi
        if grep -Eq 'failed|There is no active reassignment' <<< "$out"; then
            failed=$(grep -E 'failed|no active' <<< "$out" | head -n 3 | tr '\n' ' ')
            stop "$wave" "--verify reports partitions that did not reach the plan: $failed"
        fi
        break
    done
    record "verified $wave"
    say "wave $n of $total: $wave complete"
done

if ! recorded "elected"; then
    say "preferred-leader election of the partitions the plan moves (election.json)"
    "$elect" "${common[@]}" --election-type PREFERRED --path-to-json-file "$here/election.json" \
        || stop "election" "kafka-leader-election --election-type PREFERRED failed (exit $?)"
    record "elected"
fi
say "done: $plan executed ($total waves, leaders elected); check it with: $status_command"
"""


def execute_script(cluster: str, version: int, run_id: str, waves: list[str], throttle: int, status: str) -> str:
    """The script's text for these wave files (in order), the default throttle and the status command shown at
    the end. Values reach the shell quoted; the cluster id in comments loses line breaks."""
    return (
        SCRIPT.replace("@CLUSTER_TEXT@", " ".join(cluster.split()))
        .replace("@VERSION@", str(version))
        .replace("@PLAN@", shlex.quote(f"plan v{version} of {cluster} ({run_id})"))
        .replace("@THROTTLE@", str(int(throttle)))
        .replace("@WAVES@", "\n".join(f"    {shlex.quote(w)}" for w in waves))
        .replace("@STATUS@", shlex.quote(status))
    )
