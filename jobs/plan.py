"""The plan job: ``spark-submit jobs/plan.py --warehouse DIR ...`` or ``partition-planner plan``.

Thin on purpose (STYLE rule 1): parse arguments, load the config, get the
session and the store, run the pipeline, print the summary, map the outcome
to the exit code (0 committed/skipped, 1 a cluster failed, 2 usage/config).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
from typing import Any

log = logging.getLogger("partition_planner.plan")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--warehouse", help="folder or URI holding the Delta tables (default: the config's)")
    parser.add_argument("--config", help="TOML config (default: conf/local.toml, else built-in defaults)")
    parser.add_argument("--strategy", help="assigner for every cluster, overriding the config")
    parser.add_argument(
        "--cluster",
        action="append",
        dest="clusters",
        metavar="ID",
        help="plan only this cluster (repeatable; default: every cluster)",
    )
    parser.add_argument(
        "--as-of",
        type=parse_timestamp,
        metavar="TS",
        help="plan from the newest snapshot at or before TS (ISO date or time, UTC)",
    )
    parser.add_argument(
        "--run-id",
        help="idempotency key naming one (clusters, snapshots, strategies, config); reusing it for a different "
        "run is an error. Default: derived from all of those",
    )
    parser.add_argument("--dry-run", action="store_true", help="plan, validate and print; write nothing")
    parser.add_argument(
        "--allow-worse",
        action="store_true",
        help="commit a plan that lowers the balance score although nothing forces a change (default: skip it)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def parse_timestamp(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO date or timestamp: {text!r}") from exc
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    logging.Formatter.converter = __import__("time").gmtime  # UTC timestamps in every line
    if level != "DEBUG":
        # PySpark logs every failed query's context (a JSON line with the plan) before raising it;
        # the CLI reports the error itself, once.
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="partition-planner plan", allow_abbrev=False, description="Plan partition replicas for every cluster."
        )
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    return run(args)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from jobs.config import ConfigError, check_strategy, load_config
    from jobs.pipeline import run_plan
    from jobs.session import get_spark
    from jobs.stages import NoSnapshotError, UsageError
    from jobs.store import TableNotFoundError, TableSchemaError, open_store
    from jobs.warehouse import TableUnreadableError

    try:
        config = load_config(args.config)
        if args.allow_worse:
            config = replace(config, allow_worse=True)
        if args.strategy:
            check_strategy(args.strategy, "--strategy", "command line")
        warehouse = args.warehouse or config.warehouse
        if not warehouse:
            raise ConfigError("no warehouse: pass --warehouse or set job.warehouse in the config")
        check_usage(warehouse, config, args)
        spark = get_spark()
        store = open_store(spark, warehouse, config.tables, config.store)
        log.info("config source=%s warehouse=%s store=%s", config.source, warehouse, store.backend)
        report = run_plan(
            spark,
            store,
            config,
            clusters=args.clusters,
            as_of=args.as_of,
            run_id=args.run_id,
            strategy=args.strategy,
            dry_run=args.dry_run,
        )
    except (ConfigError, UsageError, TableNotFoundError) as exc:
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return 2
    except (TableSchemaError, NoSnapshotError, TableUnreadableError) as exc:
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"partition-planner: warning: {warning}", file=sys.stderr)
    for outcome in report.outcomes:
        for warning in outcome.warnings:
            print(
                f"partition-planner: warning: cluster {outcome.cluster_id}: config names {warning}, "
                "which this cluster does not have",
                file=sys.stderr,
            )
    print(f"run {report.run_id} config {report.config_hash}{' (dry run: nothing written)' if report.dry_run else ''}")
    for outcome in report.outcomes:
        print(outcome.summary_line(report.dry_run))
        if outcome.status == "committed" and not outcome.done_by:
            for note in outcome.notes:
                print(f"{'':<16}note: {note}")
    return report.exit_code


def check_usage(warehouse: str, config: Any, args: argparse.Namespace) -> None:
    """The usage errors found before Spark starts (a JVM costs seconds): an empty ``--run-id``, no partitions
    table, a ``--cluster`` the partitions table has no snapshot of (read with delta-rs).

    With ``job.store = "delta-spark"`` delta-rs may have no credentials where Spark's Hadoop settings have
    them, so only the run id is checked here; Spark then names what it cannot read."""
    from jobs.stages import UsageError
    from jobs.store import TableNotFoundError
    from jobs.warehouse import TableUnreadableError, Warehouse

    if args.run_id is not None and not args.run_id.strip():
        raise UsageError("--run-id is empty: give a non-empty id, or drop the flag to derive one")
    if config.store == "delta-spark":
        return
    tables = Warehouse(warehouse, config.tables)
    if not tables.exists("partitions"):
        raise TableNotFoundError(
            f"table partitions: no Delta table at {tables.location('partitions')} (warehouse {warehouse}); "
            "write snapshots first (partition-planner import, or demo)"
        )
    if args.clusters:
        try:
            known = tables.snapshot_clusters()
        except TableUnreadableError:
            return  # the job names an unreadable table itself, with its exit code
        unknown = sorted(set(args.clusters) - known)
        if unknown:
            raise UsageError(
                f"no snapshot in table partitions for cluster(s) {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known)) or 'none'})"
            )


if __name__ == "__main__":
    sys.exit(main())
