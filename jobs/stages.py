"""What every job stage shares: the stage log line, and the errors that pick the exit code."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

from jobs.session import describe

log = logging.getLogger(__name__)


class UsageError(ValueError):
    """Bad arguments (unknown cluster, malformed --as-of, a reused run id): exit code 2."""


class NoSnapshotError(LookupError):
    """Nothing to plan: no snapshot at or before ``--as-of`` (exit code 1, the input is not there yet)."""


@contextmanager
def stage(spark: SparkSession, name: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """Log one ``stage=... seconds=...`` line per job stage, with counts the body adds."""
    describe(spark, name)
    start = time.perf_counter()
    info: dict[str, Any] = dict(fields)
    yield info
    info["seconds"] = f"{time.perf_counter() - start:.2f}"
    log.info("stage=%s %s", name, " ".join(f"{k}={v}" for k, v in info.items()))
