"""From a committed plan to its execution: what is left judged against the cluster's newest snapshot, Kafka's
reassignment file per wave, the rollback file, the runbook, and the execution status.

Each move is judged by the newest ``partitions`` snapshot of its cluster (a replica list compared as a set plus
its first, preferred-leader, entry): ``done`` at the target, ``pending`` at the baseline (``from_replicas``),
``moving`` while Kafka reassigns it (its list is the union of both, as ``kafka-topics --describe`` shows during a
reassignment), and ``drifted`` otherwise, or when the partition is gone. Files follow
``kafka-reassign-partitions``' format: ``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from assigners.live import in_flight_target
from jobs.execute_script import execute_script
from jobs.units import human_bytes, human_duration, human_rate
from jobs.warehouse import Warehouse

DONE, MOVING, PENDING, DRIFTED = "done", "moving", "pending", "drifted"
STATES = (DONE, MOVING, PENDING, DRIFTED)
SHOWN_DRIFTED = 20  # drifted partitions named in a message; the rest are counted


class DriftError(Exception):
    """Partitions of the plan are neither at their baseline nor at their target in the newest snapshot."""


@dataclass(frozen=True)
class Judged:
    """A committed plan's moves judged against the cluster's newest snapshot."""

    run: pd.Series
    snapshot_ts: Any  # of the newest snapshot
    moves: pd.DataFrame  # the moves table's rows plus ``found`` (list or None) and ``state``

    def of(self, *states: str) -> pd.DataFrame:
        return self.moves[self.moves["state"].isin(states)]

    def drift_message(self) -> str:
        """Which partitions drifted, where each was expected and found, and what resolves it: planning again."""
        drifted = self.of(DRIFTED)
        shown = [
            f"partition {t}:{int(p)} drifted: expected {plain(frm)} (or the target {plain(to)}), found "
            + (plain(f) if f is not None else "no such partition")
            for t, p, frm, to, f in drifted[["topic", "partition", "from_replicas", "to_replicas", "found"]]
            .head(SHOWN_DRIFTED)
            .itertuples(index=False)
        ]
        more = f"; and {len(drifted) - SHOWN_DRIFTED:,} more" if len(drifted) > SHOWN_DRIFTED else ""
        n = len(drifted)
        return (
            f"{n:,} partition{'s' if n != 1 else ''} of plan v{int(self.run['plan_version'])} of cluster "
            f"{self.run['cluster_id']} drifted (at neither the plan's baseline nor its target) in the snapshot of "
            f"{_ts(self.snapshot_ts)}: " + "; ".join(shown) + more + "; run plan: it writes a new version that "
            "starts from where they are"
        )


def judge(warehouse: Warehouse, cluster_id: str, plan_version: int | None = None) -> Judged:
    """The plan's moves (default: the latest committed version), each judged by the newest snapshot."""
    run = warehouse.run(cluster_id, plan_version)
    moves = warehouse.committed("moves", run)
    snapshot_ts, snapshot = warehouse.newest_snapshot(cluster_id)
    found = dict(zip(zip(snapshot["topic"], snapshot["partition"].astype(int)), where_going(snapshot)))
    moves["found"] = [found.get((t, int(p))) for t, p in zip(moves["topic"], moves["partition"])]
    moves["state"] = [
        move_state(f, list(frm), list(to))
        for f, frm, to in zip(moves["found"], moves["from_replicas"], moves["to_replicas"])
    ]
    return Judged(
        run, snapshot_ts, moves.sort_values(["wave", "topic", "partition"], kind="stable").reset_index(drop=True)
    )


def where_going(snapshot: pd.DataFrame) -> list[list[int]]:
    """Each partition's replicas, a reassignment in flight counted at its target (``replicas`` minus
    ``removing_replicas``), as the planner counts it (``assigners.live``)."""
    removing = snapshot["removing_replicas"] if "removing_replicas" in snapshot else [None] * len(snapshot)
    return [in_flight_target(replicas, removed) for replicas, removed in zip(snapshot["replicas"], removing)]


def plain(brokers: Any) -> str:
    """A replica list as people write it, ``[2, 4, 1]``, whatever array type it came in."""
    return "[" + ", ".join(str(int(b)) for b in brokers) + "]"


