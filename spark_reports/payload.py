"""A sweep task's rows of one table as one Arrow IPC stream (bytes), and back.

Each Spark task of a sweep turns the rows of its runs (spark_reports.rows: tuples in
the order of spark_reports.schemas) into one compact binary value per table; Spark
caches those few values and then builds each table from them with ``mapInArrow``,
column by column. Rows pickled one by one into the JVM and converted there cost more
than the simulations that made them (about 3,200 operation rows a run of jepsen-2013).
The Arrow types are Spark's own mapping of the explicit schemas, so the tables Spark
writes have exactly those schemas.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Iterator

import pyarrow as pa

from spark_reports.schemas import TABLES

# Compressed streams: the cache Spark keeps between the simulations and the writes is a
# few times smaller, for a few milliseconds a task.
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
# Rows become a record batch this many at a time, so a task's Python tuples never pile
# up over its runs (Spark's own spark.sql.execution.arrow.maxRecordsPerBatch default).
BATCH_ROWS = 10_000
# The rows of the DataFrame each table is built from: one per task that has rows for it.
PAYLOAD_DDL = "table string, payload binary"


@lru_cache(maxsize=None)
def arrow_schema(table: str) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(TABLES[table])


class TableStream:
    """One table's rows of a task (tuples in the schema's column order), as record
    batches of BATCH_ROWS rows, then one Arrow IPC stream."""

    def __init__(self, table: str):
        self.schema = arrow_schema(table)
        self.rows = 0
        self._pending: list[tuple] = []
        self._batches: list[pa.RecordBatch] = []

    def add(self, row: tuple) -> None:
        self._pending.append(row)
        self.rows += 1
        if len(self._pending) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        columns = list(zip(*self._pending))
        arrays = [pa.array(column, type=field.type) for column, field in zip(columns, self.schema)]
        self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self._pending = []

    def finish(self) -> bytes:
        if self._pending:
            self._flush()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.schema, options=_WRITE_OPTIONS) as writer:
            for batch in self._batches:
                writer.write_batch(batch)
        return sink.getvalue().to_pybytes()


def encode(table: str, rows: Iterable[tuple]) -> bytes:
    """The rows as one Arrow IPC stream."""
    stream = TableStream(table)
    for row in rows:
        stream.add(row)
    return stream.finish()


def decode(payload: bytes) -> Iterator[pa.RecordBatch]:
    with pa.ipc.open_stream(payload) as reader:
        yield from reader


def decode_rows(payload: bytes) -> list[tuple]:
    """The rows back as tuples, maps as dicts (what the tests compare with
    spark_reports.rows)."""
    rows: list[tuple] = []
    for batch in decode(payload):
        columns = [[dict(v) if v is not None and pa.types.is_map(field.type) else v for v in column.to_pylist()]
                   for column, field in zip(batch.columns, batch.schema)]
        rows.extend(zip(*columns))
    return rows


def table_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function for one table: the payload column's streams, decoded."""
    for batch in batches:
        for payload in batch.column("payload").to_pylist():
            yield from decode(payload)
