"""The table store: read a Delta table (at a version), append to it atomically.

Two backends behind one interface (DESIGN.md "The table store"):

* :class:`DeltaSparkStore` when the Delta Lake JVM classes are on the Spark
  classpath (a cluster started with ``--packages io.delta:delta-spark...``).
* :class:`DeltaRsStore`, the embedded default: delta-rs resolves and commits
  the Delta log, Spark scans and writes the parquet files, so data volume
  never passes through the driver.

Writes can *supersede* rows of earlier, uncommitted attempts (per cluster,
``plan_version >= floor``) in the same atomic commit, like Delta's
``replaceWhere``, and record Delta app transactions (``txn`` actions) so a
retried commit can be recognised and skipped.
"""

from __future__ import annotations

import json
import logging
import math
import posixpath
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.warehouse import add_new_columns, first_line, table_location
from schemas import ALL_TABLES, OUTPUT_TABLES, TableSpec

log = logging.getLogger(__name__)
# rows a job reads or writes through the driver (delta-rs, pyarrow) rather than with Spark jobs: below this
# the jobs' start-up costs more than moving the rows (one 20-partition cluster's plan: 11.0 -> 9.2 s)
FEW_ROWS = 100_000

STAGE_PREFIX = "stage-"
MAX_STRING_STAT = 32


class TableNotFoundError(Exception):
    pass


class TableSchemaError(Exception):
    """A table lacks contract columns or has columns of unusable types."""


class TableUnreadableError(TableSchemaError):
    """A table's Delta log (or a file it names) cannot be read."""


def unreadable(name: str, location: str, exc: Exception) -> TableUnreadableError:
    return TableUnreadableError(f"table {name} at {location} cannot be read: {first_line(exc)}")


_FAMILIES = {
    "long": "integer",
    "int": "integer",
    "bigint": "integer",
    "smallint": "integer",
    "tinyint": "integer",
    "double": "number",
    "float": "number",
    "timestamp_ntz": "timestamp",
}


def _family(spark_type: str) -> str:
    """A type's family: integers of any width are one, as are floats, timestamps, arrays of a family."""
    if spark_type.startswith("array<") and spark_type.endswith(">"):
        return f"array<{_family(spark_type[6:-1])}>"
    return _FAMILIES.get(spark_type, spark_type)


class ConcurrentCommitError(Exception):
    """Another writer committed to the table after the version an ``append(expect_version=...)`` expected."""


ABSENT = -1  # expect_version: the table must not exist yet


@dataclass(frozen=True)
class Supersede:
    """Rows a write replaces: per cluster, those with ``plan_version >= floor``.

    They can only come from an attempt that crashed before its ``plan_runs``
    row; replacing them keeps retries from duplicating rows.
    """

    floors: Mapping[str, int]

    def sql(self) -> str:
        terms = [
            f"(cluster_id = '{c.replace(chr(39), chr(39) * 2)}' AND plan_version >= {int(v)})"
            for c, v in sorted(self.floors.items())
        ]
        return " OR ".join(terms) or "false"

    def column(self) -> Any:
        return F.expr(self.sql())


@dataclass(frozen=True)
class Commit:
    """One commit of a table's history: its version, when, and the metadata the writer attached."""

    version: int
    timestamp_ms: int
    operation: str
    metadata: dict[str, Any]