def move_state(found: list[int] | None, baseline: list[int], target: list[int]) -> str:
    """``done`` / ``pending`` / ``moving`` / ``drifted`` of one partition (see the module docstring).

    >>> move_state([3, 1], [1, 2], [3, 1]), move_state([2, 1], [1, 2], [3, 1]), move_state([3, 1, 2], [1, 2], [3, 1])
    ('done', 'pending', 'moving')
    >>> move_state([2, 4], [1, 2], [3, 1]), move_state(None, [1, 2], [3, 1])
    ('drifted', 'drifted')
    """
    if not found:
        return DRIFTED
    if _same(found, target):
        return DONE
    if _same(found, baseline):
        return PENDING
    if set(found) == set(baseline) | set(target):
        return MOVING
    return DRIFTED


def _same(found: list[int], expected: list[int]) -> bool:
    """Same replicas and the same preferred leader (follower order does not matter to the plan)."""
    return len(found) == len(expected) and set(found) == set(expected) and found[0] == expected[0]


LogDirs = dict[tuple[str, int, int], str]  # (topic, partition, broker) -> log dir


def reassignment(moves: pd.DataFrame, column: str = "to_replicas", log_dirs: LogDirs | None = None) -> dict[str, Any]:
    """Kafka's reassignment JSON of these moves: ``column``'s replica lists, leader first, by topic and partition;
    with ``log_dirs``, a partition with a known dir names it per replica (``"any"`` where unknown)."""
    rows = moves.sort_values(["topic", "partition"], kind="stable")
    entries = []
    for t, p, r in zip(rows["topic"], rows["partition"], rows[column]):
        entry: dict[str, Any] = {"topic": t, "partition": int(p), "replicas": [int(b) for b in r]}
        dirs = [(log_dirs or {}).get((t, int(p), int(b)), "any") for b in r]
        if any(d != "any" for d in dirs):
            entry["log_dirs"] = dirs
        entries.append(entry)
    return {"version": 1, "partitions": entries}


def baseline_log_dirs(warehouse: Warehouse, run: pd.Series) -> LogDirs:
    """Each replica's log dir in the snapshot the plan started from (``partitions.log_dirs``, written by import):
    the rollback puts data back on the disk it came from. Empty when the snapshot does not know them."""
    rows = warehouse.snapshot("partitions", run["cluster_id"], run["snapshot_ts"])
    if "log_dirs" not in rows:
        return {}
    return {
        (t, int(p), int(b)): d
        for t, p, replicas, dirs in zip(rows["topic"], rows["partition"], rows["replicas"], rows["log_dirs"])
        if dirs is not None
        for b, d in zip(replicas, dirs)
        if d is not None
    }


def wave_payload(judged: Judged, wave: int | None) -> dict[str, Any]:
    """The reassignment JSON of the moves still to execute (pending or moving), of one wave or all."""
    waves = int(judged.moves["wave"].max()) if len(judged.moves) else 0
    if wave is not None and not 1 <= wave <= waves:
        run = judged.run
        raise LookupError(
            f"plan v{run['plan_version']} of cluster {run['cluster_id']} has {waves} waves (1-{waves}); "
            f"--wave {wave} is not one"
            if waves
            else f"plan v{run['plan_version']} of cluster {run['cluster_id']} has no moves, so no waves; "
            f"--wave {wave} is not one"
        )
    todo = judged.of(PENDING, MOVING)
    return reassignment(todo if wave is None else todo[todo["wave"] == wave])


@dataclass(frozen=True)
class WaveFigures:
    """One wave's partitions (still to execute), bytes and how long it takes at the throttle; ``bytes`` and
    ``busiest_bytes`` are None when a partition of the wave copies a replica of unknown size."""

    wave: int
    partitions: int
    leader_only: int  # changes that copy no data (same replica set, new preferred leader)
    bytes: int | None
    busiest_bytes: int | None  # the most one broker receives or, as leader, sends: what the throttle paces
    done: int

    def eta(self, throttle: int) -> str:
        return "unknown size" if self.busiest_bytes is None else human_duration(self.busiest_bytes / throttle)

    def data(self) -> str:
        return "unknown" if self.bytes is None else human_bytes(self.bytes)


def copies_data(moves: pd.DataFrame) -> pd.Series:
    """Moves that add a replica somewhere (the rest are leader-only: nothing to copy)."""
    return moves["added_brokers"].map(lambda added: added is not None and len(added) > 0).astype(bool)


def known_total(values: pd.Series) -> int | None:
    """The sum of byte counts, or None when one is unknown (null): never measured is not zero."""
    return None if values.isna().any() else int(values.sum())


