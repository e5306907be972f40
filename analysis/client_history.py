"""The client-history events a client writes (docs/trace-schema.md, Client history), for
every binding: the operation and completion types, the reasons, the fields of each
event, in the order the trace writes them, and which produce errors make a ``fail``.

Both bindings build their history events here: the simulation's clients (sim/clients.py,
sim/producer.py, sim/consumer.py) and the real ones (real_io/real_clients.py). The
builders return a fresh dict per event, in the field order the traces have always had;
analysis/history.py reads them back. Compiled with the simulation (isrlab/compiled.py):
the producer writes two of these events per batch.
"""
from __future__ import annotations

from typing import Any

from broker_core.errors import ErrorCode, is_definite_produce_failure

# the event types of an operation: its invoke, then at most one completion
INVOKE = "invoke"
OK = "ok"  # it happened
FAIL = "fail"  # it certainly did not happen
INFO = "info"  # unknown

# the operations (the ``f`` field)
SEND = "send"
POLL = "poll"
READ = "read"

# the node of the final read's client
READER = "reader"

# the ``reason`` of an ``info`` (and of a few ``fail``)
ACKS_0 = "acks=0"
CLIENT_TIMEOUT = "client_timeout"
CONNECTION_RESET = "connection_reset"
CONNECTION_REFUSED = "connection_refused"
OUTCOME_UNKNOWN = "outcome_unknown"
RUN_ENDED = "run_ended"
DELIVERY_TIMEOUT = "delivery_timeout"
FINAL_READ_TIMED_OUT = "final_read_timed_out"
# an ``ok`` with offset -1: the Java client takes DUPLICATE_SEQUENCE_NUMBER for success
DUPLICATE_SEQUENCE_NUMBER = "duplicate_sequence_number"


def may_have_appended(error: ErrorCode, acks: int) -> bool:
    """Whether a produce answered with ``error`` may still have appended its records: its
    outcome is then unknown (broker_core/errors.py is_definite_produce_failure)."""
    return not is_definite_produce_failure(error, acks)


def completion_of(unknown: bool) -> str:
    """The completion of an operation that did not succeed: ``info`` if any attempt of it
    may have happened, else ``fail``."""
    return INFO if unknown else FAIL


def send_error_outcome(error: ErrorCode, acks: int, unknown_before: bool) -> str:
    """The completion of a send whose last answer was ``error``, ``unknown_before`` saying
    whether an earlier attempt may have been appended."""
    return completion_of(unknown_before or may_have_appended(error, acks))


def send_invoke(op: int, partition: str, values: list, acks: int, keys: list | None = None) -> dict[str, Any]:
    """``values[i]`` None is a tombstone; ``keys`` (a keyed producer's, ``keys[i]`` the key
    of ``values[i]``) is written only when given, so keyless traces stay as they were."""
    fields: dict[str, Any] = {"f": SEND, "op": op, "partition": partition, "values": values, "acks": acks}
    if keys is not None:
        fields["keys"] = keys
    return fields


def send_completion(op: int, partition: str, offset: int | None = None, error: str | None = None,
                    error_code: int | None = None, reason: str | None = None,
                    client_error: str | None = None) -> dict[str, Any]:
    """The fields of a send's ``ok``, ``fail`` or ``info``: those given, in this order."""
    fields: dict[str, Any] = {"f": SEND, "op": op, "partition": partition}
    if offset is not None:
        fields["offset"] = offset
    if error is not None:
        fields["error"] = error
        fields["error_code"] = error_code
    if reason:
        fields["reason"] = reason
    if client_error is not None:
        fields["client_error"] = client_error
    return fields


def poll_invoke(op: int, positions: dict[str, int]) -> dict[str, Any]:
    return {"f": POLL, "op": op, "positions": positions}


def poll_ok(op: int, records: dict[str, Any], high_watermarks: dict[str, int],
            errors: dict[str, str] | None = None, keys: dict[str, list] | None = None) -> dict[str, Any]:
    """``errors`` is written only when a partition failed, ``keys`` (partition -> the key
    of each of its records, in order) only when some record had a key."""
    fields: dict[str, Any] = {"f": POLL, "op": op, "records": records, "high_watermarks": high_watermarks}
    if errors:
        fields["errors"] = errors
    if keys:
        fields["keys"] = keys
    return fields


def poll_info(op: int, reason: str) -> dict[str, Any]:
    return {"f": POLL, "op": op, "reason": reason}


def read_invoke(op: int, partition: str) -> dict[str, Any]:
    """The final read of one partition begins."""
    return {"f": READ, "op": op, "partition": partition}


def read_ok(op: int, partition: str, records: Any, high_watermark: int, keys: list | None = None) -> dict[str, Any]:
    """``records``: ``[[offset, value], ...]``, as a list or as its JSON text (RawJson);
    ``keys``, the key of each record, only when some record had one."""
    fields: dict[str, Any] = {"f": READ, "op": op, "partition": partition, "records": records,
                              "high_watermark": high_watermark}
    if keys is not None:
        fields["keys"] = keys
    return fields


def read_gave_up(op: int, partition: str, records: Any, keys: list | None = None) -> dict[str, Any]:
    """The final read ran out of time: an ``info`` with what it got."""
    fields: dict[str, Any] = {"f": READ, "op": op, "partition": partition, "reason": FINAL_READ_TIMED_OUT,
                              "records": records}
    if keys is not None:
        fields["keys"] = keys
    return fields
