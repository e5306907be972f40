from broker_core.effects import DeleteFile, ReplaceFile, TruncateFile, WriteBytes
from broker_core.records import Record, RecordBatch
from broker_core.segment_format import decode_batch, encode_batch, materialize
from broker_core.types import TopicPartition
from tests.broker_core.logs import AppliedLog, recover

TP = TopicPartition("t", 0)


def records(*values):
    return tuple(Record(None, v) for v in values)


def files_of(effects_list, files=None):
    """Apply write/truncate/delete/replace effects to a dict of bytes, as a disk would."""
    files = {} if files is None else files
    for effect in effects_list:
        if isinstance(effect, WriteBytes):
            data = bytearray(files.get(effect.path, b""))
            written = materialize(effect.data)
            data[effect.position:effect.position + len(written)] = written
            files[effect.path] = bytes(data)
        elif isinstance(effect, TruncateFile):
            files[effect.path] = files[effect.path][:effect.size]
        elif isinstance(effect, DeleteFile):
            files.pop(effect.path, None)
        elif isinstance(effect, ReplaceFile):
            files[effect.path] = effect.data
    return files


def build(batches, segment_bytes=1 << 30):
    log = AppliedLog(TP, segment_bytes)
    effects = []
    for epoch, values in batches:
        _, eff = log.append_as_leader(records(*values), epoch)
        effects += eff
    return log, effects


def test_appends_assign_offsets_and_track_epochs():
    log, _ = build([(0, ["a", "b"]), (0, ["c"]), (3, ["d"])])
    assert log.log_end_offset == 4
    assert [(o, r.value) for o, r in log.records()] == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]
    assert log.epochs.entries == [(0, 0), (3, 3)]


def test_truncation_removes_whole_batches_at_or_after_the_offset():
    log, _ = build([(0, ["a", "b"]), (1, ["c", "d"]), (2, ["e"])])
    effects = log.truncate_to(3)  # inside the second batch: that batch goes too
    assert log.log_end_offset == 2
    assert [r.value for _, r in log.records()] == ["a", "b"]
    assert log.epochs.entries == [(0, 0)]
    assert any(isinstance(e, TruncateFile) for e in effects)
    assert log.truncate_to(10) == []


def test_read_respects_the_upper_offset_and_returns_at_least_one_batch():
    log, _ = build([(0, ["a"]), (0, ["b"]), (0, ["c"])])
    assert [b.base_offset for b in log.read(0, 10**6, upper_offset=2)] == [0, 1]
    assert [b.base_offset for b in log.read(1, 1)] == [1]
    assert log.read(3, 10**6) == ()


def test_segments_roll_and_truncation_deletes_later_segments():
    log, effects = build([(0, [f"v{i}"]) for i in range(10)], segment_bytes=120)
    assert len(log.segments) > 2
    files = files_of(effects)
    effects = log.truncate_to(2)
    files_of(effects, files)
    assert log.log_end_offset == 2
    assert len([p for p in files if p.endswith(".log")]) == len(log.segments)


def test_recovery_rebuilds_the_log_from_its_files():
    log, effects = build([(0, ["a", "b"]), (1, ["c"])], segment_bytes=80)
    files = files_of(effects)
    recovered, fix, report = recover(TP, files, 80)
    assert recovered.records() == log.records()
    assert recovered.epochs.entries == log.epochs.entries
    assert fix == [] and report.truncated_bytes == 0


def test_recovery_truncates_a_torn_write():
    log, effects = build([(0, ["a"]), (0, ["b"]), (0, ["c"])])
    files = files_of(effects)
    path = log.segments[0].path
    files[path] = files[path][:-5]  # the last batch only partly reached the disk
    recovered, fix, report = recover(TP, files, 1 << 30)
    assert [r.value for _, r in recovered.records()] == ["a", "b"]
    assert report.truncated_bytes > 0 and "truncated" in report.reason
    assert TruncateFile(path, len(files[path]) - report.truncated_bytes) in fix


def test_recovery_stops_at_a_bit_flip_caught_by_the_crc():
    log, effects = build([(0, ["aaaa"]), (0, ["bbbb"]), (0, ["cccc"])])
    files = files_of(effects)
    path = log.segments[0].path
    data = bytearray(files[path])
    _, second_start = decode_batch(data, 0)
    data[second_start + 30] ^= 0x01  # inside the second batch's payload
    files[path] = bytes(data)
    recovered, _, report = recover(TP, files, 1 << 30)
    assert [r.value for _, r in recovered.records()] == ["aaaa"]
    assert "crc" in report.reason


def test_recovery_stops_at_garbage_after_the_last_batch():
    log, effects = build([(0, ["a"])])
    files = files_of(effects)
    path = log.segments[0].path
    files[path] = files[path] + b"\x00\x01garbage" * 3
    recovered, _, report = recover(TP, files, 1 << 30)
    assert recovered.log_end_offset == 1
    assert report.truncated_bytes == len(b"\x00\x01garbage" * 3)


def test_flush_tracks_the_durable_offset():
    log, _ = build([(0, ["a"]), (0, ["b"])])
    assert log.durable_offset == 0
    fsyncs = log.flush(now_ms=5)
    assert fsyncs and all(f.path == log.segments[-1].path for f in fsyncs)
    assert log.fsync_completed(fsyncs[-1].path, fsyncs[-1].token)
    assert log.durable_offset == 2
    assert log.flush(now_ms=6) == []


def test_batch_encoding_round_trip():
    batch = RecordBatch(7, 2, (Record("k", "v", 100), Record(None, None, 0), Record("ключ", "значение")))
    decoded, end = decode_batch(encode_batch(batch), 0)
    assert decoded == batch and end == len(encode_batch(batch))


def test_recovery_deletes_the_segments_after_a_damaged_one():
    log, effects = build([(0, [f"v{i}"]) for i in range(10)], segment_bytes=120)
    files = files_of(effects)
    first, second = log.segments[0].path, log.segments[1].path
    files[second] = files[second][:-3]  # a torn batch in the second segment
    recovered, fix, report = recover(TP, files, 120)
    later = tuple(s.path for s in log.segments[2:])
    assert later and report.deleted_segments == later
    assert all(DeleteFile(path) in fix for path in later)
    assert recovered.log_end_offset < log.log_end_offset and first in files