def wave_figures(judged: Judged) -> list[WaveFigures]:
    """Per wave of the plan, what is left of it (done partitions counted apart, drifted ones left out)."""
    out = []
    for wave, rows in judged.moves.groupby("wave", sort=True):
        todo = rows[rows["state"].isin([PENDING, MOVING])]
        out.append(
            WaveFigures(
                int(wave),
                len(todo),
                int((~copies_data(todo)).sum()),
                known_total(todo["bytes_to_move"]),
                busiest_broker_bytes(todo),
                int((rows["state"] == DONE).sum()),
            )
        )
    return out


def busiest_broker_bytes(moves: pd.DataFrame) -> int | None:
    """The most bytes one broker receives (as an added replica) or sends (as the leader the new replicas fetch
    from): Kafka's replication throttle paces each broker, so this sets how long the wave takes. None when a
    move that copies has no size."""
    if moves["bytes_to_move"][copies_data(moves)].isna().any():
        return None
    traffic: dict[int, int] = {}
    for added, leader, moved in zip(moves["added_brokers"], moves["from_leader"], moves["bytes_to_move"]):
        if added is None or not len(added) or not moved:
            continue
        for broker in added:
            traffic[int(broker)] = traffic.get(int(broker), 0) + int(moved) // len(added)
        if leader is not None and not pd.isna(leader):
            traffic[-1 - int(leader)] = traffic.get(-1 - int(leader), 0) + int(moved)  # sending side apart
    return max(traffic.values(), default=0)


def export_dir(
    judged: Judged,
    out_dir: str,
    throttle: int,
    max_hours: float | None,
    warehouse: str,
    allow_drift: bool = False,
    log_dirs: LogDirs | None = None,
) -> list[str]:
    """Write ``wave-NNN.json`` per wave with something left, ``rollback.json`` and ``runbook.md`` into
    ``out_dir``; nothing at all when a partition drifted (unless ``allow_drift``, which leaves it out).
    ``log_dirs`` (:func:`baseline_log_dirs`): the rollback names the log dir each replica came from.

    The files are written beside the folder first and moved in together, replacing an earlier export's.
    """
    if len(judged.of(DRIFTED)) and not allow_drift:
        raise DriftError(judged.drift_message())
    figures = wave_figures(judged)
    files: dict[str, str] = {}
    for wave, rows in judged.of(PENDING, MOVING).groupby("wave", sort=True):  # waves with something left
        files[wave_file(int(wave))] = _json(reassignment(rows))
    kept = judged.moves[judged.moves["state"] != DRIFTED]
    files["rollback.json"] = _json(reassignment(kept, "from_replicas", log_dirs))
    files["election.json"] = _json(election(kept))
    run = judged.run
    files[EXECUTE_SCRIPT] = execute_script(
        run["cluster_id"],
        int(run["plan_version"]),
        run["run_id"],
        [name for name in files if name.startswith("wave-")],
        throttle,
        status_command(warehouse, run),
    )
    files["runbook.md"] = runbook(judged, figures, throttle, max_hours, warehouse)
    return _replace_files(Path(out_dir), files)


EXECUTE_SCRIPT = "execute.sh"


def export_summary(written: list[str], out_dir: str) -> str:
    """What export wrote, in one line, and the command that runs it (not a line per wave file)."""
    waves = sorted(Path(p).name for p in written if Path(p).name.startswith("wave-"))
    span = f" ({waves[0]} … {waves[-1]})" if len(waves) > 1 else (f" ({waves[0]})" if waves else "")
    script = shlex.quote(str(Path(out_dir) / EXECUTE_SCRIPT))
    return (
        f"wrote {len(waves):,} wave file{'s' if len(waves) != 1 else ''}{span}, rollback.json, election.json, "
        f"runbook.md and {EXECUTE_SCRIPT} to {out_dir}; run them all with: BOOTSTRAP=<bootstrap servers> {script}"
    )


def election(moves: pd.DataFrame) -> dict[str, Any]:
    """``kafka-leader-election --path-to-json-file``'s input: the partitions of these moves."""
    rows = moves.sort_values(["topic", "partition"], kind="stable")
    return {"partitions": [{"topic": t, "partition": int(p)} for t, p in zip(rows["topic"], rows["partition"])]}


def status_command(warehouse: str, run: pd.Series) -> str:
    return (
        f"partition-planner status --warehouse {shlex.quote(warehouse)} --cluster {shlex.quote(run['cluster_id'])} "
        f"--plan-version {int(run['plan_version'])}"
    )


def wave_file(wave: int) -> str:
    return f"wave-{wave:03d}.json"


