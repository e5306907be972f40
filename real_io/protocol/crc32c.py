"""CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of record batch v2.

The ``crc32c`` package (hardware-accelerated) is used when installed; the table-driven
pure-Python version is the fallback and is tested against the same known vectors.
"""
from __future__ import annotations

from typing import Callable

_POLY = 0x82F63B78


def _make_table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c_python(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_accelerated: Callable[[bytes | bytearray | memoryview], int] | None
try:
    from crc32c import crc32c as _accelerated
except ImportError:  # pragma: no cover - the package is a declared dependency
    _accelerated = None


def crc32c(data: bytes | bytearray | memoryview) -> int:
    if _accelerated is not None:
        return _accelerated(data)
    return crc32c_python(data)
