"""A sweep task's rows, written by the task itself as Parquet part files of the sweep's
tables (pyarrow), in the folders and the form Spark's own writer gives them.

Building the tables in Spark cost a sweep more than the simulations' rows were worth:
every row went into the JVM as Arrow, through ``mapInArrow`` and Spark SQL's Parquet
writer, and a first sweep in a process paid Spark SQL's warm-up in the JVM (about half
of the JVM's CPU of a sweep of 60 seeds, docs/spark.md). Each task of a sweep runs
seeds of one configuration, so its rows of a table belong to one partition folder
(``scenario=S/config=C``): the task writes them there, one file per table, and hands the
driver a few small tuples. The files are what ``df.write.partitionBy("scenario",
"config").parquet(...)`` writes: folder names escaped as Spark escapes them, the
partition columns in the folder names and not in the files, every column optional,
snappy; ``isrlab report`` reads them with the explicit schemas (spark_reports.load).
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from spark_reports.schemas import PARTITION_COLUMNS, TABLES

# Rows become a record batch this many at a time, so a task's Python tuples never pile
# up over its runs (Spark's own spark.sql.execution.arrow.maxRecordsPerBatch default).
BATCH_ROWS = 10_000
# Spark's name for a null or empty partition value (never one of a sweep's).
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
SUCCESS_FILE = "_SUCCESS"  # what Spark's writer leaves in a table's folder once every task committed
# The characters Spark's ExternalCatalogUtils.escapePathName writes as %XX in a folder
# name (tests/spark_reports/test_sweep_parts.py compares with the JVM's, character by character).
_ESCAPED = frozenset([*map(chr, range(1, 32)), '"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f",
                      "{", "[", "]", "^"])


def escape_path_name(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def partition_path(values: Iterable[str]) -> Path:
    """The folder of one partition under its table's: ``scenario=S/config=C``, as Spark names it."""
    return Path(*(f"{escape_path_name(column)}={escape_path_name(value) if value else DEFAULT_PARTITION}"
                  for column, value in zip(PARTITION_COLUMNS, values)))


@lru_cache(maxsize=None)
def arrow_schema(table: str) -> pa.Schema:
    """The table's columns as Spark maps them to Arrow (so that Spark reads back exactly
    the schema of spark_reports.schemas)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(TABLES[table])


@lru_cache(maxsize=None)
def file_schema(table: str) -> pa.Schema:
    """What a part file holds: the table's columns but the partition ones, every column
    optional (Spark writes them so, whatever the schema says)."""
    return pa.schema([field.with_nullable(True) for field in arrow_schema(table) if field.name not in PARTITION_COLUMNS])


def _data_columns(table: str) -> list[int]:
    names = TABLES[table].fieldNames()
    return [i for i, name in enumerate(names) if name not in PARTITION_COLUMNS]


class TablePart:
    """One table's rows of a task (tuples in the schema's column order, all of one
    partition), as record batches of BATCH_ROWS rows, then one Parquet file."""

    def __init__(self, table: str):
        self.table = table
        self.schema = file_schema(table)
        self.rows = 0
        self.partition: tuple[str, ...] | None = None
        self._keys = [TABLES[table].fieldNames().index(c) for c in PARTITION_COLUMNS]
        self._columns = _data_columns(table)
        self._pending: list[tuple] = []
        self._batches: list[pa.RecordBatch] = []

    def add(self, row: tuple) -> None:
        self._pending.append(row)
        self.rows += 1
        if len(self._pending) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        columns = list(zip(*self._pending))
        partition = tuple(columns[k][0] for k in self._keys)
        if (self.partition or partition) != partition or any(len(set(columns[k])) > 1 for k in self._keys):
            # a task runs one configuration: a bug of the sweep's, not bad input
            raise ValueError(f"{self.table}: rows of more than one partition in one task")
        self.partition = partition
        arrays = [pa.array(columns[i], type=field.type) for i, field in zip(self._columns, self.schema)]
        self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self._pending = []

    def table_data(self) -> pa.Table:
        if self._pending:
            self._flush()
        return pa.Table.from_batches(self._batches, schema=self.schema)

    def write(self, table_folder: Path, file_name: str) -> Path:
        """Into its partition's folder, under a hidden name first (Spark's readers skip
        names that start with a dot), then renamed: a task that Spark runs again replaces
        its own file, and no reader ever sees half of one."""
        data = self.table_data()
        assert self.partition is not None, "a part without rows is never written"
        folder = table_folder / partition_path(self.partition)
        folder.mkdir(parents=True, exist_ok=True)
        scratch = folder / f".{file_name}.{os.getpid()}.tmp"
        pq.write_table(data, scratch, compression="snappy")
        os.replace(scratch, folder / file_name)
        return folder / file_name


def part_file_name(task_index: int, sweep_id: str) -> str:
    """Spark's form (part-NNNNN-UUID.c000.snappy.parquet): one name per task and sweep."""
    return f"part-{task_index:05d}-{sweep_id}.c000.snappy.parquet"


def write_parts(pairs: Iterable[tuple[str, tuple]], out: Path, task_index: int, sweep_id: str) -> list[tuple]:
    """A task's (table, row) pairs written under ``out`` (the sweep folder), a file per
    table that has rows: (table, path relative to out, rows) of each."""
    parts = {name: TablePart(name) for name in TABLES}
    for table, row in pairs:
        part = parts.get(table)
        if part is not None:
            part.add(row)
    written = []
    for name, part in parts.items():
        if part.rows:
            path = part.write(out / name, part_file_name(task_index, sweep_id))
            written.append((name, str(path.relative_to(out)), part.rows))
    return written


def mark_tables_done(out: Path) -> None:
    """Every table's folder, with Spark's marker of a finished write (an empty table,
    --keep none's traces, has its folder and nothing else, as Spark leaves it)."""
    for name in TABLES:
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / SUCCESS_FILE).touch()


def read_part(path: Path) -> list[tuple]:
    """A part file's rows back as tuples of its columns, maps as dicts (for tests)."""
    data = pq.ParquetFile(path).read()  # the file alone: no partition columns from its folders
    columns = [[dict(v) if v is not None and pa.types.is_map(field.type) else v for v in column.to_pylist()]
               for column, field in zip(data.columns, data.schema)]
    return list(zip(*columns))
