"""The Delta tables without Spark: committed plans, moves and snapshots straight from the Delta log (delta-rs,
pyarrow), for ``export``, ``status`` and ``report``, which start in about a second; and ``import``'s appends
(:meth:`Warehouse.append`), so no command but ``plan``, ``demo`` and ``sql --engine spark`` starts a JVM.

Readers only ever see committed plan versions: a ``plans`` / ``moves`` row counts when a ``plan_runs`` row with
``status = 'committed'`` names its run, cluster and version (DESIGN.md). ``sql`` answers with DataFusion through
delta-rs (``jobs.sql``), or Spark SQL (``jobs.queries``) with ``--engine spark``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from deltalake import DeltaTable

from schemas import TableSpec

log = logging.getLogger(__name__)
COMMIT_KEYS = ["cluster_id", "plan_version", "run_id"]


class TableUnreadableError(Exception):
    """A table is missing or its Delta log cannot be read; the message names the table and where it lives."""


def first_line(exc: Exception) -> str:
    """An error in one line: delta-rs appends a Rust backtrace, or the chain of causes (``↳ ...``) whose last
    link says why (a missing credential, say); that one is kept beside the first."""
    lines = [re.sub(r"\x1b\[[0-9;]*m|↳", "", line).strip() for line in str(exc).strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return type(exc).__name__
    cause = lines[-1] if len(lines) > 1 and "↳" in str(exc) else ""
    return f"{lines[0]} ({cause.rstrip('.')})" if cause else lines[0]


def table_location(warehouse: str, locations: Mapping[str, str], name: str) -> str:
    """Where table ``name`` lives: its ``[tables]`` entry, else ``<warehouse>/<name>`` (local paths made absolute)."""
    path = locations.get(name) or posixpath.join(warehouse, name)
    return path if "://" in path else os.path.abspath(path)


@dataclass
class Warehouse:
    """The tables of one warehouse, read at their latest versions (each table opened once)."""

    root: str
    locations: Mapping[str, str] = field(default_factory=dict)
    _tables: dict[str, DeltaTable] = field(default_factory=dict, init=False, repr=False)

    def location(self, name: str) -> str:
        return table_location(self.root, self.locations, name)

    def exists(self, name: str) -> bool:
        try:
            return DeltaTable.is_deltatable(self.location(name))
        except Exception as exc:  # an object store that cannot be reached: credentials, network, scheme
            raise TableUnreadableError(
                f"table {name} at {self.location(name)} cannot be reached: {first_line(exc)}"
            ) from exc

    def table(self, name: str) -> DeltaTable:
        if name not in self._tables:
            try:
                self._tables[name] = DeltaTable(self.location(name))
            except Exception as exc:  # delta-rs raises several types (TableNotFound, DeltaError, OSError)
                raise TableUnreadableError(
                    f"table {name} at {self.location(name)} cannot be read: {first_line(exc)}"
                ) from exc
        return self._tables[name]

    def frame(self, name: str, cluster_id: str | None = None, columns: list[str] | None = None) -> pd.DataFrame:
        """Rows of ``name`` (of one cluster), as pandas; timestamps stay UTC-aware."""
        where = ds.field("cluster_id") == cluster_id if cluster_id is not None else None
        return self.scan(name, columns, where).to_pandas()

    def scan(self, name: str, columns: list[str] | None = None, where: ds.Expression | None = None) -> pa.Table:
        """The table's rows (these columns, where ``where`` holds) as Arrow.

        Read through Arrow's own filesystem of the table's location, not delta-rs's default (a Python file
        handler that Arrow's I/O threads call into): with that one, about one process in six aborted at exit
        ("terminate called without an active exception") after printing its answer."""
        table = self.table(name)
        try:
            filesystem, root = pafs.FileSystem.from_uri(table.table_uri)
            dataset = table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(root, filesystem))
            return dataset.to_table(columns=columns, filter=where)
        except Exception as exc:  # a data file the log names is gone or unreadable
            raise TableUnreadableError(
                f"table {name} at {self.location(name)} cannot be read: {first_line(exc)}"
            ) from exc

    def txn_version(self, name: str, app_id: str) -> int | None:
        """The version the table's log records for an app transaction (None: never, or no table)."""
        if not self.exists(name):
            return None
        return self.table(name).transaction_version(app_id)

    def append(self, spec: TableSpec, frame: pd.DataFrame, app_id: str, metadata: Mapping[str, str]) -> bool:
        """Append ``frame`` (the spec's columns) to table ``spec.name`` in one Delta commit that records app
        transaction ``app_id`` at version 1; False, writing nothing, when the log records it already (a retried
        append). Creates the table with the contract's schema; a table from before a release that added columns
        gains them first (one schema commit)."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        location = self.location(spec.name)
        if (self.txn_version(spec.name, app_id) or 0) >= 1:
            return False
        if self.exists(spec.name):
            add_new_columns(location, spec.arrow_schema())
        rows = pa.Table.from_pandas(frame[spec.column_names], schema=spec.arrow_schema(), preserve_index=False)
        write_deltalake(
            location,
            rows,
            mode="append",
            partition_by=list(spec.partition_by) or None,
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id, 1)],
                custom_metadata={"userMetadata": json.dumps(dict(metadata), sort_keys=True)},
            ),
        )
        self._tables.pop(spec.name, None)  # read it anew next time
        return True

    def snapshot_clusters(self) -> set[str]:
        """The clusters table ``partitions`` holds snapshots of, read from one column (no Spark)."""
        import pyarrow.compute as pc

        return set(pc.unique(self.scan("partitions", ["cluster_id"])["cluster_id"]).to_pylist())

    def committed_runs(self, cluster_id: str | None = None) -> pd.DataFrame:
        """The ``plan_runs`` rows of committed versions, oldest first."""
        runs = self.frame("plan_runs", cluster_id)
        runs = runs[runs["status"] == "committed"]
        return runs.sort_values(["cluster_id", "plan_version"], kind="stable").reset_index(drop=True)

    def clusters(self) -> list[str]:
        return sorted(set(self.committed_runs()["cluster_id"]))

    def run(self, cluster_id: str, plan_version: int | None = None) -> pd.Series:
        """The committed ``plan_runs`` row of a version (default: the latest); LookupError names what exists."""
        runs = self.committed_runs(cluster_id)
        if runs.empty:
            raise LookupError(f"cluster {cluster_id} has no committed plan")
        latest = int(runs["plan_version"].max())
        if plan_version is None:
            plan_version = latest
        chosen = runs[runs["plan_version"] == plan_version]
        if chosen.empty:
            raise LookupError(f"cluster {cluster_id} has no committed plan version {plan_version} (latest: {latest})")
        return chosen.iloc[-1]

    def committed(self, name: str, run: pd.Series) -> pd.DataFrame:
        """Rows of ``plans`` or ``moves`` written by a committed run (a crashed attempt's rows are left out)."""
        rows = self.frame(name, run["cluster_id"])
        keep = (rows["plan_version"] == run["plan_version"]) & (rows["run_id"] == run["run_id"])
        return rows[keep].sort_values(["topic", "partition"], kind="stable").reset_index(drop=True)

    def newest_snapshot(self, cluster_id: str) -> tuple[dt.datetime | None, pd.DataFrame]:
        """The cluster's newest ``partitions`` snapshot: its time and rows (None and no rows when it has none)."""
        rows = self.frame("partitions", cluster_id)
        if rows.empty:
            return None, rows
        newest = rows["snapshot_ts"].max()
        return newest.to_pydatetime(), rows[rows["snapshot_ts"] == newest].reset_index(drop=True)

    def orphans(self, name: str, clusters: list[str] | None = None) -> list[tuple[str, int, str]]:
        """(cluster, version, run) of ``plans`` / ``moves`` rows that belong to no committed run, at or below
        their cluster's latest committed version: no run can commit those versions any more (the commit
        marker refuses a version committed meanwhile), so the rows are dead. Rows above it may belong to a
        run committing right now and are left alone."""
        if not self.exists(name) or not self.exists("plan_runs"):
            return []
        runs = self.committed_runs()
        markers = set(zip(runs["cluster_id"], runs["plan_version"].astype(int), runs["run_id"]))
        latest = runs.groupby("cluster_id")["plan_version"].max().astype(int).to_dict()
        wanted = [c for c in latest if clusters is None or c in clusters]
        if not wanted:
            return []
        rows = self.scan(name, ["cluster_id", "plan_version", "run_id"], ds.field("cluster_id").isin(wanted))
        present = rows.group_by(["cluster_id", "plan_version", "run_id"]).aggregate([]).to_pylist()
        return sorted(
            (r["cluster_id"], int(r["plan_version"]), r["run_id"])
            for r in present
            if int(r["plan_version"]) <= latest[r["cluster_id"]]
            and (r["cluster_id"], int(r["plan_version"]), r["run_id"]) not in markers
        )

    def snapshot(self, name: str, cluster_id: str, snapshot_ts: Any) -> pd.DataFrame:
        """Rows of an input table at one snapshot time (``throughput``: the rows measured at or before it)."""
        rows = self.frame(name, cluster_id)
        if name == "throughput":
            return rows[rows["snapshot_ts"] <= snapshot_ts].reset_index(drop=True)
        return rows[rows["snapshot_ts"] == snapshot_ts].reset_index(drop=True)


def add_new_columns(uri: str, arrow_schema: pa.Schema) -> bool:
    """Columns a newer release added to a table join its log schema (one extra commit, once)."""
    from deltalake import Schema

    table = DeltaTable(uri)
    have = set(pa.schema(table.schema().to_arrow()).names)
    new = [f for f in arrow_schema if f.name not in have]
    if new:
        table.alter.add_columns(list(Schema.from_arrow(pa.schema(new)).fields))
        log.info("schema table=%s added columns %s", uri, [f.name for f in new])
    return bool(new)


def orphan_predicate(orphans: list[tuple[str, int, str]]) -> str:
    """A SQL predicate naming exactly these (cluster, version, run) rows, quotes doubled.

    >>> for term in orphan_predicate([("c1", 2, "run-a"), ("o'k", 1, "r")]).split(" OR "):
    ...     print(term)
    (cluster_id = 'c1' AND plan_version = 2 AND run_id = 'run-a')
    (cluster_id = 'o''k' AND plan_version = 1 AND run_id = 'r')
    """

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    return " OR ".join(
        f"(cluster_id = {quoted(c)} AND plan_version = {v} AND run_id = {quoted(r)})" for c, v, r in sorted(orphans)
    )
