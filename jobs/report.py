"""``report``: per cluster and plan version, a page people read (``index.html`` with PNG charts beside it, and
the same figures as ``summary.md``) plus ``brokers.csv`` and ``moves.csv``. Read without Spark.

The headline follows Cruise Control's proposal summary (replica moves, leader moves, data to move, balance
score before and after, violations, notes); the charts show per broker the load before and after against its
lower bound, replicas and leaders, replicas per rack, and the bytes of each wave.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from assigners.metrics import broker_table
from assigners.model import Constraints, prepare_brokers
from assigners.policies import with_broker_rules
from jobs.config import Config
from jobs.units import human_bytes, human_ratio
from jobs.warehouse import Warehouse

WORST_BROKERS = 10
UNKNOWN_RACK = "unknown"
MIB = 2**20
NO_THROUGHPUT = "no throughput measured yet"
KEYS = ["topic", "partition"]
BEFORE, AFTER = "#9aa5b1", "#2f6fb3"


def write_report(
    warehouse: Warehouse, out_dir: str, cluster_id: str | None, plan_version: int | None, config: Config
) -> list[str]:
    """One folder per cluster (default: every cluster with a committed plan) at ``out_dir/<cluster>/v<N>``.

    Charts use matplotlib's object API (no pyplot: no global figure state, no GUI backend, less to import).
    """
    charts = []
    folders = []
    for cid in [cluster_id] if cluster_id else warehouse.clusters():
        run = warehouse.run(cid, plan_version)
        brokers = broker_figures(warehouse, run, run_constraints(run, config, cid))
        moves = warehouse.committed("moves", run).sort_values(["wave", *KEYS], kind="stable")
        folder = Path(out_dir) / cid / f"v{int(run['plan_version'])}"
        folder.mkdir(parents=True, exist_ok=True)
        brokers.to_csv(folder / "brokers.csv", index=False)
        _with_plain_lists(moves).to_csv(folder / "moves.csv", index=False)
        (folder / "summary.md").write_text(summary_markdown(run, brokers, moves))
        (folder / "index.html").write_text(page(run, brokers, moves))
        charts += [(folder / name, name, brokers, moves, _bound(run)) for name in CHARTS]
        folders.append(str(folder))
    for chart in charts:
        _draw(*chart)
    return folders


def _bound(run: pd.Series) -> float:
    """The load lower bound; 0 when unknown (no throughput measured: plan_runs holds null)."""
    bound = run["load_lower_bound"]
    return 0.0 if bound is None or pd.isna(bound) else float(bound)


def run_constraints(run: pd.Series, config: Config, cluster_id: str) -> Constraints:
    """The constraints a committed plan was made with (``plan_runs.config_json``); runs written before that
    column existed fall back to the config given to the command."""
    recorded = run.get("config_json")
    if isinstance(recorded, str) and recorded:
        return Constraints.from_dict(json.loads(recorded)["constraints"])
    return config.for_cluster(cluster_id).constraints


def broker_figures(warehouse: Warehouse, run: pd.Series, constraints: Constraints) -> pd.DataFrame:
    """Per broker, before (the live layout of the plan's snapshot) and after (the plan): replicas, leaders, load."""
    cid, snapshot_ts = run["cluster_id"], run["snapshot_ts"]
    parts = warehouse.snapshot("partitions", cid, snapshot_ts)
    measured = (
        warehouse.snapshot("throughput", cid, snapshot_ts)
        if warehouse.exists("throughput")
        else pd.DataFrame(columns=[*KEYS, "snapshot_ts", "bytes_in_per_sec", "bytes_out_per_sec"])
    )
    rates = (
        measured.sort_values([*KEYS, "snapshot_ts", "bytes_in_per_sec", "bytes_out_per_sec"], kind="stable")
        .drop_duplicates(KEYS, keep="last")  # the newest rate at or before the snapshot, as the plan job picks
        .rename(columns={"bytes_in_per_sec": "bytes_in", "bytes_out_per_sec": "bytes_out"})[
            [*KEYS, "bytes_in", "bytes_out"]
        ]
    )
    snapshot = warehouse.snapshot("brokers", cid, snapshot_ts)
    constraints = with_broker_rules(constraints, snapshot)  # the table's tags and taints, under the config's
    brokers = prepare_brokers(snapshot, constraints)
    plans = warehouse.committed("plans", run)[[*KEYS, "replicas"]]

    def table(assignment: pd.DataFrame) -> pd.DataFrame:
        joined = assignment.merge(rates, on=KEYS, how="left").fillna({"bytes_in": 0.0, "bytes_out": 0.0})
        loads = constraints.load_weights.replica_loads(joined["bytes_in"].to_numpy(), joined["bytes_out"].to_numpy())
        return broker_table([list(map(int, r)) for r in joined["replicas"]], *loads, brokers).set_index("broker_id")

    before, after = table(parts[[*KEYS, "replicas"]]), table(plans)
    out = before[["eligible", "weight"]].copy()
    for column in ("replicas", "leaders", "load"):
        out[f"{column}_before"] = before[column]
        out[f"{column}_after"] = after[column].reindex(out.index).fillna(0)
    out = out.reset_index().merge(brokers[["broker_id", "rack", "state"]], on="broker_id", how="left")
    out["rack"] = out["rack"].fillna(UNKNOWN_RACK)  # as Kafka gave it; a broker it did not list has none
    # the placement rules' vocabulary, as the config gave it ("k=v;k=v", "" where none)
    tags, taints = constraints.broker_tags, constraints.broker_taints
    out["tags"] = [";".join(f"{k}={v}" for k, v in sorted(tags.get(int(b), {}).items())) for b in out["broker_id"]]
    out["taints"] = [";".join(taints.get(int(b), ())) for b in out["broker_id"]]
    return out


def _with_plain_lists(frame: pd.DataFrame) -> pd.DataFrame:
    """List columns as ``[1,2,3]`` text (pandas would print numpy's array repr, slowly)."""
    out = frame.copy()
    for column in ("from_replicas", "to_replicas", "added_brokers", "removed_brokers"):
        out[column] = ["" if r is None else "[" + ",".join(map(str, r)) + "]" for r in out[column]]
    return out


def _draw(path: Path, name: str, brokers: pd.DataFrame, moves: pd.DataFrame, bound: float) -> None:
    fig = CHARTS[name](brokers, moves, bound)
    # fixed margins (tight_layout would draw every chart twice): room for the axis labels in inches
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=0.7 / width, right=1 - 0.15 / width, top=1 - 0.35 / height, bottom=0.6 / height, wspace=0.2
    )
    # no version stamp (same plan, same bytes); light compression: the default level costs 4x the time
    fig.savefig(path, dpi=100, metadata={"Software": None}, pil_kwargs={"compress_level": 1})


