"""Table schemas of partition-planner, each declared once (see tables.py)."""

from __future__ import annotations

from schemas.tables import (
    ALL_TABLES,
    BROKERS,
    INPUT_TABLES,
    MOVES,
    OUTPUT_TABLES,
    PARTITIONS,
    PLAN_INPUT,
    PLAN_RUNS,
    PLANNED,
    PLANS,
    THROUGHPUT,
    Column,
    TableSpec,
)

__all__ = [
    "ALL_TABLES",
    "BROKERS",
    "INPUT_TABLES",
    "MOVES",
    "OUTPUT_TABLES",
    "PARTITIONS",
    "PLANNED",
    "PLANS",
    "PLAN_INPUT",
    "PLAN_RUNS",
    "THROUGHPUT",
    "Column",
    "TableSpec",
]
