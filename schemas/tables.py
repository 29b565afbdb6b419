"""Every table partition-planner reads or writes, declared once.

Each table is a :class:`TableSpec`: an ordered list of :class:`Column` with a
type name, whether the contract allows nulls, and a comment. The Spark
``StructType`` and the Arrow schema are both derived from that one list.

Why every physical field is nullable: Delta NOT NULL columns written by one
engine trip up others (DESIGN.md, "the table store"), so the contract's
``nullable=False`` is enforced in code (:func:`non_nullable_columns`) instead
of in the Delta log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import types as T

# type name -> (Spark type, by its name in pyspark.sql.types; Arrow type factory). Spark's types are looked up
# only when a Spark schema is asked for, so the Spark-free read side never imports pyspark.
_TYPES: dict[str, tuple[str, object]] = {
    "string": ("StringType", pa.string),
    "int": ("IntegerType", pa.int32),
    "long": ("LongType", pa.int64),
    "double": ("DoubleType", pa.float64),
    "timestamp": ("TimestampType", lambda: pa.timestamp("us", tz="UTC")),
    "array<int>": ("ArrayType", lambda: pa.list_(pa.int32())),
    "array<string>": ("ArrayType", lambda: pa.list_(pa.string())),
}


def _spark_type(name: str) -> T.DataType:
    from pyspark.sql import types

    if name.startswith("array<"):
        return types.ArrayType(_spark_type(name[6:-1]), True)
    return getattr(types, _TYPES[name][0])()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Column:
    """One column. ``metric``: filled from the planner's ``PlanMetrics`` field of the same name. ``optional``:
    added after tables were first written; a table without it reads it as null."""

    name: str
    type: str
    nullable: bool = True
    comment: str = ""
    metric: bool = False
    optional: bool = False

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"column {self.name}: unknown type {self.type!r}")


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def metric_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.metric]

    @property
    def optional_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.optional]

    @property
    def non_nullable_columns(self) -> list[str]:
        return [c.name for c in self.columns if not c.nullable]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(f"{self.name} has no column {name!r}")

    def spark_schema(self) -> T.StructType:
        """Spark schema of the table (every field nullable, see module docstring)."""
        from pyspark.sql import types

        return types.StructType(
            [
                types.StructField(c.name, _spark_type(c.type), True, {"comment": c.comment} if c.comment else {})
                for c in self.columns
            ]
        )

    def arrow_schema(self) -> pa.Schema:
        """Arrow schema of the table, as written to the Delta log."""
        return pa.schema([pa.field(c.name, _TYPES[c.type][1](), nullable=True) for c in self.columns])  # type: ignore[operator]

    def ddl(self, optional: bool = True) -> str:
        """``name type, ...`` DDL string, handy in SQL and test fixtures (``optional=False``: the columns a writer
        that predates the optional ones has)."""
        return ", ".join(f"`{c.name}` {c.type}" for c in self.columns if optional or not c.optional)


def _cols(*specs: tuple[str, str] | tuple[str, str, bool] | tuple[str, str, bool, str]) -> tuple[Column, ...]:
    return tuple(Column(*spec) for spec in specs)


def _metric(name: str, type_: str, comment: str = "") -> Column:
    """A plan_runs column the planner measures (``assigners.metrics.PlanMetrics`` has a field of that name)."""
    return Column(name, type_, True, comment, metric=True)


NOT_NULL = False


def _optional(name: str, kind: str, comment: str) -> Column:
    """A column a newer release added: nullable, and read as null from tables written before it."""
    return Column(name, kind, comment=comment, optional=True)


BROKERS = TableSpec(
    "brokers",
    (
        *_cols(
            ("cluster_id", "string", NOT_NULL),
            ("snapshot_ts", "timestamp", NOT_NULL, "when the snapshot was taken (UTC)"),
            ("broker_id", "int", NOT_NULL),
            ("rack", "string", True, "failure domain (rack / AZ)"),
            ("state", "string", NOT_NULL, "active | draining | dead"),
            ("cores", "int", True, "CPU cores; capacity weight when weight is null"),
            ("weight", "double", True, "relative capacity (default: cores, else 1.0)"),
            ("disk_capacity_bytes", "long", True, "hard cap on the sum of size_bytes of its replicas"),
            ("max_partitions", "int", True, "hard cap on replicas on this broker"),
        ),
        _optional(
            "tags",
            "string",
            'placement tags "key=value;key=value" (null: none); [constraints.broker_tags] wins per broker',
        ),
        _optional(
            "taints",
            "string",
            'placement taints "key=value;key" (null: none); [constraints.broker_taints] wins per broker',
        ),
    ),
)

PARTITIONS = TableSpec(
    "partitions",
    (
        *_cols(
            ("cluster_id", "string", NOT_NULL),
            ("snapshot_ts", "timestamp", NOT_NULL),
            ("topic", "string", NOT_NULL),
            ("partition", "int", NOT_NULL),
            ("replicas", "array<int>", NOT_NULL, "current replica list, preferred leader first"),
            ("leader", "int", True, "current leader"),
            ("size_bytes", "long", True, "on-disk size of one replica"),
        ),
        _optional(
            "log_dirs",
            "array<string>",
            "log dir of each replica, aligned with replicas (null: unknown); written by import",
        ),
        _optional(
            "adding_replicas",
            "array<int>",
            "mid-reassignment (KIP-455): brokers being added, all among replicas; null when none",
        ),
        _optional(
            "removing_replicas",
            "array<int>",
            "mid-reassignment: brokers being removed, all among replicas; the target is replicas minus these",
        ),
    ),
)

THROUGHPUT = TableSpec(
    "throughput",
    _cols(
        ("cluster_id", "string", NOT_NULL),
        ("snapshot_ts", "timestamp", NOT_NULL, "end of the measurement window"),
        ("topic", "string", NOT_NULL),
        ("partition", "int", NOT_NULL),
        ("bytes_in_per_sec", "double", NOT_NULL, "produce rate"),
        ("bytes_out_per_sec", "double", NOT_NULL, "consume rate (served by the leader)"),
        ("messages_in_per_sec", "double", True),
    ),
)

PLANS = TableSpec(
    "plans",
    _cols(
        ("cluster_id", "string", NOT_NULL),
        ("plan_version", "long", NOT_NULL, "1, 2, 3 ... per cluster; only committed versions count"),
        ("run_id", "string", NOT_NULL, "the run that wrote it"),
        ("snapshot_ts", "timestamp", NOT_NULL, "the snapshot it was planned from"),
        ("strategy", "string", NOT_NULL, "assigner name"),
        ("topic", "string", NOT_NULL),
        ("partition", "int", NOT_NULL),
        ("replicas", "array<int>", NOT_NULL, "target replicas, preferred leader first"),
        ("leader", "int", NOT_NULL, "target (preferred) leader = replicas[0]"),
        ("load", "double", NOT_NULL, "the partition's weight used by the assigner"),
        ("epoch", "long", NOT_NULL, "+1 each version in which replicas or leader change"),
        ("cores", "array<int>", True, "core of each replica, aligned with replicas (assign_cores); else null"),
    ),
    partition_by=("cluster_id",),
)

MOVES = TableSpec(
    "moves",
    _cols(
        ("cluster_id", "string", NOT_NULL),
        ("plan_version", "long", NOT_NULL),
        ("run_id", "string", NOT_NULL),
        ("topic", "string", NOT_NULL),
        ("partition", "int", NOT_NULL),
        ("kind", "string", NOT_NULL, "reassign | leader | new"),
        ("from_replicas", "array<int>", True),
        ("to_replicas", "array<int>", NOT_NULL),
        ("from_leader", "int", True),
        ("to_leader", "int", NOT_NULL),
        ("added_brokers", "array<int>", NOT_NULL),
        ("removed_brokers", "array<int>", NOT_NULL),
        (
            "bytes_to_move",
            "long",
            True,
            "size_bytes x number of added replicas; null: copies a replica of unknown size",
        ),
        ("wave", "int", NOT_NULL, "execution order, 1-based"),
        ("epoch", "long", NOT_NULL, "the partition's new epoch"),
    ),
    partition_by=("cluster_id",),
)

PLAN_RUNS = TableSpec(
    "plan_runs",
    (
        *_cols(
            ("run_id", "string", NOT_NULL),
            ("cluster_id", "string", NOT_NULL),
            ("plan_version", "long", True, "version written (committed), in force (skipped) or attempted (failed)"),
            ("snapshot_ts", "timestamp", True),
            ("strategy", "string", True),
            ("status", "string", NOT_NULL, "committed | failed | skipped"),
            ("error", "string", True, "why it failed, for people; null unless status = failed (see notes)"),
            ("config_hash", "string", True, "hash of the cluster's effective config (strategy, constraints, options)"),
        ),
        _metric("partitions", "long"),
        _metric("replicas", "long"),
        _metric("moves", "long", "replicas added to brokers that did not hold them in the live layout"),
        _metric("leader_moves", "long"),
        _metric("bytes_to_move", "long"),
        _metric("max_load_before", "double"),
        _metric("max_load_after", "double"),
        _metric("load_lower_bound", "double"),
        _metric("replica_spread_before", "int"),
        _metric("replica_spread_after", "int"),
        _metric("rack_violations_before", "int", "in the live layout of the snapshot"),
        _metric("rack_violations_after", "int"),
        Column("started_at", "timestamp"),
        Column("finished_at", "timestamp"),
        _metric("min_moves", "long", "lower bound on moves of any count-balanced plan from the live layout"),
        _metric("leader_spread_before", "int"),
        _metric("leader_spread_after", "int"),
        Column("notes", "string", True, "everything people should know that is not a failure"),
        _metric("balance_score_before", "double", "0-100, Cruise Control style balancedness (docs/contract.md)"),
        _metric("balance_score_after", "double"),
        _metric("affinity_hints_unmet", "int", "affinity hint groups whose leaders could not share a broker"),
        _metric("moves_deferred", "long", "optional moves left out by the move budget (max_moves, max_bytes_to_move)"),
        _metric("partitions_moved", "long", "partitions whose layout changes (the rows of moves, what export writes)"),
        _metric("waves", "int", "execution waves of the moves"),
        _metric("bytes_in_ratio_before", "double", "most loaded broker's bytes in (all replicas) / its lower bound"),
        _metric("bytes_in_ratio_after", "double"),
        _metric("bytes_out_ratio_before", "double", "most loaded broker's bytes out (leaders) / its lower bound"),
        _metric("bytes_out_ratio_after", "double"),
        _metric("disk_ratio_before", "double", "fullest broker's bytes (per disk capacity, else weight) / its bound"),
        _metric("disk_ratio_after", "double"),
        Column(
            "config_json",
            "string",
            True,
            "the cluster's effective config as the plan was made (seed, waves, strategy, constraints, options)",
        ),
    ),
)

# The planner's per-cluster input inside the Spark job: the snapshot's partition
# rows, the throughput rows measured at or before it and the previous plan's
# rows (the plan in force), stacked and tagged by ``source``. One shuffle brings a cluster's three
# sources together; the newest rate and the joins are then picked in pandas
# (jobs.inputs.assemble_partitions), which costs less than Spark's window
# and two sort-merge joins at this size. Never stored.
PLAN_INPUT = TableSpec(
    "plan_input",
    _cols(
        ("cluster_id", "string", NOT_NULL),
        ("source", "string", NOT_NULL, "partition | throughput | previous | previous_move"),
        ("topic", "string", NOT_NULL),
        ("partition", "int", NOT_NULL),
        (
            "replicas",
            "array<int>",
            True,
            "partition: live replicas; previous: the plan in force's replicas; previous_move: its from_replicas",
        ),
        ("leader", "int", True, "partition rows: current leader"),
        ("size_bytes", "long", True, "partition rows"),
        ("measured_ts", "timestamp", True, "throughput rows: end of the measurement window"),
        ("bytes_in", "double", True, "throughput rows"),
        ("bytes_out", "double", True, "throughput rows"),
        ("epoch", "long", True, "previous rows: the plan's epoch"),
        ("cores", "array<int>", True, "previous rows: the plan's core per replica (assign_cores), else empty"),
        ("adding_replicas", "array<int>", True, "partition rows: mid-reassignment, brokers being added; else empty"),
        (
            "removing_replicas",
            "array<int>",
            True,
            "partition rows: mid-reassignment, brokers being removed; else empty",
        ),
    ),
)

# The planner's per-cluster output inside the Spark job: one row per partition
# of the new plan, carrying the plan columns and (when it changed) the move,
# plus one outcome row (topic null) with the cluster's status and metrics.
# Never stored: the job splits it into PLANS, MOVES and PLAN_RUNS, so the
# pandas UDF runs once per cluster.
PLANNED = TableSpec(
    "planned",
    (
        *PLANS.columns,
        Column("kind", "string", True, "move kind, null when the partition does not change"),
        Column("from_replicas", "array<int>"),
        Column("from_leader", "int"),
        Column("added_brokers", "array<int>"),
        Column("removed_brokers", "array<int>"),
        Column("bytes_to_move", "long"),
        Column("wave", "int"),
        Column("summary_json", "string", True, "only on the one outcome row per cluster (topic null): status, metrics"),
    ),
)

INPUT_TABLES: dict[str, TableSpec] = {t.name: t for t in (BROKERS, PARTITIONS, THROUGHPUT)}
OUTPUT_TABLES: dict[str, TableSpec] = {t.name: t for t in (PLANS, MOVES, PLAN_RUNS)}
ALL_TABLES: dict[str, TableSpec] = {**INPUT_TABLES, **OUTPUT_TABLES}
