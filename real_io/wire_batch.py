"""A record batch v2 kept as the bytes the client sent: what the real broker appends,
stores and serves.

The core appends any object with a batch's header fields and ``encode()``
(broker_core.log). ``WireBatch`` is that object for the real binding: a view of the
client's bytes (in a produce request, of the request's own buffer: no copy), checked
once when they arrive (CRC-32C, codec, every record's framing, offset deltas 0..n-1, as
Kafka's LogValidator checks a v2 batch; record_batch.validate_batch), then stored
unchanged but for the two header fields a leader assigns -- base offset and partition
leader epoch, which lie outside the CRC (DefaultRecordBatch: the CRC covers attributes
onwards). So a segment holds exactly what consumers receive, and a fetch can be served
from the file with sendfile. Records are decoded only when something asks for them.
"""
from __future__ import annotations

import struct

from broker_core.records import Records, last_sequence
from real_io.protocol import compression, record_batch
from real_io.protocol.errors import ProtocolError

_BASE_OFFSET = struct.Struct(">q")  # at byte 0
_LEADER_EPOCH = struct.Struct(">i")  # at byte 12


class WireBatch:
    __slots__ = ("data", "base_offset", "next_offset", "leader_epoch", "producer_id", "producer_epoch",
                 "base_sequence", "attributes", "first_timestamp", "max_timestamp", "count")
    # the core's header fields (broker_core.records.BatchHeader), set by _set_log_fields
    base_offset: int
    next_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    def __init__(self, data: memoryview, header: record_batch.BatchHeader):
        self.data = data
        _set_log_fields(self, header)
        self.attributes = header.attributes
        self.first_timestamp = header.first_timestamp
        self.max_timestamp = header.max_timestamp
        self.count = header.record_count

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, position: int = 0, validate: bool = True,
              max_bytes: int = compression.DEFAULT_MAX_BYTES, stored: bool = False) -> tuple["WireBatch", int]:
        """The batch at ``position`` and the position after it. ``validate``: check the
        CRC and walk every record's framing (a producer's batch, a recovery scan); without
        it only the header is checked (bytes this broker wrote and read back in one
        piece). ProtocolError for anything wrong. The batch is a view of ``data``, not a
        copy: a produce request's batch is written to the segment file from the request's
        own buffer. ``stored``: a segment's batch, which the log cleaner may have written
        (gaps between offset deltas, or no record at all: checked by decoding it)."""
        if stored:
            return cls._parse_stored(data, position, validate, max_bytes)
        if validate:
            header, end = record_batch.validate_batch(data, position, max_bytes)
        else:
            header = record_batch.read_header(data, position)
            end = position + header.size
            if end > len(data):
                raise ProtocolError(f"truncated batch: {header.size} bytes announced, {len(data) - position} present")
        if header.record_count <= 0:
            raise ProtocolError("a record batch with no records")
        return cls(memoryview(data)[position:end], header), end

    @classmethod
    def _parse_stored(cls, data: bytes | bytearray | memoryview, position: int, validate: bool,
                      max_bytes: int) -> tuple["WireBatch", int]:
        header = record_batch.read_header(data, position)
        end = position + header.size
        if end > len(data):
            raise ProtocolError(f"truncated batch: {header.size} bytes announced, {len(data) - position} present")
        if validate:
            if header.record_count and header.last_offset_delta == header.record_count - 1:
                record_batch.validate_batch(data, position, max_bytes)  # a batch as appended: the fast walk
            else:
                record_batch.decode_stored_batch(data, position, max_bytes)
        return cls(memoryview(data)[position:end], header), end

    # -- what the core reads -------------------------------------------------------------
    @property
    def size_bytes(self) -> int:
        return len(self.data)

    @property
    def record_count(self) -> int:
        return self.next_offset - self.base_offset

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.record_count)

    @property
    def is_cleaned(self) -> bool:
        """Whether the log cleaner rewrote it (its records' offsets have gaps)."""
        return self.count != self.next_offset - self.base_offset

    @property
    def records(self) -> Records:
        if self.is_cleaned:
            return record_batch.decode_stored_batch(self.data, 0)[0].records
        return record_batch.decode_batch(self.data, 0)[0].records

    @property
    def offsets(self) -> tuple[int, ...] | None:
        """Each record's offset where the cleaner left gaps (None: consecutive)."""
        if not self.is_cleaned:
            return None
        batch = record_batch.decode_stored_batch(self.data, 0)[0]
        return tuple(getattr(batch, "offsets", ()))

    def encode(self) -> memoryview:
        return self.data

    def with_offsets(self, base_offset: int, leader_epoch: int) -> "WireBatch":
        """The batch as a leader stores it: offsets and epoch assigned, all else as sent.
        A batch in a request's own (writable) buffer is stamped in place, as Kafka's
        LogValidator.assignOffsetsNonCompressed stamps the request's MemoryRecords
        (setLastOffset, setPartitionLeaderEpoch); both fields lie outside the CRC. This
        object then describes the stamped bytes no longer, and is not used again."""
        data = self.data
        if data.readonly:
            data = memoryview(bytearray(data))
        _BASE_OFFSET.pack_into(data, 0, base_offset)
        _LEADER_EPOCH.pack_into(data, 12, leader_epoch)
        return WireBatch(data, record_batch.read_header(data))

    def __repr__(self) -> str:
        return (f"WireBatch({self.base_offset}..{self.next_offset - 1}, epoch {self.leader_epoch}, "
                f"{len(self.data)} bytes)")


class WireBatchHeader:
    """A stored batch's header without its records: what a read of a sealed segment
    needs (broker_core.storage.LogStorage.header_at) -- offsets, epoch, producer fields,
    the max timestamp (a lookup by timestamp skips batches by it) and the size in
    bytes, read without touching the records."""
    __slots__ = ("base_offset", "next_offset", "leader_epoch", "producer_id", "producer_epoch",
                 "base_sequence", "size_bytes", "max_timestamp")
    base_offset: int
    next_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    def __init__(self, header: record_batch.BatchHeader):
        _set_log_fields(self, header)
        self.size_bytes = header.size
        self.max_timestamp = header.max_timestamp


def _set_log_fields(batch: WireBatch | WireBatchHeader, header: record_batch.BatchHeader) -> None:
    """The fields the core's log reads of a stored batch (broker_core.records.BatchHeader)."""
    batch.base_offset = header.base_offset
    # (the last offset delta, not the count: a cleaned batch keeps its original last offset)
    batch.next_offset = header.base_offset + header.last_offset_delta + 1
    batch.leader_epoch = header.partition_leader_epoch
    batch.producer_id = header.producer_id
    batch.producer_epoch = header.producer_epoch
    batch.base_sequence = header.base_sequence


def parse_records(data: bytes | bytearray | memoryview, max_bytes: int = compression.DEFAULT_MAX_BYTES) -> list[WireBatch]:
    """Every batch of a produce request's records field, each validated."""
    batches, position = [], 0
    while position < len(data):
        batch, position = WireBatch.parse(data, position, True, max_bytes)
        batches.append(batch)
    return batches