def _paired_bars(ax: Any, labels: list[str], before: Any, after: Any) -> None:
    """Before and after bars side by side per label, each series one filled step artist (a patch per bar draws
    several times slower): per label the steps are before, after, then a gap."""
    n = len(labels)
    edges = np.add.outer(np.arange(n), [-0.4, 0.0, 0.4]).ravel().tolist() + [n - 0.4]
    zeros = np.zeros(n)
    for values, color, label, slot in ((before, BEFORE, "before", 0), (after, AFTER, "after", 1)):
        steps = np.column_stack([zeros, zeros, zeros])
        steps[:, slot] = np.asarray(values, dtype=float)
        ax.stairs(steps.ravel(), edges, fill=True, color=color, label=label)
    ax.set_xticks(range(n), labels, fontsize=7 if n > 16 else 9)
    ax.set_xlim(-0.7, n - 0.3)


def _broker_bars(ax: Any, brokers: pd.DataFrame, before: pd.Series, after: pd.Series, title: str) -> None:
    _paired_bars(ax, brokers["broker_id"].astype(str).tolist(), before, after)
    ax.set_title(title)
    ax.set_xlabel("broker")


def _says(ax: Any, title: str, text: str) -> None:
    """A chart with nothing to draw says why, instead of an empty axis."""
    ax.set_title(title)
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, color="#5b6775", transform=ax.transAxes)


