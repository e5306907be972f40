"""The record batch compression codecs (attributes bits 0-2), as Kafka's clients write them.

none 0, gzip 1 (stdlib zlib, gzip framing), snappy 2 (cramjam; written in xerial's
framing as Kafka's Java client writes it, read either framed or raw since librdkafka
may send raw blocks), lz4 3 (the ``lz4`` package's frame format with independent
blocks, which Kafka's KafkaLZ4BlockInputStream requires), zstd 4 (``zstandard``).

Decompression is bounded by ``max_bytes`` so that a small compressed batch cannot
expand into unbounded memory; every failure is a ProtocolError.
"""
from __future__ import annotations

import io
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from real_io.protocol.errors import ProtocolError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        packer = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        blocks = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
            blocks.append(struct.pack(">i", len(block)) + block)
        return b"".join(blocks)
    if codec == LZ4:
        return lz4.frame.compress(data, block_linked=False, store_size=False)
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    raise ProtocolError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    try:
        out = _decompress(codec, data, max_bytes)
    except ProtocolError:
        raise
    except Exception as exc:  # each library has its own error types; all mean bad input
        raise ProtocolError(f"bad {NAMES.get(codec, codec)} data: {exc}") from None
    if len(out) > max_bytes:
        raise ProtocolError(f"{NAMES[codec]} data expands beyond {max_bytes} bytes")
    return out


def _decompress(codec: int, data: bytes, max_bytes: int) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = unpacker.decompress(data, max_bytes + 1)
        if len(out) <= max_bytes and not unpacker.eof:
            raise ProtocolError("truncated gzip data")
        return out
    if codec == SNAPPY:
        return _snappy_decompress(data, max_bytes)
    if codec == LZ4:
        unpacker = lz4.frame.LZ4FrameDecompressor()
        out = unpacker.decompress(data, max_length=max_bytes + 1)
        if len(out) <= max_bytes and not unpacker.eof:
            raise ProtocolError("truncated lz4 data")
        return out
    if codec == ZSTD:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
            return reader.read(max_bytes + 1)
    raise ProtocolError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes, max_bytes: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, max_bytes)
    if len(data) < len(_XERIAL_HEADER):
        raise ProtocolError("truncated snappy (xerial) header")
    parts, position, total = [], len(_XERIAL_HEADER), 0
    while position < len(data):
        if position + 4 > len(data):
            raise ProtocolError("truncated snappy (xerial) block length")
        (size,) = struct.unpack_from(">i", data, position)
        position += 4
        if size < 0 or position + size > len(data):
            raise ProtocolError(f"snappy (xerial) block length {size} beyond the data")
        block = _snappy_block(data[position:position + size], max_bytes - total)
        total += len(block)
        parts.append(block)
        position += size
    return b"".join(parts)


def _snappy_block(data: bytes, max_bytes: int) -> bytes:
    """A raw snappy block; its varint preamble gives the size, checked before expanding."""
    size = shift = 0
    for index in range(min(5, len(data))):
        size |= (data[index] & 0x7F) << shift
        shift += 7
        if not data[index] & 0x80:
            break
    else:
        raise ProtocolError("bad snappy length preamble")
    if size > max_bytes:
        raise ProtocolError(f"snappy data expands to {size} bytes, beyond {max_bytes}")
    return bytes(cramjam.snappy.decompress_raw(data))
