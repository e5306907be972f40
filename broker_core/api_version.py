"""Kafka's inter-broker protocol versions (inter.broker.protocol.version), in order.

A broker writes some records in the oldest format its peers can still read: the value
versions of __consumer_offsets (broker_core/group_records.py) are chosen by comparing
this setting with fixed versions, as 2.7.0's GroupMetadataManager does. The names and
their order are 2.7.0's core/src/main/scala/kafka/api/ApiVersion.scala (allVersions),
followed by 2.8 and 3.0's (3.0.0's ApiVersion.scala), so that the ``kafka-3.0`` profile
can name its own; those only ever compare as newer than every 2.7 threshold.
"""
from __future__ import annotations

VERSIONS: tuple[str, ...] = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0",
    "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0",
    "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
    "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1",
    "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0",
    "2.7-IV0", "2.7-IV1", "2.7-IV2",
    "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1",
)
LATEST_2_7 = "2.7-IV2"  # KafkaConfig's default inter.broker.protocol.version in 2.7.0


def _version_map() -> dict[str, int]:
    """ApiVersion.versionMap: every full version, and every short version ("2.1",
    "0.10.1") for the last of its versions."""
    found: dict[str, int] = {}
    for index, name in enumerate(VERSIONS):
        found[name] = index
        found[name.split("-")[0]] = index  # later versions of one short version overwrite earlier ones
    return found


_VERSION_MAP = _version_map()


class UnknownApiVersion(ValueError):
    """A version string ApiVersion.apply refuses (its IllegalArgumentException)."""


def api_version(text: str) -> int:
    """The position of ``text`` among VERSIONS, read as ApiVersion.apply does: the first
    three dot-separated segments of a 0.x version and the first two of a later one, so
    "2.7.0" and "2.7" are 2.7-IV2 and "0.10.1.1" is 0.10.1-IV2."""
    segments = text.split(".")
    key = ".".join(segments[:3] if text.startswith("0.") else segments[:2])
    if key not in _VERSION_MAP:
        raise UnknownApiVersion(f"Version `{text}` is not a valid version")
    return _VERSION_MAP[key]


def at_least(text: str, threshold: str) -> bool:
    """``text`` >= ``threshold`` (a full version name of VERSIONS)."""
    return api_version(text) >= VERSIONS.index(threshold)