@dataclass
class TableStore(ABC):
    """Where tables live and how they are read and appended: the contract every backend keeps.

    Tables are named (``schemas.ALL_TABLES``) and live at :meth:`location`.
    A backend reads a table at its latest or any earlier version, appends
    atomically (the rows, the superseded files and the app transactions in
    one commit), and tells the latest version, the recorded app transaction
    versions and the history of commits. ``tests/spark/test_store_contract.py``
    holds every backend that can start to the same tests.
    """

    spark: SparkSession
    warehouse: str
    locations: Mapping[str, str] = field(default_factory=dict)
    backend = "abstract"

    def location(self, name: str) -> str:
        return table_location(self.warehouse, self.locations, name)

    def spec(self, name: str) -> TableSpec | None:
        return ALL_TABLES.get(name)

    def empty(self, name: str) -> DataFrame:
        spec = ALL_TABLES[name]
        return self.spark.createDataFrame([], spec.spark_schema())

    def conform(self, name: str, df: DataFrame) -> DataFrame:
        """Select the contract columns in contract order, types and comments; name what is missing.

        One SQL projection plus ``to(schema)`` for the comments: building it
        from Column objects cost a few py4j round trips per column, ~0.5 s on
        the job's path.
        """
        spec = self.spec(name)
        if spec is None:
            return df
        missing = self._check_columns(name, df.schema, spec)
        if missing:  # a table written before a release that added columns: they read as null
            df = df.select("*", *[F.lit(None).alias(c) for c in missing])
        cast = df.selectExpr(*[f"CAST(`{c.name}` AS {c.type}) AS `{c.name}`" for c in spec.columns])
        return cast.to(spec.spark_schema())

    def _check_columns(self, name: str, schema: T.StructType, spec: TableSpec) -> list[str]:
        """The contract columns the stored ``schema`` lacks and may lack (added by a later release, or of an
        output table); raises :class:`TableSchemaError` for a required one missing or a column of the wrong kind."""
        present = set(schema.fieldNames())
        missing = [c for c in spec.column_names if c not in present]
        if missing and not (name in OUTPUT_TABLES or set(missing) <= set(spec.optional_columns)):
            raise TableSchemaError(
                f"table {name} at {self.location(name)} lacks columns {missing}; it has {sorted(present)}"
            )
        self._check_types(name, schema, spec)
        return missing

    def _check_types(self, name: str, schema: T.StructType, spec: TableSpec) -> None:
        """Refuse a column whose stored type is another kind than the contract's (text for a number, ...);
        widths may differ (an int written as a long): the cast to the contract type is exact then."""
        stored = {f.name: f.dataType.simpleString() for f in schema.fields}
        wrong = []
        for column in spec.columns:
            have = stored.get(column.name)
            if have is None or have == "void":
                continue
            want = _family(column.type)
            if _family(have) != want and not (want == "number" and _family(have) == "integer"):
                wrong.append(f"{column.name} is {have}, the contract says {column.type}")
        if wrong:
            raise TableSchemaError(f"table {name} at {self.location(name)}: wrong column type: {'; '.join(wrong)}")

    # backend interface -------------------------------------------------
    @abstractmethod
    def exists(self, name: str) -> bool:
        """Is there a table at the name's location?"""

    @abstractmethod
    def version(self, name: str) -> int | None:
        """The latest committed version (None: no table yet)."""

    @abstractmethod
    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table at its latest (or the given) version, in contract columns; a missing output table
        reads empty, a missing input table raises :class:`TableNotFoundError`."""

    @abstractmethod
    def append(
        self,
        name: str,
        df: DataFrame,
        *,
        supersede: Supersede | None = None,
        txns: Mapping[str, int] | None = None,
        metadata: Mapping[str, Any] | None = None,
        expect_version: int | None = None,
        few: bool = False,
    ) -> int | None:
        """Append ``df`` in one atomic commit that also removes the rows ``supersede`` names and records
        the app transactions ``txns`` (app id -> version); a retried commit whose every app transaction is
        recorded at that version or later is a no-op. Returns the version the table is at.

        ``expect_version``: optimistic concurrency. The commit lands only if the table is still at that
        version (``ABSENT``: does not exist yet); otherwise :class:`ConcurrentCommitError`, and nothing is
        committed. Without it, concurrent appends both land (Delta's blind appends).

        ``few``: the rows are few (a small fleet's plan, the run markers); a backend may collect them and
        write their files from the driver, sparing a Spark write job."""

    @abstractmethod
    def delete_rows(self, name: str, predicate: str) -> int | None:
        """Delete the rows matching a SQL ``predicate`` in one commit; returns the version."""

    @abstractmethod
    def txn_versions(self, name: str, app_ids: list[str]) -> dict[str, int | None]:
        """The recorded version of each app transaction (None: never recorded)."""

    @abstractmethod
    def history(self, name: str) -> list[Commit]:
        """The table's commits, newest first ([] when there is no table)."""

    def txn_version(self, name: str, app_id: str) -> int | None:
        return self.txn_versions(name, [app_id])[app_id]

    def already_recorded(self, name: str, txns: Mapping[str, int] | None) -> bool:
        """Does the log hold every one of ``txns`` at its version or later (a retried commit)?"""
        if not txns:
            return False
        recorded = self.txn_versions(name, sorted(txns))
        return all((got := recorded[a]) is not None and got >= v for a, v in txns.items())

    def read_or_empty(self, name: str, version: int | None = None) -> DataFrame:
        return self.read(name, version) if self.exists(name) else self.empty(name)


def delta_log_txn_versions(location: str, app_ids: list[str]) -> dict[str, int | None]:
    """App transaction versions as the Delta log at ``location`` records them (read with delta-rs)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(location):
        return dict.fromkeys(app_ids)
    table = DeltaTable(location)
    return {app_id: table.transaction_version(app_id) for app_id in app_ids}


def delta_log_history(location: str) -> list[Commit]:
    """The commits the Delta log at ``location`` holds, newest first (read with delta-rs)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(location):
        return []
    out = []
    for entry in DeltaTable(location).history():
        raw = entry.get("userMetadata")
        try:
            metadata = json.loads(raw) if isinstance(raw, str) else {}
        except json.JSONDecodeError:
            metadata = {"userMetadata": raw}
        out.append(
            Commit(int(entry["version"]), int(entry.get("timestamp", 0)), str(entry.get("operation", "")), metadata)
        )
    return out


class DeltaRsStore(TableStore):
    backend = "delta-rs"

    def txn_versions(self, name: str, app_ids: list[str]) -> dict[str, int | None]:
        return delta_log_txn_versions(self.location(name), app_ids)

    def history(self, name: str) -> list[Commit]:
        return delta_log_history(self.location(name))

    def exists(self, name: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.location(name))

    def version(self, name: str) -> int | None:
        from deltalake import DeltaTable

        return DeltaTable(self.location(name)).version() if self.exists(name) else None

    def scan(self, name: str, columns: list[str], where: Any = None) -> pa.Table:
        """Columns of the table's rows (where ``where``, a pyarrow dataset expression, holds) as Arrow, read by
        delta-rs from the files: no Spark job (the read side's :meth:`jobs.warehouse.Warehouse.scan`)."""
        from jobs.warehouse import Warehouse

        return Warehouse("", {name: self.location(name)}).scan(name, columns, where)

    def read_arrow(self, name: str, where: Any = None) -> pa.Table:
        """:meth:`read` as Arrow, without Spark: the rows where ``where`` (a pyarrow dataset expression) holds, in
        contract columns and types, after the same checks (a missing table or column, a column of the wrong kind).

        The plan job reads a small fleet's inputs this way: Spark scans of a few small tables cost it more than
        the planning (a 20-partition cluster: 11.0 -> 9.2 s end to end)."""
        spec = ALL_TABLES[name]
        if not self.exists(name):
            if name in OUTPUT_TABLES:
                return spec.arrow_schema().empty_table()
            raise TableNotFoundError(f"table {name}: no Delta table at {self.location(name)}")
        missing = self._check_columns(name, from_arrow_schema(self._log_schema(name)), spec)
        rows = self.scan(name, [c for c in spec.column_names if c not in missing], where)
        for column in missing:
            rows = rows.append_column(column, pa.nulls(len(rows)))
        return rows.select(spec.column_names).cast(spec.arrow_schema())

    def _log_schema(self, name: str) -> pa.Schema:
        from deltalake import DeltaTable

        try:
            return pa.schema(DeltaTable(self.location(name)).schema().to_arrow())
        except Exception as exc:  # delta-rs: a truncated or corrupt log, a missing checkpoint, ...
            raise unreadable(name, self.location(name), exc) from exc

    def read(self, name: str, version: int | None = None) -> DataFrame:
        from deltalake import DeltaTable

        uri = self.location(name)
        if not self.exists(name):
            if name in OUTPUT_TABLES:
                return self.empty(name)
            raise TableNotFoundError(f"table {name}: no Delta table at {uri}")
        try:
            table = DeltaTable(uri, version=version)
        except Exception as exc:  # delta-rs: a truncated or corrupt log, a missing checkpoint, ...
            raise unreadable(name, uri, exc) from exc
        log_schema = from_arrow_schema(pa.schema(table.schema().to_arrow()))
        partition_cols = list(table.metadata().partition_columns)
        files = table.file_uris()
        if not files:
            return self.conform(name, self.spark.createDataFrame([], log_schema))
        data_schema = T.StructType([f for f in log_schema.fields if f.name not in partition_cols])
        df = self.spark.read.schema(data_schema).parquet(*files)
        if partition_cols:
            df = self._with_partition_values(df, table, partition_cols, log_schema)
        return self.conform(name, df.select(log_schema.fieldNames()))

    def _with_partition_values(self, df: DataFrame, table: Any, cols: list[str], schema: T.StructType) -> DataFrame:
        """Restore partition columns (absent from the files) from the log's add actions.

        Files are matched on their normalised full path: Spark reuses a file
        name in every partition folder a task writes to.
        """
        adds = pa.table(table.get_add_actions(flatten=True)).to_pandas()
        root = table.table_uri.rstrip("/")
        by_file = pd.DataFrame({"_file": [_path_key(f"{root}/{unquote(p)}") for p in adds["path"]]})
        for c in cols:
            by_file[c] = adds[f"partition.{c}"].astype(object).where(adds[f"partition.{c}"].notna(), None)
        types = {f.name: f.dataType for f in schema.fields}
        mapping = self.spark.createDataFrame(
            by_file, T.StructType([T.StructField(c, T.StringType()) for c in by_file.columns])
        )
        mapping = mapping.select("_file", *(F.col(c).cast(types[c]).alias(c) for c in cols))
        return (
            df.withColumn("_file", _path_key_column(F.col("_metadata.file_path")))
            .join(F.broadcast(mapping), on="_file", how="left")
            .drop("_file")
        )

    def append(
        self,
        name: str,
        df: DataFrame,
        *,
        supersede: Supersede | None = None,
        txns: Mapping[str, int] | None = None,
        metadata: Mapping[str, Any] | None = None,
        expect_version: int | None = None,
        few: bool = False,
    ) -> int | None:
        spec = ALL_TABLES[name]
        uri = self.location(name)
        if self.already_recorded(name, txns):
            return self.version(name)  # a retried commit: Delta's idempotent-write rule
        removes, kept = self._superseded(name, supersede) if supersede else ([], None)
        out = self.conform(name, df)
        if kept is not None:
            out = out.unionByName(kept)
        stage = new_stage()
        if few:
            write_parquet(out.toArrow().cast(spec.arrow_schema()), posixpath.join(uri, stage), spec)
        else:
            out.write.mode("errorifexists").partitionBy(*spec.partition_by).parquet(posixpath.join(uri, stage))
        return self._commit(name, _add_actions(uri, stage, spec), removes, txns, metadata, expect_version)

    def commit_staged(
        self, name: str, stage: str, files: list[str], txns: Mapping[str, int], metadata: Mapping[str, Any]
    ) -> int | None:
        """Commit ``files`` (paths under the table's folder ``stage``, written there by :func:`write_parquet`
        elsewhere: the plan job's workers) as one append, with ``txns``; other files in the folder stay out (a
        retried task's). A retried commit commits nothing, as :meth:`append`."""
        if self.already_recorded(name, txns):
            return self.version(name)
        spec = ALL_TABLES[name]
        adds = _add_actions(self.location(name), stage, spec, files=set(files))
        return self._commit(name, adds, [], txns, metadata, None)

    def _commit(
        self,
        name: str,
        adds: list[Any],
        removes: list[tuple[str, int, dict[str, str]]],
        txns: Mapping[str, int] | None,
        metadata: Mapping[str, Any] | None,
        expect_version: int | None,
    ) -> int | None:
        """One Delta commit of these add and remove actions (creating the table when it is not there)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import CommitProperties, RemoveAction, Transaction

        spec = ALL_TABLES[name]
        uri = self.location(name)
        if not adds and not removes and not txns:
            return self.version(name)
        props = CommitProperties(
            custom_metadata={"userMetadata": json.dumps(dict(metadata or {}), sort_keys=True)},
            app_transactions=[Transaction(app_id, int(v)) for app_id, v in sorted((txns or {}).items())] or None,
            max_commit_retries=0 if expect_version is not None else None,  # a lost race fails, never rebases
        )
        arrow_schema = spec.arrow_schema()
        created = self._create(name, adds, props, expect_version)
        if not created:
            now_ms = int(time.time() * 1000)
            actions = [
                *adds,
                *(RemoveAction(p, True, now_ms, size, dict[str, str | None](pv)) for p, size, pv in removes),
            ]
            if add_new_columns(uri, arrow_schema) and expect_version is not None:
                raise ConcurrentCommitError(f"table {name} gained columns; its version moved on")
            # reloaded right before committing; at the expected version, a commit that lost the race fails
            table = DeltaTable(uri, version=expect_version) if expect_version is not None else DeltaTable(uri)
            try:
                table.create_write_transaction(
                    actions,
                    mode="append",
                    schema=arrow_schema,
                    partition_by=list(spec.partition_by) or None,
                    commit_properties=props,
                )
            except CommitFailedError as exc:
                if expect_version is None:
                    raise
                raise ConcurrentCommitError(
                    f"table {name} moved past version {expect_version} before this commit"
                ) from exc
        version = self.version(name)
        log.info("commit table=%s version=%s files_added=%d files_removed=%d", name, version, len(adds), len(removes))
        return version

    def _create(self, name: str, adds: list[Any], props: Any, expect_version: int | None) -> bool:
        """Create the table with these files when it does not exist (True); False: append to it instead.

        Two runs may create a table at once: the loser appends, unless it expected a version."""
        from deltalake import Schema
        from deltalake.transaction import create_table_with_add_actions

        spec = ALL_TABLES[name]
        if self.exists(name):
            if expect_version == ABSENT:
                raise ConcurrentCommitError(f"table {name} was created by another writer meanwhile")
            return False
        if expect_version not in (None, ABSENT):
            raise ConcurrentCommitError(f"table {name} expected at version {expect_version} does not exist")
        try:
            create_table_with_add_actions(
                self.location(name),
                Schema.from_arrow(spec.arrow_schema()),
                adds,
                mode="error",
                partition_by=list(spec.partition_by) or None,
                commit_properties=props,
            )
        except Exception as exc:  # another writer created it first (delta-rs raises a generic error)
            if not self.exists(name):
                raise
            if expect_version is not None:
                raise ConcurrentCommitError(f"table {name} was created by another writer meanwhile") from exc
            return False
        return True

    def delete_rows(self, name: str, predicate: str) -> int | None:
        from deltalake import DeltaTable

        if not self.exists(name):
            return None
        metrics = DeltaTable(self.location(name)).delete(predicate)
        version = self.version(name)
        log.info("delete table=%s version=%s rows=%s", name, version, metrics.get("num_deleted_rows"))
        return version

    def _superseded(
        self, name: str, supersede: Supersede
    ) -> tuple[list[tuple[str, int, dict[str, str]]], DataFrame | None]:
        """Files holding superseded rows, and (rarely) rows of those files to keep."""
        from deltalake import DeltaTable

        if not self.exists(name):
            return [], None
        adds = pa.table(DeltaTable(self.location(name)).get_add_actions(flatten=True)).to_pandas()
        if adds.empty or "partition.cluster_id" not in adds:
            return [], None
        floors = adds["partition.cluster_id"].map(dict(supersede.floors))
        high = adds["max.plan_version"] if "max.plan_version" in adds else pd.Series(float("nan"), index=adds.index)
        low = adds["min.plan_version"] if "min.plan_version" in adds else pd.Series(float("nan"), index=adds.index)
        hit = floors.notna() & ~(high < floors)  # unknown stats count as a hit
        removes = [
            (unquote(p), int(size), {"cluster_id": c})
            for p, size, c in zip(
                adds.loc[hit, "path"], adds.loc[hit, "size_bytes"], adds.loc[hit, "partition.cluster_id"]
            )
        ]
        mixed = bool((low[hit].isna() | (low[hit] < floors[hit])).any())
        if not mixed:
            return removes, None
        files = {posixpath.basename(p) for p, _, _ in removes}
        kept = (
            self.read(name)
            .withColumn("_file", F.col("_metadata.file_name"))
            .where(F.col("_file").isin(sorted(files)) & ~supersede.column())
            .drop("_file")
        )
        return removes, kept.localCheckpoint()


def _path_key(path: str) -> str:
    """A decoded file path without scheme or leading slashes (``file:///a`` == ``/a``)."""
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:", "", path).lstrip("/")


def _path_key_column(col: Any) -> Any:
    """:func:`_path_key` of Spark's percent-encoded ``_metadata.file_path``."""
    decoded = F.reflect(
        F.lit("java.net.URLDecoder"), F.lit("decode"), F.regexp_replace(col, r"\+", "%2B"), F.lit("UTF-8")
    )
    return F.regexp_replace(F.regexp_replace(decoded, r"^[A-Za-z][A-Za-z0-9+.-]*:", ""), r"^/+", "")


def new_stage() -> str:
    """A fresh folder name under a table's location for files not yet committed (no reader lists folders)."""
    return f"{STAGE_PREFIX}{uuid.uuid4().hex}"


def write_parquet(rows: pa.Table, uri: str, spec: TableSpec) -> list[str]:
    """``rows`` as parquet files under ``uri`` (returned: their paths relative to it), laid out as Spark's writer
    lays them out (a hive folder per partition value, the partition columns left out of the files, microsecond
    timestamps): the demo's write stages, collect and commit included, 2.0 -> 0.9 s each. Several writers may
    share ``uri`` (the plan job's workers): each names its files afresh and leaves the others' alone."""
    import pyarrow.dataset as ds

    fs, root = pafs.FileSystem.from_uri(uri)
    partitioning = (
        ds.partitioning(rows.select(list(spec.partition_by)).schema, flavor="hive") if spec.partition_by else None
    )
    written: list[str] = []
    ds.write_dataset(
        rows,
        root,
        filesystem=fs,
        format="parquet",
        partitioning=partitioning,
        basename_template=f"part-{uuid.uuid4().hex}-{{i}}.parquet",
        existing_data_behavior="overwrite_or_ignore",  # the names are new: nothing is overwritten
        file_visitor=lambda f: written.append(posixpath.relpath(f.path, root)),
    )
    return sorted(written)


def _add_actions(uri: str, stage: str, spec: TableSpec, files: set[str] | None = None) -> list[Any]:
    """One add action per parquet file written under ``stage`` (``files``: only these, relative to it), with
    stats from its footer."""
    from deltalake.transaction import AddAction

    fs, root = pafs.FileSystem.from_uri(uri)
    selector = pafs.FileSelector(posixpath.join(root, stage), recursive=True, allow_not_found=files is not None)
    actions = []
    for info in sorted(fs.get_file_info(selector), key=lambda i: i.path):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        rel = posixpath.relpath(info.path, root)
        if files is not None and posixpath.relpath(rel, stage) not in files:
            continue
        partition_values = {
            unquote(k): (None if unquote(v) == "__HIVE_DEFAULT_PARTITION__" else unquote(v))
            for k, v in (seg.split("=", 1) for seg in rel.split("/")[1:-1] if "=" in seg)
        }
        with fs.open_input_file(info.path) as handle:
            stats = _file_stats(pq.ParquetFile(handle).metadata, spec)
        mtime = int(info.mtime.timestamp() * 1000) if info.mtime else 0
        actions.append(AddAction(rel, int(info.size or 0), partition_values, mtime, True, json.dumps(stats)))
    return actions


def _file_stats(meta: pq.FileMetaData, spec: TableSpec) -> dict[str, Any]:
    """Delta file statistics (numRecords, min/max, nullCount) of the primitive columns."""
    kinds = {c.name: c.type for c in spec.columns}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for ci in range(group.num_columns):
            chunk = group.column(ci)
            name = chunk.path_in_schema
            if kinds.get(name) not in {"string", "int", "long", "double"} or chunk.statistics is None:
                continue
            st = chunk.statistics
            nulls[name] = nulls.get(name, 0) + int(st.null_count or 0)
            if not st.has_min_max:
                continue
            lo, hi = st.min, st.max
            if kinds[name] == "string" and (len(lo) > MAX_STRING_STAT or len(hi) > MAX_STRING_STAT):
                continue
            if kinds[name] == "double" and not (math.isfinite(lo) and math.isfinite(hi)):
                continue
            mins[name] = lo if name not in mins else min(mins[name], lo)
            maxs[name] = hi if name not in maxs else max(maxs[name], hi)
    return {"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


class DeltaSparkStore(TableStore):
    """Native Delta Lake through Spark (``format("delta")``); needs the Delta JVM jars."""

    backend = "delta-spark"

    def txn_versions(self, name: str, app_ids: list[str]) -> dict[str, int | None]:
        return delta_log_txn_versions(self.location(name), app_ids)

    def history(self, name: str) -> list[Commit]:
        return delta_log_history(self.location(name))

    def exists(self, name: str) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, self.location(name)))

    def version(self, name: str) -> int | None:
        from delta.tables import DeltaTable

        if not self.exists(name):
            return None
        last = DeltaTable.forPath(self.spark, self.location(name)).history(1).first()
        return None if last is None else int(last["version"])

    def read(self, name: str, version: int | None = None) -> DataFrame:
        if not self.exists(name):
            if name in OUTPUT_TABLES:
                return self.empty(name)
            raise TableNotFoundError(f"table {name}: no Delta table at {self.location(name)}")
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return self.conform(name, reader.load(self.location(name)))

    def append(
        self,
        name: str,
        df: DataFrame,
        *,
        supersede: Supersede | None = None,
        txns: Mapping[str, int] | None = None,
        metadata: Mapping[str, Any] | None = None,
        expect_version: int | None = None,
        few: bool = False,
    ) -> int | None:
        if self.already_recorded(name, txns):
            return self.version(name)  # a retried commit
        current = self.version(name)
        if expect_version is not None and (current if current is not None else ABSENT) != expect_version:
            # Spark's blind append cannot be made conditional: checked here, right before it (a narrow window)
            raise ConcurrentCommitError(f"table {name} is at version {current}, not {expect_version}")
        spec = ALL_TABLES[name]
        writer = self.conform(name, df).write.format("delta").partitionBy(*spec.partition_by)
        writer = writer.option("userMetadata", json.dumps(dict(metadata or {}), sort_keys=True))
        writer = writer.option("mergeSchema", "true")  # columns a newer release added
        if supersede and self.exists(name):
            writer = writer.mode("overwrite").option("replaceWhere", supersede.sql())
        else:
            writer = writer.mode("append")
        if txns and len(txns) == 1:
            ((app_id, txn_version),) = txns.items()
            writer = writer.option("txnAppId", app_id).option("txnVersion", int(txn_version))
        writer.save(self.location(name))
        return self.version(name)

    def delete_rows(self, name: str, predicate: str) -> int | None:
        from delta.tables import DeltaTable

        if not self.exists(name):
            return None
        DeltaTable.forPath(self.spark, self.location(name)).delete(predicate)
        return self.version(name)


def has_delta_jvm(spark: SparkSession) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")  # type: ignore[union-attr]
        return True
    except Exception:  # noqa: BLE001 - py4j raises its own error types
        return False


def open_store(
    spark: SparkSession, warehouse: str, locations: Mapping[str, str] | None = None, backend: str = "auto"
) -> TableStore:
    """The native backend when Delta's JVM classes are present, else the delta-rs bridge."""
    if backend == "auto":
        backend = "delta-spark" if has_delta_jvm(spark) else "delta-rs"
    cls = DeltaSparkStore if backend == "delta-spark" else DeltaRsStore
    store = cls(spark, warehouse, dict(locations or {}))
    log.info("table store backend=%s warehouse=%s", store.backend, store.location(""))
    return store
