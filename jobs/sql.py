"""``sql`` without a JVM: the same views as :mod:`jobs.queries`, answered by DataFusion through delta-rs.

delta-rs ships Apache DataFusion as its ``QueryBuilder`` (no dependency
beyond ``deltalake``): each table is registered straight from its Delta log,
at its latest version or at one asked for (time travel), and the views are
SQL over them. Readers only ever see committed plan versions: ``plans`` and
``moves`` keep a row when a ``plan_runs`` row with ``status = 'committed'``
names its run, cluster and version (DESIGN.md); ``plans_raw`` and
``moves_raw`` are the tables as stored. A query answers in well under a
second, where starting Spark for it took 17-38 s (issue 40). ``--engine
spark`` keeps Spark SQL (:mod:`jobs.queries`) for its dialect.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from jobs.warehouse import TableUnreadableError, Warehouse

# Each view and the tables it reads.
VIEW_TABLES = {
    "brokers": ("brokers",),
    "partitions": ("partitions",),
    "throughput": ("throughput",),
    "plan_runs": ("plan_runs",),
    "plans": ("plans", "plan_runs"),
    "moves": ("moves", "plan_runs"),
    "plans_raw": ("plans",),
    "moves_raw": ("moves",),
    "plans_latest": ("plans", "plan_runs"),
}
TABLES = ("brokers", "partitions", "throughput", "plan_runs", "plans", "moves")
# the tables as registered: plans and moves as stored are the _raw views
REGISTERED = {"plans": "plans_raw", "moves": "moves_raw"}
COMMITTED = (
    "SELECT t.* FROM {raw} t LEFT SEMI JOIN (SELECT cluster_id, plan_version, run_id FROM plan_runs "
    "WHERE status = 'committed') c ON t.cluster_id = c.cluster_id AND t.plan_version = c.plan_version "
    "AND t.run_id = c.run_id"
)
LATEST = (
    "SELECT p.* FROM plans p JOIN (SELECT cluster_id, max(plan_version) AS plan_version FROM plans "
    "GROUP BY cluster_id) l USING (cluster_id, plan_version)"
)


class QueryError(Exception):
    """A statement DataFusion refused or could not run; the message is one line."""


def missing_tables(query: str, present: set[str]) -> dict[str, list[str]]:
    """Views a query names whose tables are not in the warehouse: table -> the views that need it.

    >>> missing_tables("SELECT * FROM plans_latest JOIN brokers USING (cluster_id)", {"brokers", "plans"})
    {'plan_runs': ['plans_latest']}
    """
    named = [v for v in VIEW_TABLES if re.search(rf"(?<![\w.`]){v}(?![\w`])", query, flags=re.IGNORECASE)]
    out: dict[str, list[str]] = {}
    for view in named:
        for table in VIEW_TABLES[view]:
            if table not in present:
                out.setdefault(table, []).append(view)
    return out


@dataclass(frozen=True)
class AsOf:
    """Which version of each table a query reads: ``versions`` per table (Delta's ``VERSION AS OF``), else
    the version current at ``time`` (``TIMESTAMP AS OF``), else the latest."""

    versions: Mapping[str, int] = field(default_factory=dict)
    time: dt.datetime | None = None

    @classmethod
    def parse(cls, versions: list[str], time: str | None) -> AsOf:
        """From ``--as-of-version TABLE=N`` (repeatable) and ``--as-of TIME`` (ISO 8601; UTC when it names no
        zone); ValueError naming what is wrong."""
        known: dict[str, int] = {}
        for text in versions:
            name, equals, number = text.partition("=")
            if not equals:  # a bare version: which table is the question
                raise ValueError(f"--as-of-version {text!r}: expected TABLE=N, e.g. moves={text}")
            if name not in TABLES:
                raise ValueError(f"--as-of-version {text!r}: no table {name!r} (tables: {', '.join(TABLES)})")
            if not number.isdigit():
                raise ValueError(f"--as-of-version {text!r}: expected TABLE=N with N a version number >= 0")
            known[name] = int(number)
        when = None
        if time is not None:
            try:
                when = dt.datetime.fromisoformat(time)
            except ValueError:
                raise ValueError(f"--as-of {time!r}: expected an ISO 8601 time, e.g. 2026-11-01T06:00:00Z") from None
            when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        return cls(known, when)


@dataclass
class Views:
    """A DataFusion session with the views defined (``builder``), the names it answers to, and the tables the
    warehouse holds but that had no version yet at ``--as-of`` (table -> the time of its first version)."""

    builder: Any
    names: list[str]
    not_yet: dict[str, dt.datetime]


def open_views(warehouse: Warehouse, tables: set[str], as_of: AsOf) -> Views:
    """The warehouse's ``tables`` (those it holds) as of ``as_of`` in a DataFusion session, and the views over
    them; views whose tables are missing (or did not exist yet at ``as_of.time``) are left out."""
    from deltalake import QueryBuilder

    builder = QueryBuilder({"datafusion.catalog.information_schema": "true"})  # SHOW TABLES, SHOW COLUMNS
    present: list[str] = []
    not_yet: dict[str, dt.datetime] = {}
    for name in TABLES:
        if name not in tables:
            continue
        table, first = _versioned(warehouse.location(name), name, as_of)
        if table is None:
            not_yet[name] = first
            continue
        builder.register(REGISTERED.get(name, name), table)
        present.append(name)
    names: list[str] = [n for n in ("brokers", "partitions", "throughput", "plan_runs") if n in present]
    names += [f"{n}_raw" for n in ("plans", "moves") if n in present]
    if "plan_runs" in present:
        for name in ("plans", "moves"):
            if name in present:
                _run(builder, f"CREATE VIEW {name} AS {COMMITTED.format(raw=REGISTERED[name])}")
                names.append(name)
        if "plans" in present:
            _run(builder, f"CREATE VIEW plans_latest AS {LATEST}")
            names.append("plans_latest")
    return Views(builder, names, not_yet)


def _versioned(location: str, name: str, as_of: AsOf) -> tuple[Any, dt.datetime]:
    """Table ``name`` at the version ``as_of`` asks for (None where ``as_of.time`` is before its first version),
    and the time of its first version; TableUnreadableError naming the versions there are."""
    from deltalake import DeltaTable

    try:
        table = DeltaTable(location)
        if name not in as_of.versions and as_of.time is None:
            return table, dt.datetime.min
        history = table.history()
        first = dt.datetime.fromtimestamp(min(h["timestamp"] for h in history) / 1000, dt.UTC)
        if name in as_of.versions:
            version, latest = as_of.versions[name], table.version()
            if version > latest:
                raise TableUnreadableError(f"table {name} at {location} has versions up to {latest}, not {version}")
            return DeltaTable(location, version=version), first
        assert as_of.time is not None
        if as_of.time < first:
            return None, first  # delta-rs would read its first version instead: the table did not exist then
        table.load_as_version(as_of.time)
        return table, first
    except TableUnreadableError:
        raise
    except Exception as exc:  # delta-rs: a version vacuumed away, an unreadable log
        raise TableUnreadableError(f"table {name} at {location}: {_one_line(exc)}") from exc


def query(builder: Any, statement: str, limit: int) -> tuple[pa.Table, bool]:
    """The first ``limit`` rows of ``statement``'s answer, and whether it has more (read as a stream: a
    query over every plan stops reading once it has them)."""
    try:
        reader = pa.RecordBatchReader.from_stream(builder.execute(statement))
        batches, rows, more = [], 0, False
        for batch in reader:
            batches.append(batch.slice(0, limit - rows))
            rows += batches[-1].num_rows
            if rows >= limit and (batch.num_rows > batches[-1].num_rows or _any_left(reader)):
                more = True
                break
        return pa.Table.from_batches(batches, schema=reader.schema), more
    except Exception as exc:  # delta-rs raises DeltaError for DataFusion's parse, plan and run errors
        raise QueryError(_one_line(exc)) from exc


def _any_left(reader: pa.RecordBatchReader) -> bool:
    return any(batch.num_rows for batch in reader)


def _run(builder: Any, statement: str) -> None:
    pa.RecordBatchReader.from_stream(builder.execute(statement)).read_all()


def show(table: pa.Table, more: bool) -> str:
    """``table`` laid out as Spark's ``show(truncate=False)`` prints it (print adds the last newline): a grid,
    cells left-aligned, NULL for a missing value, and a last line when rows were left out."""
    names = table.column_names
    cells = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([3, len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]  # Spark's least is 3
    rule = "+" + "+".join("-" * w for w in widths) + "+"
    grid = "\n".join([rule, _line(names, widths), rule, *(_line(r, widths) for r in cells), rule]) + "\n"
    return grid + (f"only showing top {table.num_rows} row{'s' if table.num_rows != 1 else ''}" if more else "")


def _line(values: list[str], widths: list[int]) -> str:
    return "|" + "|".join(v.ljust(w) for v, w in zip(values, widths)) + "|"


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return str(value.isoformat(sep=" "))
    if isinstance(value, list):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} -> {_cell(v)}" for k, v in value.items()) + "}"
    return str(value)


def _one_line(exc: Exception) -> str:
    """DataFusion's message in one line: its lines joined (a missing column's lists the valid ones)."""
    return " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip()) or type(exc).__name__
