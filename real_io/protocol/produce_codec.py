"""The produce request's body and the produce response, v3-8, written out by hand.

The generic codec (schema.py) walks a message table field by field; for the request
that carries every record a broker stores, and its answer, that walk cost more than
the request's CRC: the broker receives a megabyte and writes it to the page cache
between two of them, so its code runs with cold caches. These two functions do the
same for the one message shape (non-flexible versions 3 to 8 of Kafka 2.7.0's
ProduceRequest.json / ProduceResponse.json, as schemas.py lists them) and must give
exactly what the generic codec gives: tests/real_io/test_protocol_codec.py compares
them on generated bodies of every version. Anything the fast encoder does not expect
(a missing or mistyped field) goes to the generic encoder, which says what is wrong.
"""
from __future__ import annotations

import struct

from real_io.protocol.primitives import Reader, Writer

FIRST_VERSION, LAST_VERSION = 3, 8
_PARTITION_V3 = struct.Struct(">ihqq")  # partition_index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log_start_offset
_COUNT = struct.Struct(">i")
_PARTITION_FIELDS = {"partition_index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset",
                     "record_errors", "error_message"}


def decode_request_body(reader: Reader) -> dict:
    """What ``Message.decode`` gives for a ProduceRequest v3-8 body: records fields are
    views of the frame. ProtocolError (from the reader) for anything malformed."""
    body: dict[str, object] = {"transactional_id": reader.string(True), "acks": reader.int16(), "timeout_ms": reader.int32()}
    topics = []
    for _ in range(reader.array_length(False, False)):
        name = reader.string(False)
        partitions = []
        for _ in range(reader.array_length(False, False)):
            index = reader.int32()
            partitions.append({"partition_index": index, "records": reader.bytes32(True, True)})
        topics.append({"name": name, "partitions": partitions})
    body["topics"] = topics
    return body


def encode_response_body(writer: Writer, version: int, body: dict) -> bool:
    """A ProduceResponse v3-8 body appended to ``writer``; False, with nothing
    appended, when ``body`` is not the shape expected (the caller then encodes it the
    generic way)."""
    start = len(writer.out)
    try:
        _encode(writer, version, body)
        return True
    except (KeyError, TypeError, AttributeError, struct.error, UnicodeEncodeError):
        del writer.out[start:]
        return False


def _encode(writer: Writer, version: int, body: dict) -> None:
    out = writer.out
    if body.keys() != {"responses", "throttle_time_ms"}:
        raise KeyError("fields")
    responses = body["responses"]
    out += _COUNT.pack(len(responses))
    for topic in responses:
        if topic.keys() != {"name", "partitions"}:
            raise KeyError("fields")
        name = topic["name"].encode("utf-8")
        out += struct.pack(">h", len(name))
        out += name
        partitions = topic["partitions"]
        out += _COUNT.pack(len(partitions))
        for p in partitions:
            if p.keys() != _PARTITION_FIELDS:
                raise KeyError("fields")
            if version >= 5:
                out += _PARTITION_V5.pack(p["partition_index"], p["error_code"], p["base_offset"],
                                          p["log_append_time_ms"], p["log_start_offset"])
            else:
                out += _PARTITION_V3.pack(p["partition_index"], p["error_code"], p["base_offset"],
                                          p["log_append_time_ms"])
            if version >= 8:
                if p["record_errors"] or p["error_message"] is not None:
                    raise KeyError("record errors and messages go the generic way")
                out += b"\x00\x00\x00\x00\xff\xff"  # no record errors, a null error message
    out += _COUNT.pack(body["throttle_time_ms"])
