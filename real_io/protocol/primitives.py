"""Kafka's primitive types (big-endian ints, zigzag varints, strings, bytes, arrays,
tagged fields), read from a bounded buffer and written to a bytearray.

Every length read is checked against the bytes that remain before anything is
allocated, so a negative or huge length from a peer is a ProtocolError, never a
MemoryError or a struct.error.
"""
from __future__ import annotations

import struct
import uuid
from typing import Generic, Literal, TypeVar, overload

from real_io.protocol.errors import ProtocolError

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_U16, _U32, _F64 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">d")


class Reader:
    """Reads primitives from ``data[pos:end]``; every read past ``end`` raises."""
    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or n > self.end - start:
            raise ProtocolError(f"need {n} bytes at offset {start}, {self.end - start} remain")
        self.pos = start + n
        return start

    def _fixed(self, fmt: struct.Struct) -> int:
        return fmt.unpack_from(self.data, self._take(fmt.size))[0]

    def int8(self) -> int: return self._fixed(_I8)
    def int16(self) -> int: return self._fixed(_I16)
    def int32(self) -> int: return self._fixed(_I32)
    def int64(self) -> int: return self._fixed(_I64)
    def uint16(self) -> int: return self._fixed(_U16)
    def uint32(self) -> int: return self._fixed(_U32)
    def float64(self) -> float: return self._fixed(_F64)

    def boolean(self) -> bool:
        return self._fixed(_I8) != 0

    def raw(self, n: int) -> bytes:
        start = self._take(n)
        return bytes(self.data[start:start + n])

    def view(self, n: int) -> memoryview:
        """The next ``n`` bytes as a view of the buffer, not a copy."""
        start = self._take(n)
        return memoryview(self.data)[start:start + n]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    def unsigned_varint(self, max_bytes: int = 5) -> int:
        """LEB128: seven bits a byte, low bits first; at most 5 bytes (10 for a long)."""
        result = shift = 0
        for _ in range(max_bytes):
            byte = self.data[self._take(1)]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
        raise ProtocolError(f"varint longer than {max_bytes} bytes at offset {self.pos}")

    def varint(self) -> int:
        raw = self.unsigned_varint(5) & 0xFFFFFFFF
        return (raw >> 1) ^ -(raw & 1)

    def varlong(self) -> int:
        raw = self.unsigned_varint(10) & 0xFFFFFFFFFFFFFFFF
        return (raw >> 1) ^ -(raw & 1)

    # Lengths: classic ones are int16/int32 with -1 for null; compact ones are an
    # unsigned varint holding length + 1, with 0 for null.
    def _length(self, n: int, nullable: bool, what: str) -> int | None:
        if n == -1 and nullable:
            return None
        if n < 0:
            raise ProtocolError(f"{'null' if n == -1 else 'negative'} {what} length {n} at offset {self.pos}")
        if n > self.remaining:
            raise ProtocolError(f"{what} length {n} exceeds the {self.remaining} bytes that remain")
        return n

    # Not nullable, a string or an array length is never None: the overloads say so.
    @overload
    def string(self, nullable: Literal[False] = False) -> str: ...
    @overload
    def string(self, nullable: bool) -> str | None: ...

    def string(self, nullable: bool = False) -> str | None:
        return self._text(self._length(self.int16(), nullable, "string"))

    def compact_string(self, nullable: bool = False) -> str | None:
        return self._text(self._length(self.unsigned_varint() - 1, nullable, "string"))

    def _text(self, n: int | None) -> str | None:
        if n is None:
            return None
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string is not UTF-8: {exc}") from None

    def bytes32(self, nullable: bool = False, view: bool = False) -> bytes | memoryview | None:
        """Bytes with an int32 length (-1 = null); ``view``: a view of the buffer."""
        n = self._length(self.int32(), nullable, "bytes")
        return None if n is None else self.view(n) if view else self.raw(n)

    def compact_bytes(self, nullable: bool = False, view: bool = False) -> bytes | memoryview | None:
        n = self._length(self.unsigned_varint() - 1, nullable, "bytes")
        return None if n is None else self.view(n) if view else self.raw(n)

    @overload
    def array_length(self, compact: bool, nullable: Literal[False] = False) -> int: ...
    @overload
    def array_length(self, compact: bool, nullable: bool) -> int | None: ...

    def array_length(self, compact: bool, nullable: bool = False) -> int | None:
        """An array's element count; every element takes at least one byte, so a count
        above the remaining bytes is malformed and rejected before any allocation."""
        n = self.unsigned_varint() - 1 if compact else self.int32()
        return self._length(n, nullable, "array")

    def tagged_fields(self) -> dict[int, bytes]:
        """The tagged-field section of a flexible struct: tag -> raw bytes."""
        fields: dict[int, bytes] = {}
        count = self.unsigned_varint()
        if count > self.remaining:
            raise ProtocolError(f"{count} tagged fields but {self.remaining} bytes remain")
        last = -1
        for _ in range(count):
            tag = self.unsigned_varint()
            if tag <= last:
                raise ProtocolError(f"tagged field {tag} out of order")
            last = tag
            fields[tag] = self.raw(self.unsigned_varint())
        return fields


