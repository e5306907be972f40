"""The shared client-history vocabulary (analysis/client_history.py) and the record-at-a-time
final read (analysis/read_records.py RecordList) that the real binding uses: the fields in
the trace's order, the fail-or-info rule, and the read's window."""
from analysis.client_history import FAIL, INFO, OUTCOME_UNKNOWN, send_completion, send_error_outcome
from analysis.read_records import RecordList
from broker_core.errors import ErrorCode


def test_a_send_completion_writes_the_fields_given_in_the_trace_order():
    fields = send_completion(3, "t-0", None, "REQUEST_TIMED_OUT", 7, OUTCOME_UNKNOWN, "_TRANSPORT")
    assert list(fields) == ["f", "op", "partition", "error", "error_code", "reason", "client_error"]
    assert list(send_completion(3, "t-0", 12)) == ["f", "op", "partition", "offset"]


def test_a_send_fails_only_when_no_attempt_may_have_been_appended():
    assert send_error_outcome(ErrorCode.NOT_ENOUGH_REPLICAS, -1, unknown_before=False) == FAIL
    assert send_error_outcome(ErrorCode.NOT_ENOUGH_REPLICAS, -1, unknown_before=True) == INFO
    assert send_error_outcome(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, unknown_before=False) == INFO
    assert send_error_outcome(ErrorCode.NOT_LEADER_OR_FOLLOWER, 1, unknown_before=False) == FAIL


def test_a_record_list_keeps_the_window_from_its_log_start_to_its_end():
    read = RecordList(2, 6)
    assert not read.add(1, "before the log start") and not read.complete
    assert read.add(2, "a") and read.add(4, None)  # a compacted gap at 3
    assert not read.add(4, "again") and not read.add(6, "at the end")
    assert read.add(5, "c") and read.complete
    assert read.records == [[2, "a"], [4, None], [5, "c"]]
    assert RecordList(3, 3).complete  # nothing to read
