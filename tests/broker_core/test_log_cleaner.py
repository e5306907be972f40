"""The log cleaner running in the broker (issue 22, compaction slice 3), on the in-test
router: each rule names the Kafka 2.7.0 file and function it follows.

- core/src/main/scala/kafka/log/LogCleaner.scala, CleanerThread.doWork: clean the
  filthiest log, else sleep log.cleaner.backoff.ms; each replica cleans its own log.
- core/src/main/scala/kafka/log/Log.scala, replaceSegments: the cleaned segment written
  as .cleaned, renamed .swap, the old segments deleted, .swap renamed to the segment.
- core/src/main/scala/kafka/log/Log.scala, loadSegments / completeSwapOperations: at
  recovery a .swap is completed and .cleaned files deleted.
- core/src/main/scala/kafka/log/LogCleanerManager.scala, updateCheckpoints: the
  cleaner-offset-checkpoint.
- core/src/main/scala/kafka/log/LogValidator.scala, validateKey: a compacted topic
  refuses a record without a key (INVALID_RECORD).
"""
from __future__ import annotations

from broker_core.cleaned_batch import record_offsets
from broker_core.config import topic_config
from broker_core.effects import DeleteFile, RenameFile, ReplaceFile
from broker_core.errors import ErrorCode
from broker_core.log_cleaner import CLEANER_CHECKPOINT
from broker_core.log_manager import decode_offset_checkpoint
from broker_core.messages import ProduceRequest
from broker_core.records import Record, RecordBatch
from broker_core.storage import MemoryFiles
from broker_core.types import TopicPartition
from broker_core.log_loader import recover_log
from tests.harness import Cluster

TP = TopicPartition("t", 0)
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": 400, "min.cleanable.dirty.ratio": 0.01}


def compacted_cluster(brokers=(1, 2, 3), **overrides) -> Cluster:
    cluster = Cluster(brokers=brokers, replication_factor=len(brokers),
                      config={"log.cleaner.backoff.ms": 100, "log.cleaner.step.records": 7})
    cluster.topic_configs["t"] = topic_config(cluster.config, {**COMPACTED, **overrides})
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    return cluster


def produce_keyed(cluster: Cluster, pairs, acks: int = -1) -> ErrorCode | None:
    leader = cluster.leader()
    assert leader is not None
    cluster._correlation += 1
    cid = cluster._correlation
    request = ProduceRequest(cid, acks, 30000, {TP: tuple(Record(k, v, 10) for k, v in pairs)})
    cluster.send(leader, request)
    cluster.wait_for(lambda: cid in cluster.responses, 10000, step_ms=1)
    return cluster.responses[cid].partitions[TP].error


def read_back(cluster: Cluster, broker: int) -> list[tuple[int, str | None, str | None]]:
    log = cluster.partition(broker).log
    return [(o, k, v) for b in log.load(log.log_start_offset)
            for o, k, v in zip(record_offsets(b), b.records.keys or [None] * len(b.records), b.records.values)]


def write_history(cluster: Cluster, keys: int = 5, rounds: int = 12) -> dict[str, tuple[int, str | None]]:
    """Writes every key ``rounds`` times; returns each key's last value with its offset."""
    for r in range(rounds):
        for k in range(keys):
            assert produce_keyed(cluster, [(f"k{k}", f"v{r}-{k}")]) is ErrorCode.NONE
    return {f"k{k}": f"v{rounds - 1}-{k}" for k in range(keys)}


