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
from typing import Iterable, Iterator, Sequence

import pyarrow as pa

from spark_reports.schemas import TABLES

# Compressed streams: the cache Spark keeps between the simulations and the writes is a
# few times smaller, for a few milliseconds a task.
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
# The (table, payload) rows a simulating task yields, one per table it has rows for.
PAYLOAD_SCHEMA = pa.schema([pa.field("table", pa.string(), False), pa.field("payload", pa.binary(), False)])
PAYLOAD_DDL = "table string, payload binary"


@lru_cache(maxsize=None)
def arrow_schema(table: str) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(TABLES[table])


def encode(table: str, rows: Sequence[tuple]) -> bytes:
    """The rows (tuples in the schema's column order) as one Arrow IPC stream."""
    schema = arrow_schema(table)
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    arrays = [pa.array(column, type=field.type) for column, field in zip(columns, schema)]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema, options=_WRITE_OPTIONS) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


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


def payload_batch(payloads: Iterable[tuple[str, bytes]]) -> pa.RecordBatch:
    tables, blobs = zip(*payloads) if payloads else ((), ())
    return pa.RecordBatch.from_arrays([pa.array(tables, pa.string()), pa.array(blobs, pa.binary())],
                                      schema=PAYLOAD_SCHEMA)


def table_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function for one table: the payload column's streams, decoded."""
    for batch in batches:
        for payload in batch.column("payload").to_pylist():
            yield from decode(payload)
