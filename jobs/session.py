"""The SparkSession: local defaults for the embedded mode, getOrCreate everywhere."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

LOCAL_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Delta readers expect INT64 microsecond timestamps, not Spark's legacy INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.driver.memory": "4g",
}


def get_spark(app_name: str = "partition-planner", master: str | None = None) -> SparkSession:
    """Return the active session, or start a local one tuned for a laptop or CI.

    Under ``spark-submit`` the session already configured by the submitter is
    reused (``getOrCreate``) and only the settings the job relies on
    (UTC, microsecond parquet timestamps) are enforced.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        _enforce(active)
        return active
    # The Python workers must use this interpreter (the venv), not the PATH's python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    # spark-submit starts the JVM first and hands its gateway port down; its
    # --master and --conf then rule, and the local defaults stay out of the way.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or os.environ.get("SPARK_MASTER", "local[2]"))
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
    with _jvm_output_to_log():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "ERROR"))
    _enforce(spark)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark


JVM_LOG_ENV = "PARTITION_PLANNER_JVM_LOG"


@contextmanager
def _jvm_output_to_log() -> Iterator[None]:
    """Start the JVM with its stderr in a log file, unless the root logger is at DEBUG.

    The JVM inherits file descriptor 2 when PySpark launches it, so Spark's
    start-up banner, log4j warnings and Java stack traces land in the file
    (``$PARTITION_PLANNER_JVM_LOG``, default ``<tmp>/partition-planner-jvm.log``)
    for the whole session, while Python keeps writing to the terminal.
    """
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    path = os.environ.get(JVM_LOG_ENV) or os.path.join(tempfile.gettempdir(), "partition-planner-jvm.log")
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log_file:
            os.dup2(log_file.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _enforce(spark: SparkSession) -> None:
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def describe(spark: SparkSession, stage: str) -> None:
    """Name the stage in the Spark UI / history server."""
    spark.sparkContext.setJobDescription(stage)
