"""``partition-planner``: one console script, one subcommand per job.

demo | plan | export | report | sql. Exit codes: 0 success (including a
no-op rerun), 1 a cluster failed or a table is unusable, 2 usage or config.
"""

from __future__ import annotations

import argparse
import sys

USAGE_ERROR = 2


def _export(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="partition-planner export",
        allow_abbrev=False,
        description="Write Kafka's reassignment JSON for one plan version.",
    )
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--plan-version", type=int, help="default: the latest committed")
    parser.add_argument("--wave", type=int, help="only the moves of this wave")
    parser.add_argument("--out", help="file to write (default: stdout)")
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    store = _store(args)
    from jobs.queries import reassignment_json, write_json

    try:
        payload = reassignment_json(store, args.cluster, args.plan_version, args.wave)
    except LookupError as exc:
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    write_json(payload, args.out)
    if args.out:
        print(f"wrote {len(payload['partitions'])} partitions to {args.out}", file=sys.stderr)
    return 0


def _report(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="partition-planner report",
        allow_abbrev=False,
        description="Write per-cluster plan reports (markdown + CSV).",
    )
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--cluster")
    parser.add_argument("--plan-version", type=int)
    parser.add_argument("--out", required=True, help="folder for the reports")
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    store = _store(args)
    from jobs.config import load_config
    from jobs.queries import write_report

    try:
        folders = write_report(store, args.out, args.cluster, args.plan_version, load_config(args.config))
    except LookupError as exc:
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    for folder in folders:
        print(folder)
    return 0


def _sql(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="partition-planner sql",
        allow_abbrev=False,
        description="Run Spark SQL over the tables (plans/moves: committed rows only; "
        "plans_raw, moves_raw, plans_latest also defined).",
    )
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--limit", type=int, default=100, help="rows to print")
    parser.add_argument("--config")
    parser.add_argument("query")
    args = parser.parse_args(argv)
    store = _store(args)
    from jobs.queries import register_views

    register_views(store.spark, store)
    try:
        store.spark.sql(args.query).show(args.limit, truncate=False)
    except Exception as exc:  # noqa: BLE001 - Spark's analysis errors come through py4j
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from jobs.config import load_config
    from jobs.plan import setup_logging
    from jobs.session import get_spark
    from jobs.store import open_store

    setup_logging("WARNING")
    config = load_config(args.config)
    return open_store(get_spark(), args.warehouse, config.tables, config.store)


COMMANDS = {"export": _export, "report": _report, "sql": _sql}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = ["demo", "plan", *COMMANDS]
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: partition-planner {{{','.join(names)}}} ...\n\n{__doc__}")
        return 0 if argv else USAGE_ERROR
    command, rest = argv[0], argv[1:]
    if command == "demo":
        from jobs import demo

        return demo.main(rest)
    if command == "plan":
        from jobs import plan

        return plan.main(rest)
    if command in COMMANDS:
        return COMMANDS[command](rest)
    print(f"partition-planner: unknown command {command!r}; expected one of {', '.join(names)}", file=sys.stderr)
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
