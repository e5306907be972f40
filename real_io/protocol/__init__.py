"""The Kafka wire protocol as a pure codec: bytes in, dicts and core batches out.

No sockets, no event loop: the asyncio server (``real_io/server.py`` and
``connection.py``) frames bytes and hands them here. ``apis`` holds the supported
versions, headers and frames; ``schema`` the generic table-driven encoder/decoder;
``schemas`` the tables written from Kafka's message definitions; ``record_batch`` record
batch v2; every decoding failure is a ProtocolError.
"""
from real_io.protocol.errors import ProtocolError, UnsupportedVersionError

__all__ = ["ProtocolError", "UnsupportedVersionError"]
