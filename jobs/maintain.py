"""``maintain``: upkeep of a warehouse's Delta tables, without Spark (delta-rs).

Per table: delete orphan rows (``plans`` / ``moves`` rows of no committed run, at or below their cluster's
latest committed version; see :meth:`Warehouse.orphans`), compact small files (every run appends a few), and
vacuum files no version within the retention needs (a lost commit's staged files included). Time travel to
versions older than the retention stops working for the vacuumed files: that is what the retention means.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from jobs.warehouse import Warehouse, orphan_predicate
from schemas import ALL_TABLES


@dataclass(frozen=True)
class Upkeep:
    """What maintain did to one table."""

    table: str
    files_before: int
    files_after: int
    orphan_rows: int
    compacted_from: int
    compacted_into: int
    vacuumed: int

    def line(self) -> str:
        return (
            f"{self.table:<11} files {self.files_before:,} -> {self.files_after:,}: "
            f"{self.orphan_rows:,} orphan rows deleted, {self.compacted_from:,} files compacted into "
            f"{self.compacted_into:,}, {self.vacuumed:,} unneeded files vacuumed"
        )


def maintain(warehouse: Warehouse, retain: dt.timedelta) -> list[Upkeep]:
    """Upkeep of every table the warehouse has, orphans first (their files then go with the vacuum)."""
    done = []
    for name in ALL_TABLES:
        if not warehouse.exists(name):
            continue
        table = warehouse.table(name)
        before = len(table.file_uris())
        deleted = 0
        if name in ("plans", "moves"):
            orphans = warehouse.orphans(name)
            if orphans:
                deleted = int(table.delete(orphan_predicate(orphans)).get("num_deleted_rows", 0))
        table.update_incremental()
        compacted = table.optimize.compact()
        table.update_incremental()
        vacuumed = table.vacuum(
            retention_hours=int(retain.total_seconds() // 3600),
            dry_run=False,
            enforce_retention_duration=False,
            full=True,  # also files no commit names (staged by a commit that lost a race or crashed)
        )
        table.update_incremental()
        done.append(
            Upkeep(
                name,
                before,
                len(table.file_uris()),
                deleted,
                int(compacted.get("numFilesRemoved", 0)),
                int(compacted.get("numFilesAdded", 0)),
                len(vacuumed),
            )
        )
    return done