def test_a_compacted_log_is_cleaned_on_every_replica_keeping_offsets_and_last_values():
    """LogCleaner.CleanerThread.doWork on each broker: each replica cleans its own log;
    offsets never change and the last value of every key survives."""
    cluster = compacted_cluster()
    before = read_back(cluster, 1)
    last = write_history(cluster)
    before = read_back(cluster, cluster.leader())
    cluster.run_for(2000)
    for broker in (1, 2, 3):
        assert cluster.traced("segments_cleaned", partition="t-0") and \
            [f for t, b, f in cluster.traced("segments_cleaned") if b == broker], broker
        after = read_back(cluster, broker)
        assert len(after) < len(before)
        assert set(after) <= set(before)  # every survivor at its own offset, unchanged
        final = {}
        for _, k, v in after:
            final[k] = v
        assert final == last
    cleaned = cluster.traced("segments_cleaned")[0][2]
    assert cleaned["records_after"] < cleaned["records_before"]
    assert cleaned["end_offset"] > 0


def test_no_cleaner_timer_without_a_compacted_topic():
    """The cleaner's timer is set only once a log is compacted: a broker without one
    does what it did before the cleaner existed."""
    cluster = Cluster()
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 5000)
    assert all(("log-cleaner",) not in cluster.timers[b] for b in cluster.brokers)
    compacted = compacted_cluster()
    assert all(("log-cleaner",) in compacted.timers[b] for b in compacted.brokers)


def test_the_swap_is_cleaned_then_swap_then_the_segment_and_the_checkpoint_follows():
    """Log.replaceSegments (2.7.0): the new segment as .cleaned, renamed .swap, the old
    ones deleted, the .swap renamed; then LogCleanerManager.updateCheckpoints."""
    cluster = compacted_cluster(brokers=(1,))
    effects = []
    original = cluster._apply

    def record(broker, out):
        effects.extend(out)
        original(broker, out)
    cluster._apply = record
    write_history(cluster)
    cluster.run_for(2000)
    names = [(type(e).__name__, getattr(e, "path", "")) for e in effects
             if isinstance(e, (RenameFile, DeleteFile, ReplaceFile)) and ".log" in e.path]
    first = next(i for i, (_, p) in enumerate(names) if p.endswith(".cleaned"))
    assert names[first][0] == "ReplaceFile"
    kinds = [kind for kind, p in names[first:] if p.endswith((".cleaned", ".swap"))]
    assert kinds[:2] == ["ReplaceFile", "RenameFile"]
    checkpoint = decode_offset_checkpoint(cluster.disks[1].files[CLEANER_CHECKPOINT])
    ends = [f["end_offset"] for _, _, f in cluster.traced("segments_cleaned")]
    assert checkpoint[TP] == ends[-1]
    assert not [p for p in cluster.disks[1].files if p.endswith((".cleaned", ".swap", ".deleted"))]


def test_a_cleaned_log_recovers_after_a_restart_and_reads_the_same():
    """Log.loadSegments over cleaned segments: gaps between offsets are not a torn log."""
    cluster = compacted_cluster(brokers=(1,))
    write_history(cluster)
    cluster.run_for(2000)
    assert cluster.traced("segments_cleaned")
    before = read_back(cluster, 1)
    cluster.crash(1)
    cluster.run_for(20000)  # the old session expires: the restarted broker may register
    cluster.start(1)
    assert cluster.wait_for(cluster.settled, 5000)
    assert read_back(cluster, 1) == before
    assert not [f for _, _, f in cluster.traced("log_recovered") if f.get("reason")]


def _swap_states(cluster: Cluster):
    """Every prefix of the file steps of one cleaning, applied to a copy of the disk
    from just before it."""
    effects = []
    original = cluster._apply
    snapshot = {}

    def record(broker, out):
        swap = [e for e in out if isinstance(e, ReplaceFile) and e.path.endswith(".cleaned")]
        if swap and not snapshot:
            snapshot.update({p: bytes(d) for p, d in cluster.disks[1].files.items()})
            effects.extend(e for e in out if isinstance(e, (RenameFile, DeleteFile, ReplaceFile)))
        original(broker, out)
    cluster._apply = record
    write_history(cluster)
    cluster.run_for(2000)
    assert snapshot
    for cut in range(len(effects) + 1):
        disk = MemoryFiles(snapshot)
        disk.apply_all(effects[:cut])
        yield cut, snapshot, disk


