"""``partition-planner``: one console script, one subcommand per job.

demo | plan | export | report | sql. Exit codes: 0 success (including a
no-op rerun), 1 a cluster failed or a table is unusable, 2 usage or config.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

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
    store = _store(args, needs=("plan_runs", "moves"))
    if store is None:
        return USAGE_ERROR
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
    store = _store(args, needs=("plan_runs", "plans"))
    if store is None:
        return USAGE_ERROR
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
        "plans_raw, moves_raw, plans_latest also defined). Without a query: an interactive prompt.",
    )
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--limit", type=int, default=100, help="rows to print")
    parser.add_argument("--config")
    parser.add_argument("query", nargs="?", help="one SQL statement; omit it for a prompt (end statements with ;)")
    args = parser.parse_args(argv)
    store = _store(args, needs=())
    if store is None:
        return USAGE_ERROR
    from jobs.queries import register_views

    views = register_views(store.spark, store)
    if args.query is not None:
        return _run_sql(store.spark, args.query, args.limit)
    print(f"partition-planner sql: views {', '.join(views)}; end a statement with ';', quit with \\q or Ctrl-D")
    for statement in _statements(sys.stdin):
        _run_sql(store.spark, statement, args.limit)
    return 0


def _statements(lines: Iterator[str]) -> Iterator[str]:
    """SQL statements typed at the prompt: text up to each ';' (\\q or end of input stops)."""
    buffer: list[str] = []
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            print("sql> " if not buffer else "...> ", end="", flush=True)
        line = next(lines, None)
        if line is None or line.strip() in ("\\q", "quit", "exit"):
            break
        buffer.append(line)
        text = "".join(buffer)
        if text.rstrip().endswith(";"):
            buffer = []
            if text.strip(" ;\n"):
                yield text.rstrip().rstrip(";")
    if "".join(buffer).strip():
        yield "".join(buffer)


def _run_sql(spark: Any, query: str, limit: int) -> int:
    try:
        spark.sql(query).show(limit, truncate=False)
    except Exception as exc:  # noqa: BLE001 - Spark's analysis errors come through py4j
        print(f"partition-planner: error: {_first_lines(str(exc))}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _first_lines(message: str) -> str:
    """A Spark error's message without the logical plan or JVM stack trace it carries (the SQL pointer stays)."""
    lines = message.strip().splitlines()
    head = lines[:1]
    if "== SQL ==" in lines:
        start = lines.index("== SQL ==")
        head += lines[start : start + 3]
    return "\n".join(head)


def _store(args: argparse.Namespace, needs: tuple[str, ...]) -> Any:
    """The table store of ``--warehouse``, or None (after saying why) when it or a needed table is missing.

    Checked before Spark starts, so a wrong path costs nothing.
    """
    from deltalake import DeltaTable

    from jobs.config import TABLE_NAMES, ConfigError, load_config
    from jobs.plan import setup_logging
    from jobs.session import get_spark
    from jobs.store import open_store, table_location

    setup_logging("WARNING")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"partition-planner: error: {exc}", file=sys.stderr)
        return None
    local = "://" not in args.warehouse
    if local and not os.path.isdir(args.warehouse):
        print(f"partition-planner: error: no warehouse at {os.path.abspath(args.warehouse)}", file=sys.stderr)
        return None
    names = needs or tuple(TABLE_NAMES)
    locations = {n: table_location(args.warehouse, config.tables, n) for n in names}
    present = [n for n, path in locations.items() if DeltaTable.is_deltatable(path)]
    missing = [n for n in names if n not in present] if needs else ([] if present else list(names))
    if missing:
        where = ", ".join(f"{n} at {locations[n]}" for n in missing)
        print(f"partition-planner: error: no Delta table {where} (warehouse {args.warehouse})", file=sys.stderr)
        return None
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
