"""The primitive types of Kafka's old-style (non-flexible) schemas, read and written sans
I/O: big-endian integers; STRING as an int16 length and UTF-8; NULLABLE_STRING with
length -1 for null; BYTES as an int32 length. The rules are 2.7.0's
clients/src/main/java/org/apache/kafka/common/protocol/types/Type.java.

``StructReader`` raises the error class its caller gives it, so that each format built
on it (the __consumer_offsets records: broker_core/group_records.py) reports every
malformed input with one exception of its own (Kafka: Schema.read turns every failure
into a SchemaException), never an IndexError or struct.error.
"""
from __future__ import annotations

import struct

MAX_STRING_BYTES = 32767  # Short.MAX_VALUE: Type.STRING's writer refuses longer strings


class StructReader:
    """Reads fields from the front of ``data``; running past the end, a negative length
    where none is allowed, raise ``error``."""

    def __init__(self, data: bytes, error: type[Exception]) -> None:
        self.data = bytes(data)
        self.position = 0
        self.error = error

    def _take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise self.error(f"need {size} bytes at {self.position}, {len(self.data) - self.position} left")
        chunk = self.data[self.position:self.position + size]
        self.position += size
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str:
        length = self.int16()
        if length < 0:
            raise self.error(f"String length {length} cannot be negative")
        return self._take(length).decode("utf-8", "replace")  # Java's decoder replaces bad UTF-8 too

    def nullable_string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self._take(length).decode("utf-8", "replace")

    def bytes_(self) -> bytes:
        length = self.int32()
        if length < 0:
            raise self.error(f"Bytes size {length} cannot be negative")
        return self._take(length)

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length == -1 else self._take(length)  # other negative sizes fail in _take

    def count(self) -> int:
        """A non-nullable array's length. Loops over it stop at the data's end (each
        element reads at least one byte), so a huge count costs no more than the bytes
        there are."""
        length = self.int32()
        if length < 0:
            raise self.error(f"Array size {length} cannot be negative")
        return length


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(text: str) -> bytes:
    """Type.STRING. A lone surrogate becomes '?', as Java's String.getBytes(UTF_8) does."""
    encoded = text.encode("utf-8", "replace")
    if len(encoded) > MAX_STRING_BYTES:
        raise ValueError(f"String length {len(encoded)} is larger than the maximum string length.")
    return int16(len(encoded)) + encoded


def nullable_string(text: str | None) -> bytes:
    return int16(-1) if text is None else string(text)


def bytes_(data: bytes) -> bytes:
    return int32(len(data)) + bytes(data)


def nullable_bytes(data: bytes | None) -> bytes:
    return int32(-1) if data is None else bytes_(data)
