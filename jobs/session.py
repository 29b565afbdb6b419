"""The SparkSession: local defaults for the embedded mode, getOrCreate everywhere."""

from __future__ import annotations

import logging
import os
import sys

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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "ERROR"))
    _enforce(spark)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark


def _enforce(spark: SparkSession) -> None:
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def describe(spark: SparkSession, stage: str) -> None:
    """Name the stage in the Spark UI / history server."""
    spark.sparkContext.setJobDescription(stage)