def load_chart(brokers: pd.DataFrame, moves: pd.DataFrame, bound: float) -> Any:
    """Load per broker before and after, against the lower bound (binary units, as every figure here)."""
    fig = Figure(figsize=(9, 3.6))
    ax = fig.subplots()
    title = "Load per broker (MiB/s per unit of weight)"
    if not bound:
        _says(ax, title, f"{NO_THROUGHPUT}: pass --throughput to import, or import twice to estimate it")
        return fig
    _broker_bars(ax, brokers, brokers["load_before"] / MIB, brokers["load_after"] / MIB, title)
    ax.axhline(bound / MIB, color="#c0392b", linestyle="--", label="lower bound")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def counts_chart(brokers: pd.DataFrame, moves: pd.DataFrame, bound: float) -> Any:
    """Replicas and leaders per broker, before and after."""
    fig = Figure(figsize=(11, 3.6))
    (left, right) = fig.subplots(1, 2)
    _broker_bars(left, brokers, brokers["replicas_before"], brokers["replicas_after"], "Replicas per broker")
    _broker_bars(right, brokers, brokers["leaders_before"], brokers["leaders_after"], "Leaders per broker")
    left.legend(loc="upper right", fontsize=8)
    return fig


def racks_chart(brokers: pd.DataFrame, moves: pd.DataFrame, bound: float) -> Any:
    """Replicas per rack, before and after."""
    racks = (
        brokers.assign(rack=brokers["rack"].fillna(UNKNOWN_RACK))
        .groupby("rack")[["replicas_before", "replicas_after"]]
        .sum()
    )
    fig = Figure(figsize=(6, 3.4))
    ax = fig.subplots()
    _paired_bars(ax, racks.index.astype(str).tolist(), racks["replicas_before"], racks["replicas_after"])
    ax.set_title("Replicas per rack")
    ax.legend(fontsize=8)
    return fig


def waves_chart(brokers: pd.DataFrame, moves: pd.DataFrame, bound: float) -> Any:
    """Data copied by the end of each wave, cumulative: one line that stays readable at hundreds of waves."""
    fig = Figure(figsize=(9, 3.2))
    ax = fig.subplots()
    title = "Data copied by the end of each wave (GiB, cumulative)"
    if moves.empty:
        _says(ax, title, "no moves: nothing to copy")
        return fig
    if moves["bytes_to_move"].isna().any():
        _says(ax, title, "sizes unknown: the snapshot has no size_bytes (import with --log-dirs)")
        return fig
    per_wave = moves.groupby("wave")["bytes_to_move"].sum()
    waves = range(1, int(per_wave.index.max()) + 1)
    done = per_wave.reindex(waves, fill_value=0).cumsum().to_numpy() / 2**30
    ax.stairs(done, [w - 0.5 for w in [*waves, waves[-1] + 1]], fill=True, color=AFTER, alpha=0.85)
    ax.set_title(title)
    ax.set_xlabel(f"wave (of {len(waves):,})")
    ax.set_xlim(0.5, len(waves) + 0.5)
    return fig


CHARTS = {"load.png": load_chart, "counts.png": counts_chart, "racks.png": racks_chart, "waves.png": waves_chart}


def headline(run: pd.Series) -> list[tuple[str, str]]:
    """Cruise Control's proposal summary, from the plan_runs row."""

    def count(name: str) -> str:
        return f"{int(run[name]):,}" if not pd.isna(run[name]) else "-"

    def whole(value: Any) -> str:  # a count read back as a float (a null elsewhere in its column) stays whole
        return "-" if pd.isna(value) else f"{int(value):,}"

    def change(before: str, after: str, fmt: Any = whole) -> str:
        return f"{fmt(run[before])} → {fmt(run[after])}"

    def ratio(name: str, why: str) -> str:
        before, after = run[f"{name}_before"], run[f"{name}_after"]
        if pd.isna(before) and pd.isna(after):
            return f"unknown ({why})"
        return f"{human_ratio(before)} → {human_ratio(after)}"

    moved = run["bytes_to_move"]
    load = (
        change("max_load_before", "max_load_after", lambda v: _over(v, run))
        if _bound(run)
        else f"unknown ({NO_THROUGHPUT})"
    )

    def score(value: Any) -> str:
        return f"{float(value):.1f}"

    return [
        ("replica moves", count("moves")),
        ("partitions changed", count("partitions_moved")),
        ("leader moves", count("leader_moves")),
        ("data to move", "unknown (sizes not measured)" if pd.isna(moved) else human_bytes(float(moved))),
        ("waves", count("waves")),
        ("fewest moves possible (count-balanced)", count("min_moves")),
        ("balance score (0-100)", change("balance_score_before", "balance_score_after", score)),
        ("busiest broker load ÷ lower bound", load),
        ("bytes in ÷ bound", ratio("bytes_in_ratio", NO_THROUGHPUT)),
        ("bytes out ÷ bound", ratio("bytes_out_ratio", NO_THROUGHPUT)),
        ("disk ÷ bound", ratio("disk_ratio", "sizes not measured")),
        ("replica spread (max − min)", change("replica_spread_before", "replica_spread_after")),
        ("leader spread (max − min)", change("leader_spread_before", "leader_spread_after")),
        ("rack violations", change("rack_violations_before", "rack_violations_after")),
        ("moves deferred by the budget", count("moves_deferred")),
    ]


