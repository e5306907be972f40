"""The codec's one error type: whatever a peer sends, decoding fails with ProtocolError."""
from __future__ import annotations


class ProtocolError(ValueError):
    """Malformed or unsupported bytes from a peer (or a value the codec cannot encode)."""


class UnsupportedVersionError(ProtocolError):
    """A request header named an API key or version this broker does not offer. It keeps
    the header's fields, so that the broker can still answer (ApiVersions answers an
    unsupported version with UNSUPPORTED_VERSION and the versions it does support)."""

    def __init__(self, message: str, api_key: int, api_version: int, correlation_id: int):
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