def _json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":")) + "\n"


def _replace_files(folder: Path, files: dict[str, str]) -> list[str]:
    """Put ``files`` into ``folder`` all together, removing an earlier export's wave files first."""
    staging = folder.with_name(f".{folder.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, text in files.items():
        (staging / name).write_text(text)
    (staging / EXECUTE_SCRIPT).chmod(0o755)
    folder.mkdir(parents=True, exist_ok=True)
    written = ["rollback.json", "runbook.md", "election.json", EXECUTE_SCRIPT]
    for old in [*folder.glob("wave-*.json"), *(folder / name for name in written)]:
        old.unlink(missing_ok=True)
    for name in files:
        os.replace(staging / name, folder / name)
    staging.rmdir()
    return [str(folder / name) for name in sorted(files)]


def runbook(judged: Judged, figures: list[WaveFigures], throttle: int, max_hours: float | None, warehouse: str) -> str:
    """The operator's page: what is left, per wave the commands and how long it takes at the throttle."""
    run = judged.run
    cluster, version = run["cluster_id"], int(run["plan_version"])
    left = [f for f in figures if f.partitions]
    sized = [f for f in left if f.busiest_bytes is not None]
    unsized = [f for f in left if f.busiest_bytes is None]
    copy = sum(f.bytes or 0 for f in sized)
    lines = [
        f"# Executing plan v{version} of {cluster}",
        "",
        f"Planned by run `{run['run_id']}` ({run['strategy']}) from the snapshot of {_ts(run['snapshot_ts'])}; "
        f"checked against the newest snapshot, of {_ts(judged.snapshot_ts)}.",
        "",
        f"- partitions to move: {sum(f.partitions for f in left):,} in {len(left):,} "
        f"wave{'s' if len(left) != 1 else ''} "
        + (f"({human_bytes(copy)} to copy)" if not unsized else f"(size unknown: {_unsized_reason(unsized)})"),
        f"- already done: {len(judged.of(DONE)):,} partition{'s' if len(judged.of(DONE)) != 1 else ''} "
        "(left out of the wave files)",
    ]
    if len(judged.of(MOVING)):
        lines.append(f"- being moved now: {len(judged.of(MOVING)):,} partitions (kept in their wave files)")
    if len(judged.of(DRIFTED)):
        lines.append(f"- **drifted, left out (`--allow-drift`)**: {judged.drift_message()}")
    busiest = sum(f.busiest_bytes or 0 for f in sized)
    if unsized:
        lines.append(
            f"- throttle: {throttle:,} B/s ({human_rate(throttle)}) per broker; no time estimate and no suggested "
            f"throttle for the {len(unsized):,} wave{'s' if len(unsized) != 1 else ''} without sizes"
            + (f" (the {len(sized):,} with sizes take about {human_duration(busiest / throttle)})" if sized else "")
        )
    else:
        lines.append(
            f"- throttle: {throttle:,} B/s ({human_rate(throttle)}) per broker; at that rate the waves take about "
            f"{human_duration(busiest / throttle)} of copying in all"
        )
    if max_hours and not unsized:
        needed = int(np.ceil(busiest / (max_hours * 3600))) if left else 0
        lines.append(
            f"- to finish within {max_hours:g} h: `--throttle {max(needed, 1)}` ({human_rate(needed)}) or more"
        )
    elif max_hours:
        lines.append(f"- to finish within {max_hours:g} h: no suggestion, the sizes are unknown")
    lines += [
        "",
        "## Run it all: `execute.sh`",
        "",
        "```sh",
        "BOOTSTRAP=kafka-1:9092 ./execute.sh",
        "# optional: COMMAND_CONFIG=admin.properties THROTTLE=<bytes/s> POLL_SECONDS=10 KAFKA_BIN=<kafka>/bin",
        "```",
        "",
        "`execute.sh` runs every wave below in order (`--execute`, then `--verify` every `POLL_SECONDS` until no "
        "partition is in progress), then one preferred-leader election of the partitions the plan moves "
        "(`election.json`). It records each finished step in `execute.state`; after a failure it stops with the "
        "wave's name, and running it again resumes at that wave. Keep `rollback.json` safe.",
        "",
        "By hand instead: set `BOOTSTRAP` to the cluster's bootstrap servers, then run the waves in order. Start a "
        "wave only when `--verify` says every partition of the previous one is complete (it also removes the "
        "throttle).",
        "",
        "| wave | partitions | leader only | data | busiest broker | time at throttle | done already |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {f.wave} | {f.partitions:,} | {f.leader_only:,} | {f.data()} | "
        f"{'unknown' if f.busiest_bytes is None else human_bytes(f.busiest_bytes)} | {f.eta(throttle)} | {f.done:,} |"
        for f in figures
    ]
    for f in left:
        name = wave_file(f.wave)
        lines += [
            "",
            f"## Wave {f.wave}: {f.partitions:,} partition{'s' if f.partitions != 1 else ''}, "
            + (f"{f.data()}, about {f.eta(throttle)}" if f.bytes is not None else "size unknown, no time estimate"),
            "",
            "```sh",
            f'kafka-reassign-partitions.sh --bootstrap-server "$BOOTSTRAP" --reassignment-json-file {name} '
            f"--execute --throttle {throttle}",
            f'kafka-reassign-partitions.sh --bootstrap-server "$BOOTSTRAP" --reassignment-json-file {name} --verify',
            "```",
        ]
    lines += [
        "",
        "## After the last wave",
        "",
        "Leader-only changes reorder replicas; make the new first replicas lead (`execute.sh` does this):",
        "",
        "```sh",
        'kafka-leader-election.sh --bootstrap-server "$BOOTSTRAP" --election-type PREFERRED '
        "--path-to-json-file election.json",
        status_command(warehouse, run),
        "```",
        "",
        "## Rollback",
        "",
        "`rollback.json` holds the baseline of every partition this plan changes. To stop a wave in flight, "
        "`--cancel` it; to go back, execute the rollback file the same way:",
        "",
        "```sh",
        'kafka-reassign-partitions.sh --bootstrap-server "$BOOTSTRAP" --reassignment-json-file wave-NNN.json --cancel',
        'kafka-reassign-partitions.sh --bootstrap-server "$BOOTSTRAP" --reassignment-json-file rollback.json '
        f"--execute --throttle {throttle}",
        "```",
    ]
    return "\n".join(lines) + "\n"


def _unsized_reason(unsized: list[WaveFigures]) -> str:
    return (
        f"{len(unsized):,} wave{'s' if len(unsized) != 1 else ''} copy replicas whose size_bytes the snapshot does "
        "not know (import without --log-dirs?)"
    )


def status_lines(judged: Judged) -> list[str]:
    """Per wave done / moving / pending / drifted and bytes left; runs of waves all pending are one line."""
    run = judged.run
    lines = [
        f"{run['cluster_id']} plan v{run['plan_version']} (run {run['run_id']}, planned from the snapshot of "
        f"{_ts(run['snapshot_ts'])}), judged by the snapshot of {_ts(judged.snapshot_ts)}",
        f"{'wave':>9} {'partitions':>10} {'done':>6} {'moving':>6} {'pending':>7} {'drifted':>7} {'to move':>11}",
    ]
    rows = []
    for wave, group in judged.moves.groupby("wave", sort=True):
        counts = group["state"].value_counts()
        left = known_total(group.loc[group["state"].isin([PENDING, MOVING]), "bytes_to_move"])
        rows.append([int(wave), int(wave), len(group), *(int(counts.get(s, 0)) for s in STATES), left])
    merged: list[list[Any]] = []
    for row in rows:
        prev = merged[-1] if merged else None
        if prev and prev[3] == prev[4] == prev[6] == 0 and row[3] == row[4] == row[6] == 0:  # all pending
            prev[1] = row[1]
            for i in (2, 5):
                prev[i] += row[i]
            prev[7] = None if prev[7] is None or row[7] is None else prev[7] + row[7]
        else:
            merged.append(row)
    for first, last, n, done, moving, pending, drifted, left in merged:
        label = str(first) if first == last else f"{first}-{last}"
        size = "unknown" if left is None else human_bytes(left)
        lines.append(f"{label:>9} {n:>10,} {done:>6,} {moving:>6,} {pending:>7,} {drifted:>7,} {size:>11}")
    return lines


def _ts(value: Any) -> str:
    stamp = pd.Timestamp(value)
    return stamp.strftime("%Y-%m-%dT%H:%MZ") if not pd.isna(stamp) else "?"


def write_json(payload: dict[str, Any], out: str | None) -> None:
    text = json.dumps(payload, indent=None, separators=(",", ":"))
    if out:
        tmp = f"{out}.tmp"
        Path(tmp).write_text(text + "\n")
        os.replace(tmp, out)  # never a half-written file for the reassignment tool
    else:
        print(text)
