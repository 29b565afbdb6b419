"""Pure planning logic: pandas/numpy in, pandas out. No Spark, no I/O, no clock."""

from __future__ import annotations

from assigners.errors import (
    CapacityExhaustedError,
    ConstraintViolationError,
    InsufficientBrokersError,
    InvalidInputError,
    NoActiveBrokersError,
    PlanningError,
    UnknownStrategyError,
)
from assigners.model import Constraints
from assigners.planner import COMMITTED, FAILED, SKIPPED, STRATEGIES, PlanRequest, PlanResult, plan_cluster

__all__ = [
    "COMMITTED",
    "FAILED",
    "SKIPPED",
    "STRATEGIES",
    "CapacityExhaustedError",
    "ConstraintViolationError",
    "Constraints",
    "InsufficientBrokersError",
    "InvalidInputError",
    "NoActiveBrokersError",
    "PlanRequest",
    "PlanResult",
    "PlanningError",
    "UnknownStrategyError",
    "plan_cluster",
]
