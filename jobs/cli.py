"""``partition-planner``: one console script, one subcommand per job.

demo | plan | import | export | status | report | sql | maintain. Exit codes: 0 success (including a
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
    parser = _command_parser(
        "export",
        "Write Kafka's reassignment JSON for one plan version: all of it, one wave (--wave), or per wave "
        "with rollback.json and runbook.md (--out-dir). Partitions already at their target in the cluster's newest "
        "snapshot are left out; one that is at neither its baseline nor its target stops the export (exit 1).",
    )
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--plan-version", type=positive(int), help="default: the latest committed")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--wave", type=positive(int), help="only the moves of this wave")
    target.add_argument("--out-dir", help="folder for wave-NNN.json, rollback.json and runbook.md")
    parser.add_argument("--out", help="file to write (default: stdout); not with --out-dir")
    parser.add_argument(
        "--throttle-bytes",
        type=positive(int),
        help="replication throttle, bytes/s per broker, > 0 (default: config)",
    )
    parser.add_argument(
        "--max-hours", type=positive(float), help="also suggest the throttle that finishes within this (> 0)"
    )
    parser.add_argument("--allow-drift", action="store_true", help="leave drifted partitions out instead of failing")
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    if args.out_dir and args.out:
        parser.error("--out writes one file; --out-dir writes the wave files")
    if args.out_dir and os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        parser.error(f"--out-dir {args.out_dir} is a file; give a folder (created if missing)")
    if args.out and os.path.isdir(args.out):
        parser.error(f"--out {args.out} is a folder; give a file name (or --out-dir for the wave files)")
    opened = _warehouse(args, needs=("plan_runs", "moves", "partitions"))
    if opened is None:
        return USAGE_ERROR
    warehouse, config = opened
    from jobs.execution import (
        DRIFTED,
        DriftError,
        baseline_log_dirs,
        export_dir,
        export_summary,
        judge,
        wave_payload,
        write_json,
    )
    from jobs.warehouse import TableUnreadableError

    try:
        judged = judge(warehouse, args.cluster, args.plan_version)
        if args.out_dir:
            throttle = args.throttle_bytes or config.execution.throttle_bytes_per_sec
            dirs = baseline_log_dirs(warehouse, judged.run)
            written = export_dir(judged, args.out_dir, throttle, args.max_hours, args.warehouse, args.allow_drift, dirs)
            print(export_summary(written, args.out_dir))
            return 0
        if len(judged.of(DRIFTED)) and not args.allow_drift:
            raise DriftError(judged.drift_message())
        payload = wave_payload(judged, args.wave)
    except LookupError as exc:
        return _error(exc, USAGE_ERROR)
    except DriftError as exc:
        return _error(f"{exc}; nothing written (--allow-drift leaves them out)", 1)
    except TableUnreadableError as exc:
        return _error(exc, 1)
    write_json(payload, args.out)
    if args.out:
        n = len(payload["partitions"])
        print(f"wrote {n:,} partition{'s' if n != 1 else ''} to {args.out}", file=sys.stderr)
    return 0


def _status(argv: list[str]) -> int:
    parser = _command_parser(
        "status",
        "Per wave of a plan, partitions done / moving / pending / drifted judged by the cluster's "
        "newest snapshot, and the bytes still to move. Exit 0 when done or pending, 1 when anything drifted.",
    )
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--plan-version", type=positive(int), help="default: the latest committed")
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    opened = _warehouse(args, needs=("plan_runs", "moves", "partitions"))
    if opened is None:
        return USAGE_ERROR
    from jobs.execution import DONE, DRIFTED, MOVING, PENDING, judge, known_total, status_lines
    from jobs.units import human_bytes
    from jobs.warehouse import TableUnreadableError

    try:
        judged = judge(opened[0], args.cluster, args.plan_version)
    except LookupError as exc:
        return _error(exc, USAGE_ERROR)
    except TableUnreadableError as exc:
        return _error(exc, 1)
    print("\n".join(status_lines(judged)))
    left = judged.of(PENDING, MOVING)
    if len(judged.of(DRIFTED)):
        print(judged.drift_message())
        return 1
    if left.empty:
        done = len(judged.of(DONE))
        if done == 1:
            print("done: the 1 partition is at its target")
        else:
            print(f"done: all {done:,} partitions are at their target")
    else:
        size = known_total(left["bytes_to_move"])
        amount = "size unknown" if size is None else f"{human_bytes(size)} still to move"
        print(f"pending: {len(left):,} partition{'s' if len(left) != 1 else ''}, {amount}")
    return 0


def _maintain(argv: list[str]) -> int:
    parser = _command_parser(
        "maintain",
        "Upkeep of the warehouse's Delta tables: delete orphan plan rows, compact small files, "
        "vacuum files older than the retention; prints what it did per table.",
    )
    parser.add_argument("--retain", default="7d", help='keep files any version of this age needs (default "7d")')
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    from jobs.config import ConfigError, parse_duration

    try:
        retain = parse_duration(args.retain, "--retain")
    except ConfigError as exc:
        return _error(exc, USAGE_ERROR)
    opened = _warehouse(args, needs=())
    if opened is None:
        return USAGE_ERROR
    from jobs.maintain import maintain

    done = maintain(opened[0], retain)
    if not done:
        return _error(f"no Delta table in warehouse {args.warehouse}", USAGE_ERROR)
    print("\n".join(u.line() for u in done))
    return 0


def positive(kind: type) -> Any:
    """An argparse type: a number of ``kind`` above zero (a throttle of 0 or -5 B/s, 0 hours, wave 0 mean
    nothing), refused at parse time with exit 2."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'a whole number' if kind is int else 'a number'} > 0, found {text!r}"
            ) from None
        if not 0 < value < float("inf"):  # also NaN, which compares false
            raise argparse.ArgumentTypeError(f"expected a number > 0, found {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _command_parser(name: str, description: str) -> argparse.ArgumentParser:
    """A subcommand's parser with the option every one of them takes (``--config`` stays per command: its
    position in ``--help`` follows the command's own options)."""
    parser = argparse.ArgumentParser(prog=f"partition-planner {name}", allow_abbrev=False, description=description)
    parser.add_argument("--warehouse", required=True)
    return parser


def _error(message: object, code: int) -> int:
    print(f"partition-planner: error: {message}", file=sys.stderr)
    return code


def _warehouse(args: argparse.Namespace, needs: tuple[str, ...]) -> Any:
    """The Spark-free reader of ``--warehouse`` and the config, or None (after saying why) when it or a needed
    table is missing."""
    from jobs.config import ConfigError, load_config
    from jobs.warehouse import Warehouse

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        _error(exc, USAGE_ERROR)
        return None
    if "://" not in args.warehouse and not os.path.isdir(args.warehouse):
        _error(f"no warehouse at {os.path.abspath(args.warehouse)}", USAGE_ERROR)
        return None
    warehouse = Warehouse(args.warehouse, config.tables)
    missing = [n for n in needs if not warehouse.exists(n)]
    if missing:
        where = ", ".join(f"{n} at {warehouse.location(n)}" for n in missing)
        _error(f"no Delta table {where} (warehouse {args.warehouse})", USAGE_ERROR)
        return None
    return warehouse, config


def _report(argv: list[str]) -> int:
    parser = _command_parser(
        "report",
        "Write per-cluster plan reports: index.html with charts, summary.md, brokers.csv, moves.csv.",
    )
    parser.add_argument("--cluster")
    parser.add_argument("--plan-version", type=positive(int))
    parser.add_argument("--out", required=True, help="folder for the reports")
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"--out {args.out} is a file; give a folder (created if missing)")
    opened = _warehouse(args, needs=("plan_runs", "plans", "moves", "partitions", "brokers"))
    if opened is None:
        return USAGE_ERROR
    from jobs.report import write_report
    from jobs.warehouse import TableUnreadableError

    try:
        folders = write_report(opened[0], args.out, args.cluster, args.plan_version, opened[1])
    except LookupError as exc:
        return _error(exc, USAGE_ERROR)
    except TableUnreadableError as exc:
        return _error(exc, 1)
    for folder in folders:
        print(folder)
    return 0


