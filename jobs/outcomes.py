"""What a run reports: each cluster's outcome, the console summary line, and the exit code."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assigners import COMMITTED, FAILED, SKIPPED
from jobs.history import RecordedRun

if TYPE_CHECKING:  # the planner's module imports Spark, which this one never needs
    from jobs.spark_planner import ClusterRequest


@dataclass
class ClusterOutcome:
    cluster_id: str
    status: str
    plan_version: int | None
    snapshot_ts: dt.datetime | None
    strategy: str
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    config_hash: str | None = None
    config_json: str | None = None
    done_by: str | None = None  # the run id that already wrote this outcome: nothing new is written

    def summary_line(self, dry_run: bool = False) -> str:
        """One line per cluster: what happened, from which snapshot, what it costs, before -> after."""
        status = "dry-run" if dry_run and self.status == COMMITTED else self.status  # a dry run never says committed
        version = "v-" if self.plan_version is None else f"v{self.plan_version}"
        when = _utc(self.snapshot_ts) if self.snapshot_ts else "-"
        head = f"{self.cluster_id:<14} {status:<9} {version:<4} {when}  {self.strategy:<15}"
        if self.done_by:
            return f"{head} already {self.status} by run {self.done_by}: nothing written"
        if self.status == FAILED:
            return f"{head} {self.error}"
        if self.status == SKIPPED or not self.metrics:
            return f"{head} {'; '.join(self.notes)}"
        return f"{head} {_costs(self.metrics)} | {_figures(self.metrics)}"


def _costs(m: dict[str, Any]) -> str:
    """Replica moves, partitions changed, data, waves; the move lower bound where it applies; the budget."""
    size = "size unknown" if m["bytes_to_move"] is None else gib(m["bytes_to_move"])  # no --log-dirs: not 0 B
    text = (
        f"moves {m['moves']:,} replica{_s(m['moves'])} in {m['partitions_moved']:,} partition"
        f"{_s(m['partitions_moved'])} ({m['leader_moves']:,} leader change{_s(m['leader_moves'])}), {size}, "
        f"{m['waves']:,} wave{_s(m['waves'])}"
    )
    if m.get("counts_balanced_after"):  # min_moves bounds count-balanced plans only
        text += f", min {m['min_moves']:,} for a count-balanced plan"
    if m.get("moves_deferred"):
        text += f", {m['moves_deferred']:,} moves deferred by the budget"
    return text


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _figures(m: dict[str, Any]) -> str:
    if m["load_lower_bound"] is None:  # no throughput measured: a load of 0.00 would be made up
        load = ("max_load/bound", "unknown", "unknown (no throughput measured)")
    else:
        bound = m["load_lower_bound"] or 1
        load = ("max_load/bound", f"{m['max_load_before'] / bound:.2f}", f"{m['max_load_after'] / bound:.2f}")
    pairs = [
        load,
        ("replica_spread", m["replica_spread_before"], m["replica_spread_after"]),
        ("leader_spread", m["leader_spread_before"], m["leader_spread_after"]),
        ("rack_violations", m["rack_violations_before"], m["rack_violations_after"]),
        ("balance_score", f"{m['balance_score_before']:.0f}", f"{m['balance_score_after']:.0f}"),
    ]
    return " ".join(f"{name} {before}->{after}" for name, before, after in pairs)


def _utc(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%MZ")


@dataclass
class RunReport:
    run_id: str
    config_hash: str
    outcomes: list[ClusterOutcome]
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)  # run-wide (config sections naming unknown clusters)

    @property
    def exit_code(self) -> int:
        return 1 if any(o.status == FAILED for o in self.outcomes) else 0


def gib(n: int) -> str:
    return f"{n / 2**30:,.2f} GiB"


def already_done(cluster_id: str, run_id: str, row: RecordedRun) -> ClusterOutcome:
    """The outcome this run id already recorded, as it was recorded (version, strategy, snapshot)."""
    return ClusterOutcome(
        cluster_id,
        row.status,
        row.plan_version,
        row.snapshot_ts,
        row.strategy,
        config_hash=row.config_hash,
        done_by=run_id,
    )


def planned_outcome(row: Any, snapshots: dict[str, dt.datetime], requests: dict[str, ClusterRequest]) -> ClusterOutcome:
    summary = json.loads(row["summary_json"])
    status = summary["status"]
    version = int(row["plan_version"])
    return ClusterOutcome(
        cluster_id=row["cluster_id"],
        status=status,
        plan_version=version if status != SKIPPED else (version - 1 or None),
        snapshot_ts=snapshots[row["cluster_id"]],
        strategy=row["strategy"],
        error=summary["error"],
        metrics=summary["metrics"],
        notes=summary["notes"],
        warnings=summary["warnings"],
        config_hash=requests[row["cluster_id"]].config_hash,
        config_json=requests[row["cluster_id"]].config_json,
    )