def test_recovery_after_a_crash_at_every_step_of_a_swap_gives_old_or_new_segments():
    """Log.completeSwapOperations and the deletion of .cleaned files (2.7.0 loadSegments):
    whatever step a crash interrupted, each group of segments reads as before the
    cleaning or after it, never a mix, and every record present is unchanged."""
    cluster = compacted_cluster(brokers=(1,))
    contents = []
    for cut, snapshot, disk in _swap_states(cluster):
        log, effects, report = recover_log(TP, disk.storage, 400, compacted=True)
        disk.apply_all(effects)
        log.storage = disk.storage
        assert report.reason is None, (cut, report)
        contents.append([(o, k, v) for b in log.load(log.log_start_offset)
                         for o, k, v in zip(record_offsets(b), b.records.keys, b.records.values)])
        assert not [p for p in disk.files if p.endswith((".cleaned", ".swap", ".deleted"))], cut
    groups = cluster.traced("segments_cleaned")[0][2]["base_offsets"]
    bounds = [g[0] for g in groups] + [1 << 62]
    old, new = contents[0], contents[-1]
    assert len(new) < len(old)
    for cut, content in enumerate(contents):
        assert set(content) <= set(old), cut
        for low, high in zip(bounds, bounds[1:]):
            part = [r for r in content if low <= r[0] < high]
            assert part in ([r for r in old if low <= r[0] < high], [r for r in new if low <= r[0] < high]), (cut, low)


def test_a_compacted_topic_refuses_a_record_without_a_key():
    """LogValidator.validateKey (2.7.0): INVALID_RECORD, nothing appended."""
    cluster = compacted_cluster()
    assert produce_keyed(cluster, [("k", "v"), (None, "no key")]) is ErrorCode.INVALID_RECORD
    assert cluster.partition(cluster.leader()).log.log_end_offset == 0
    assert produce_keyed(cluster, [("k", "v")]) is ErrorCode.NONE


def test_a_cleaned_segment_has_its_time_index_and_the_replaced_ones_lose_theirs():
    """LogCleaner.cleanInto appends to the cleaned segment as LogSegment.append does (both
    indexes) and closes it with onBecomeInactiveSegment; Log.replaceSegments deletes the
    replaced segments with their index files. The files equal what recovery rebuilds
    (LogSegment.recover): a restart rewrites none of them."""
    cluster = compacted_cluster(brokers=(1,))
    write_history(cluster)
    cluster.run_for(2000)
    assert cluster.traced("segments_cleaned")
    files = cluster.disks[1].files
    partition_dir = "t-0/"

    def named(suffix):
        return {p[len(partition_dir):-len(suffix)] for p in files if p.startswith(partition_dir) and p.endswith(suffix)}
    logs, time_indexes = named(".log"), named(".timeindex")
    active = max(logs)
    assert time_indexes == logs - {active}  # one per sealed segment, none of a replaced one
    before = {p: bytes(files[p]) for p in files if p.endswith(".timeindex")}
    cluster.crash(1)
    cluster.run_for(20000)
    cluster.start(1)
    assert cluster.wait_for(cluster.settled, 5000)
    assert {p: bytes(files[p]) for p in files if p.endswith(".timeindex")} == before