def _sql(argv: list[str]) -> int:
    parser = _command_parser(
        "sql",
        "Run SQL over the tables (plans/moves: committed rows only; plans_raw, moves_raw, plans_latest also "
        "defined), answered by DataFusion from the Delta logs (no JVM) or, with --engine spark, by Spark SQL. "
        "Without a query: an interactive prompt.",
    )
    parser.add_argument("--limit", type=positive(int), default=100, help="rows to print (> 0)")
    parser.add_argument(
        "--engine", choices=("datafusion", "spark"), default="datafusion", help="default: datafusion (no JVM)"
    )
    parser.add_argument(
        "--as-of-version",
        action="append",
        default=[],
        metavar="TABLE=N",
        help="read TABLE at Delta version N (repeatable; datafusion engine)",
    )
    parser.add_argument("--as-of", metavar="TIME", help="read every table as it was at TIME (ISO 8601, UTC default)")
    parser.add_argument("--config")
    parser.add_argument("query", nargs="?", help="one SQL statement; omit it for a prompt (end statements with ;)")
    args = parser.parse_args(argv)
    if args.engine == "spark":
        if args.as_of_version or args.as_of:
            parser.error("--as-of and --as-of-version read old table versions with --engine datafusion only")
        return _spark_sql(args)
    from jobs.sql import AsOf, QueryError, open_views, query, show
    from jobs.warehouse import TableUnreadableError

    try:
        as_of = AsOf.parse(args.as_of_version, args.as_of)
    except ValueError as exc:
        parser.error(str(exc))
    opened = _sql_warehouse(args)
    if opened is None:
        return USAGE_ERROR
    warehouse, tables = opened
    try:
        views = open_views(warehouse, tables, as_of)
    except TableUnreadableError as exc:
        return _error(exc, USAGE_ERROR if args.as_of_version or args.as_of else 1)
    if views.not_yet and _not_yet(args, views.not_yet):
        return USAGE_ERROR

    def run(statement: str) -> int:
        try:
            print(show(*query(views.builder, statement, args.limit)))
        except QueryError as exc:
            return _error(exc, USAGE_ERROR)
        return 0

    return run(args.query) if args.query is not None else _prompt(views.names, run)