P = TypeVar("P")


class Splice(Generic[P]):
    """``size`` bytes of a bytes or records field that the encoder does not hold: the
    caller sends them itself (the server: file regions, with sendfile). ``parts`` is
    the caller's, opaque here (its type is the caller's: a list of PinnedRegion)."""
    __slots__ = ("size", "parts")

    def __init__(self, size: int, parts: P):
        self.size = size
        self.parts = parts

    def __len__(self) -> int:
        return self.size


class Writer:
    """Appends primitives to a bytearray; a ``Splice`` in a bytes field leaves a gap,
    listed in ``splices`` as (position in ``out``, splice)."""
    __slots__ = ("out", "splices")

    def __init__(self):
        self.out = bytearray()
        self.splices: list[tuple[int, Splice[object]]] = []

    def getvalue(self) -> bytes:
        return bytes(self.out)

    def _fixed(self, fmt: struct.Struct, value: int | float) -> None:
        try:
            self.out += fmt.pack(value)
        except struct.error as exc:
            raise ProtocolError(f"cannot encode {value!r}: {exc}") from None

    def int8(self, v: int) -> None: self._fixed(_I8, v)
    def int16(self, v: int) -> None: self._fixed(_I16, v)
    def int32(self, v: int) -> None: self._fixed(_I32, v)
    def int64(self, v: int) -> None: self._fixed(_I64, v)
    def uint16(self, v: int) -> None: self._fixed(_U16, v)
    def uint32(self, v: int) -> None: self._fixed(_U32, v)
    def float64(self, v: float) -> None: self._fixed(_F64, v)

    def boolean(self, v: bool) -> None:
        self.out.append(1 if v else 0)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data

    def uuid(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def unsigned_varint(self, v: int) -> None:
        if v < 0:
            raise ProtocolError(f"unsigned varint cannot hold {v}")
        while v > 0x7F:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def varint(self, v: int) -> None:
        if not -2**31 <= v < 2**31:
            raise ProtocolError(f"varint cannot hold {v}")
        self.unsigned_varint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -2**63 <= v < 2**63:
            raise ProtocolError(f"varlong cannot hold {v}")
        self.unsigned_varint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = v.encode("utf-8")
        self.int16(len(data))
        self.out += data

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.unsigned_varint(0)
            return
        data = v.encode("utf-8")
        self.unsigned_varint(len(data) + 1)
        self.out += data

    def bytes32(self, v: bytes | None) -> None:
        if v is None:
            self.int32(-1)
            return
        self.int32(len(v))
        self._content(v)

    def _content(self, v) -> None:
        if type(v) is Splice:
            self.splices.append((len(self.out), v))
        else:
            self.out += v

    def compact_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.unsigned_varint(0)
            return
        self.unsigned_varint(len(v) + 1)
        self._content(v)

    def array_length(self, n: int | None, compact: bool) -> None:
        if compact:
            self.unsigned_varint(0 if n is None else n + 1)
        else:
            self.int32(-1 if n is None else n)

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        self.unsigned_varint(len(fields))
        for tag in sorted(fields):
            self.unsigned_varint(tag)
            self.unsigned_varint(len(fields[tag]))
            self.out += fields[tag]
