"""Typed planning errors.

Every error names what is wrong, the table it comes from and the offending
rows, so that an operator reading ``plan_runs.error`` can fix the input
without opening the code. The cluster id is added by the planner
(:meth:`PlanningError.for_cluster`), since the pure functions below it only
see one cluster's frames.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_LISTED_ROWS = 10


class PlanningError(Exception):
    """Base class: the cluster cannot be planned; nothing is written for it."""

    kind = "planning error"

    def __init__(self, detail: str, *, table: str | None = None, rows: Sequence[str] = ()) -> None:
        self.detail = detail
        self.table = table
        self.rows = list(rows)
        self.cluster_id: str | None = None
        super().__init__(self._format())

    def for_cluster(self, cluster_id: str) -> PlanningError:
        """Return self with the cluster named in the message."""
        self.cluster_id = cluster_id
        self.args = (self._format(),)
        return self

    def _format(self) -> str:
        parts = []
        if self.cluster_id is not None:
            parts.append(f"cluster {self.cluster_id}")
        parts.append(self.kind)
        head = ": ".join(parts) + f": {self.detail}"
        if self.table:
            head += f" (table {self.table})"
        if self.rows:
            listed = "; ".join(self.rows[:MAX_LISTED_ROWS])
            more = len(self.rows) - MAX_LISTED_ROWS
            count = f"{len(self.rows)} offending rows" if len(self.rows) > 1 else "offending row"
            head += f"; {count}: {listed}" + (f"; and {more} more" if more > 0 else "")
        return head


class InvalidInputError(PlanningError):
    """Duplicate partitions, replicas on unknown brokers, negative loads, ..."""

    kind = "invalid input"


class NoActiveBrokersError(PlanningError):
    kind = "no active brokers"


class InsufficientBrokersError(PlanningError):
    """Fewer eligible brokers (or racks, when required) than the replication factor."""

    kind = "not enough eligible brokers"


class CapacityExhaustedError(PlanningError):
    """A hard cap (max_partitions, disk) leaves no room for a replica."""

    kind = "capacity exhausted"


class ConstraintViolationError(PlanningError):
    """The computed plan breaks a constraint; lists every violation."""

    kind = "constraint violation"


class UnknownStrategyError(PlanningError):
    kind = "unknown strategy"