def _sql_warehouse(args: argparse.Namespace) -> Any:
    """The Spark-free reader for ``sql`` and the tables it holds, or None (after saying why) when it holds none
    or the query names a view whose table it lacks."""
    from jobs.sql import TABLES, missing_tables

    opened = _warehouse(args, needs=())
    if opened is None:
        return None
    warehouse, _ = opened
    present = {n for n in TABLES if warehouse.exists(n)}
    if not present:
        where = ", ".join(f"{n} at {warehouse.location(n)}" for n in TABLES)
        _error(f"no Delta table {where} (warehouse {args.warehouse})", USAGE_ERROR)
        return None
    if _lacking(args, missing_tables(args.query or "", present), warehouse.location):
        return None
    return warehouse, present


def _not_yet(args: argparse.Namespace, not_yet: dict[str, Any]) -> bool:
    """Say which tables the query needs that did not exist yet at ``--as-of`` (True), or nothing (False)."""
    from jobs.sql import TABLES, missing_tables

    present = set(TABLES) - set(not_yet)
    lacking = missing_tables(args.query or "", present)
    named = {t: v for t, v in lacking.items() if t in not_yet}
    if not named:
        return False
    where = "; ".join(
        f"{t} (view {', '.join(v)}): its first version is of {not_yet[t].isoformat(timespec='seconds')}"
        for t, v in named.items()
    )
    _error(f"the query reads tables that did not exist yet at {args.as_of}: {where}", USAGE_ERROR)
    return True


def _lacking(args: argparse.Namespace, lacking: dict[str, list[str]], location: Any) -> bool:
    """Say which tables the query needs that the warehouse lacks (True), or nothing (False)."""
    if not lacking:
        return False
    where = "; ".join(f"{t} at {location(t)} (view {', '.join(v)})" for t, v in lacking.items())
    _error(
        f"the query reads tables the warehouse {args.warehouse} lacks: no Delta table {where}"
        + ("; run plan first" if set(lacking) & {"plans", "moves", "plan_runs"} else ""),
        USAGE_ERROR,
    )
    return True


def _spark_sql(args: argparse.Namespace) -> int:
    store = _store(args, needs=(), query=args.query)
    if store is None:
        return USAGE_ERROR
    from jobs.queries import register_views

    views = register_views(store.spark, store)

    def run(statement: str) -> int:
        return _run_sql(store.spark, statement, args.limit)

    return run(args.query) if args.query is not None else _prompt(views, run)


def _prompt(views: list[str], run: Any) -> int:
    """The interactive prompt: each statement typed is run (a bad one says why and the prompt goes on)."""
    print(f"partition-planner sql: views {', '.join(views)}; end a statement with ';', quit with \\q or Ctrl-D")
    for statement in _statements(sys.stdin):
        run(statement)
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


def _store(args: argparse.Namespace, needs: tuple[str, ...], query: str | None = None) -> Any:
    """The table store of ``--warehouse``, or None (after saying why) when it or a needed table is missing, or
    when ``query`` names a view whose table is missing.

    Checked before Spark starts, so a wrong path costs nothing.
    """
    from deltalake import DeltaTable

    from jobs.config import TABLE_NAMES, ConfigError, load_config
    from jobs.plan import setup_logging
    from jobs.session import get_spark
    from jobs.store import open_store
    from jobs.warehouse import table_location

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
    from jobs.sql import missing_tables

    if _lacking(args, missing_tables(query or "", set(present)), locations.get):
        return None
    return open_store(get_spark(), args.warehouse, config.tables, config.store)


COMMANDS = {"export": _export, "status": _status, "report": _report, "sql": _sql, "maintain": _maintain}


CLOSED_STDOUT = 141  # as a command killed by SIGPIPE: `partition-planner export ... | head`


def main(argv: list[str] | None = None) -> int:
    """Run one command; whatever it fails on reaches the terminal as one line (exit 1), a reader that closed
    stdout early ends it quietly."""
    from jobs.warehouse import TableUnreadableError

    try:
        return _dispatch(argv)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
        return CLOSED_STDOUT
    except TableUnreadableError as exc:
        return _error(exc, 1)
    except OSError as exc:  # a folder where a file should be, a read-only path, a full disk
        where = f": {exc.filename}" if exc.filename else ""
        return _error(f"{exc.strerror or exc}{where}", 1)


def _dispatch(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = ["demo", "plan", "import", *COMMANDS]
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
    if command == "import":
        from jobs import importer

        return importer.main(rest)
    if command in COMMANDS:
        return COMMANDS[command](rest)
    print(f"partition-planner: unknown command {command!r}; expected one of {', '.join(names)}", file=sys.stderr)
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