def _over(load: Any, run: pd.Series) -> str:
    bound = run["load_lower_bound"]
    return human_ratio(float(load) / float(bound)) if bound and not pd.isna(bound) else "-"


def worst_brokers(brokers: pd.DataFrame, bound: float, eligible: bool = True) -> pd.DataFrame:
    """The brokers that stay (``eligible``) most loaded after the plan (then before), with their figures in
    people's units; ``eligible=False``: the dead, draining or excluded brokers the plan empties, shown apart
    (a dead broker is not the "busiest")."""
    chosen = brokers[brokers["eligible"].astype(bool) == eligible]
    worst = chosen.sort_values(["load_after", "load_before", "broker_id"], ascending=[False, False, True])
    worst = worst.head(WORST_BROKERS) if eligible else worst

    def ratio(load: float) -> str:
        return human_ratio(load / bound) if bound else "-"

    def rate(load: float) -> str:
        return f"{human_bytes(load)}/s" if bound else "-"

    placed = (
        {"tags": worst["tags"], "taints": worst["taints"]}
        if "tags" in worst and (worst["tags"].astype(bool).any() or worst["taints"].astype(bool).any())
        else {}
    )
    return pd.DataFrame(
        {
            "broker": worst["broker_id"],
            "rack": worst["rack"].fillna(UNKNOWN_RACK),
            "state": worst["state"],
            **placed,
            "replicas": [f"{int(b):,} → {int(a):,}" for b, a in zip(worst["replicas_before"], worst["replicas_after"])],
            "leaders": [f"{int(b):,} → {int(a):,}" for b, a in zip(worst["leaders_before"], worst["leaders_after"])],
            "load ÷ bound": [f"{ratio(b)} → {ratio(a)}" for b, a in zip(worst["load_before"], worst["load_after"])],
            "load": [f"{rate(b)} → {rate(a)}" for b, a in zip(worst["load_before"], worst["load_after"])],
        }
    )


def wave_table(moves: pd.DataFrame) -> pd.DataFrame:
    """Per wave: partitions, leader-only changes, and data copied ("unknown" where a move of unknown size is in it)."""
    if moves.empty:
        return pd.DataFrame(columns=["wave", "partitions", "leader only", "data"])
    # one vectorised pass (a per-wave apply took ~0.1 s a cluster of ~400 waves)
    grouped = moves.assign(leader=moves["kind"] == "leader", unknown=moves["bytes_to_move"].isna()).groupby("wave")
    sums = grouped.agg(
        n=("kind", "size"), leader=("leader", "sum"), unknown=("unknown", "any"), data=("bytes_to_move", "sum")
    )
    return pd.DataFrame(
        {
            "wave": sums.index,
            "partitions": [f"{n:,}" for n in sums["n"]],
            "leader only": [f"{int(n):,}" for n in sums["leader"]],
            "data": ["unknown" if u else human_bytes(float(b)) for u, b in zip(sums["unknown"], sums["data"])],
        }
    )


def _notes(run: pd.Series) -> list[str]:
    notes = run.get("notes")
    if not isinstance(notes, str):
        return []
    return [n for n in notes.splitlines() if n.strip()]  # one per line, as commit joins them