def test_a_retry_of_a_batch_the_cleaner_removed_is_answered_from_the_producer_state():
    """Kafka 2.7.0 core/src/main/scala/kafka/log/ProducerStateManager.scala
    (ProducerStateEntry.findDuplicateBatch over its last five BatchMetadata) and Log.scala
    (analyzeAndValidateProducerState, append's early return with the duplicate's
    firstOffset and lastOffset): a duplicate is answered from the producer state, not from
    the log. LogCleaner.scala cleanInto keeps only a producer's last batch
    (isBatchLastRecordOfProducer), so a retry of an earlier one of its last five finds
    the batch gone from the log: it is still a duplicate, answered with its offsets."""
    cluster = compacted_cluster()
    leader = cluster.leader()

    def send(sequence: int, value: str):
        batch = RecordBatch(0, -1, [Record("k", value, 10)], producer_id=7, producer_epoch=0,
                            base_sequence=sequence)
        response = cluster.request_and_wait(leader, lambda cid: ProduceRequest(cid, -1, 30000, {TP: batch}), 10000)
        assert response is not None
        return response.partitions[TP]

    offsets = [send(sequence, f"v{sequence}").base_offset for sequence in range(5)]
    assert produce_keyed(cluster, [("k", "later")]) is ErrorCode.NONE  # supersedes even the last batch
    for r in range(8):  # other keys roll segments past the producer's batches
        assert produce_keyed(cluster, [(f"f{r}", "x" * 40), (f"g{r}", "y" * 40)]) is ErrorCode.NONE
    cluster.run_for(2000)
    held = {o for o, _, _ in read_back(cluster, leader)}
    assert offsets[1] not in held, "the cleaner kept the batch: the test forces nothing"
    # The producer's last batch stays as an empty header (cleanInto's RETAIN_EMPTY), so
    # its last sequence survives a rebuild of the producer state from the log.
    assert offsets[4] not in held and cluster.partition(leader).log.batch_at(offsets[4]).base_offset == offsets[4]
    assert cluster.partition(leader).log.producers.entries[7].batches[1].first_offset == offsets[1]
    end = cluster.partition(leader).log.log_end_offset
    retried = send(1, "v1")
    assert (retried.error, retried.base_offset) == (ErrorCode.NONE, offsets[1])
    assert cluster.partition(leader).log.log_end_offset == end  # nothing appended
    assert cluster.traced("produce_duplicate", offset=offsets[1], base_sequence=1)
    assert send(5, "v5").error is ErrorCode.NONE  # the sequence goes on from the last batch


def test_a_follower_catching_up_from_a_cleaned_leader_stores_its_cleaned_batches():
    """A follower down while its leader cleaned fetches the cleaned batches, with their
    gaps, and stores them as its own cleaner would (Kafka's follower appends the
    leader's batches as they are: Log.appendAsFollower). Its log then reads as the
    leader's: the same record at every offset both hold, the same last value per key."""
    cluster = compacted_cluster()
    follower = 3 if cluster.leader() != 3 else 2
    cluster.crash(follower)
    # batches of five records, the first with a sixth key written once: its batch keeps
    # that record alone, at its own offset (a gap inside the batch). acks=1: the leader
    # does not wait for the ISR to drop the follower.
    assert produce_keyed(cluster, [(f"k{k}", f"v0-{k}") for k in range(6)], acks=1) is ErrorCode.NONE
    for r in range(1, 12):
        assert produce_keyed(cluster, [(f"k{k}", f"v{r}-{k}") for k in range(5)], acks=1) is ErrorCode.NONE
    last = {**{f"k{k}": f"v11-{k}" for k in range(5)}, "k5": "v0-5"}
    cluster.run_for(20000)  # the cleaning, and the follower's old session expiring (18 s)
    leader = cluster.leader()
    assert [f for t, b, f in cluster.traced("segments_cleaned") if b == leader]
    cluster.start(follower)
    assert cluster.wait_for(lambda: cluster.partition(follower) is not None and cluster.partition(
        follower).log.log_end_offset == cluster.partition(leader).log.log_end_offset, 20000)
    held, fetched = read_back(cluster, leader), read_back(cluster, follower)
    offsets = [o for o, _, _ in fetched]
    assert offsets != list(range(offsets[0], offsets[0] + len(offsets))), "no gap: nothing cleaned was fetched"
    at_leader = {o: (k, v) for o, k, v in held}
    assert all(at_leader[o] == (k, v) for o, k, v in fetched if o in at_leader)
    assert {k: v for _, k, v in fetched} == {k: v for _, k, v in held} == last