def summary_markdown(run: pd.Series, brokers: pd.DataFrame, moves: pd.DataFrame) -> str:
    bound = _bound(run)
    lines = [f"# Plan {run['cluster_id']} v{int(run['plan_version'])}", "", _provenance(run), ""]
    lines += ["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in headline(run))]
    lines += ["", "## Notes", "", *(f"- {n}" for n in _notes(run) or ["none"])]
    lines += ["", "## Charts", "", *(f"![{c[:-4]}]({c})" for c in CHARTS)]
    lines += ["", "## Busiest brokers", "", _markdown_table(worst_brokers(brokers, bound))]
    emptied = worst_brokers(brokers, bound, eligible=False)
    if len(emptied):
        lines += ["", "## Brokers the plan empties (dead, draining or excluded)", "", _markdown_table(emptied)]
    lines += ["", "## Waves", "", _markdown_table(wave_table(moves))]
    return "\n".join(lines) + "\n"


def _provenance(run: pd.Series) -> str:
    return (
        f"Run `{run['run_id']}`, strategy `{run['strategy']}`, planned from the snapshot of "
        f"{pd.Timestamp(run['snapshot_ts']).strftime('%Y-%m-%d %H:%M UTC')}; "
        f"{int(run['partitions']):,} partitions, {int(run['replicas']):,} replicas."
    )


def _markdown_table(frame: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    return "\n".join([head, rule, *("| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False))])


def _html_text(text: str) -> str:
    """Escaped text whose `code` spans (the notes and the markdown share them) become <code>, not backticks."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def page(run: pd.Series, brokers: pd.DataFrame, moves: pd.DataFrame) -> str:
    bound = _bound(run)
    emptied = worst_brokers(brokers, bound, eligible=False)
    emptied_html = (
        f"<h2>Brokers the plan empties (dead, draining or excluded)</h2>{emptied.to_html(index=False, border=0)}"
        if len(emptied)
        else ""
    )
    title = f"Plan {run['cluster_id']} v{int(run['plan_version'])}"
    cards = "".join(
        f'<div class="card"><div class="v">{html.escape(v)}</div><div class="k">{html.escape(k)}</div></div>'
        for k, v in headline(run)
    )
    notes = "".join(f"<li>{_html_text(n)}</li>" for n in _notes(run)) or "<li>none</li>"
    charts = "".join(f'<img src="{c}" alt="{c[:-4]}">' for c in CHARTS)
    waves = wave_table(moves)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1120px; color: #1d2733; }}
h1 {{ margin-bottom: 4px; }} .sub {{ color: #5b6775; margin-top: 0; }}
.cards {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 10px; margin: 16px 0; }}
.card {{ border: 1px solid #d8dee6; border-radius: 6px; padding: 10px 12px; background: #f8fafc; }}
.card .v {{ font-size: 18px; font-weight: 600; }} .card .k {{ color: #5b6775; font-size: 12px; }}
img {{ max-width: 100%; display: block; margin: 10px 0; border: 1px solid #eef1f5; }}
table {{ border-collapse: collapse; margin: 8px 0 18px; }}
th, td {{ border-bottom: 1px solid #e3e8ee; padding: 4px 10px; text-align: right; }}
th {{ background: #f1f4f8; }} td:nth-child(2), td:nth-child(3) {{ text-align: left; }}
.scroll {{ max-height: 360px; overflow-y: auto; display: inline-block; }}
</style></head><body>
<h1>{html.escape(title)}</h1><p class="sub">{_html_text(_provenance(run))}</p>
<div class="cards">{cards}</div>
<h2>Notes</h2><ul>{notes}</ul>
<h2>Charts</h2>{charts}
<h2>Busiest brokers after the plan</h2>{worst_brokers(brokers, bound).to_html(index=False, border=0)}
{emptied_html}
<h2>Waves ({len(waves):,})</h2><div class="scroll">{waves.to_html(index=False, border=0)}</div>
<p class="sub">Files: <a href="brokers.csv">brokers.csv</a>, <a href="moves.csv">moves.csv</a>,
<a href="summary.md">summary.md</a></p>
</body></html>
"""
