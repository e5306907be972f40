from broker_core.epoch_cache import UNDEFINED, LeaderEpochCache


def make() -> LeaderEpochCache:
    cache = LeaderEpochCache()
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(5, 25)
    return cache


def test_end_offset_of_an_epoch_is_the_start_of_the_next():
    cache = make()
    assert cache.end_offset_for(0, 40) == (0, 10)
    assert cache.end_offset_for(2, 40) == (2, 25)
    assert cache.end_offset_for(5, 40) == (5, 40)


def test_kip_279_answers_for_the_largest_epoch_not_above_the_request():
    cache = make()
    assert cache.end_offset_for(3, 40) == (2, 25)
    assert cache.end_offset_for(4, 40) == (2, 25)


def test_an_epoch_newer_than_the_latest_is_undefined():
    """Kafka 2.7.0 LeaderEpochFileCache.endOffsetFor: no higher entry -> (UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET), so the asker falls back to its high watermark (it used to
    answer the latest epoch with the log end offset)."""
    cache = make()
    assert cache.end_offset_for(9, 40) == (UNDEFINED, UNDEFINED)
    assert cache.end_offset_for(UNDEFINED, 40) == (UNDEFINED, UNDEFINED)


def test_an_epoch_below_every_entry_answers_the_first_entrys_start_offset():
    """Kafka 2.7.0 LeaderEpochFileCache.endOffsetFor: a requested epoch older than the
    first entry is answered with itself and the first entry's start offset (the data
    before it is gone), not UNDEFINED; an empty cache is still UNDEFINED."""
    cache = LeaderEpochCache()
    cache.assign(3, 7)
    cache.assign(4, 9)
    assert cache.end_offset_for(1, 10) == (1, 7)
    assert LeaderEpochCache().end_offset_for(0, 0) == (UNDEFINED, UNDEFINED)


def test_before_kip_279_the_answer_is_an_offset_and_undefined_outside_the_cache():
    """Kafka 1.1.0 LeaderEpochFileCache.endOffsetFor: the latest epoch -> the log end;
    an epoch below the first entry or above every entry -> UNDEFINED_EPOCH_OFFSET;
    otherwise the start offset of the first larger epoch, even for an epoch the cache
    never had."""
    cache = make()
    assert cache.end_offset_for_kip101(5, 40) == 40
    assert cache.end_offset_for_kip101(3, 40) == 25
    assert cache.end_offset_for_kip101(0, 40) == 10
    assert cache.end_offset_for_kip101(9, 40) == UNDEFINED
    low = LeaderEpochCache()
    low.assign(3, 7)
    assert low.end_offset_for_kip101(1, 10) == UNDEFINED
    assert LeaderEpochCache().end_offset_for_kip101(0, 0) == UNDEFINED


def test_older_epochs_are_not_reassigned():
    cache = make()
    assert not cache.assign(2, 30)
    assert cache.entries[-1] == (5, 25)


def test_truncation_drops_epochs_that_start_at_or_after_the_new_end():
    cache = make()
    assert cache.truncate_from_end(25)
    assert cache.entries == [(0, 0), (2, 10)]
    assert not cache.truncate_from_end(30)


def test_checkpoint_round_trip_and_garbage():
    cache = make()
    assert LeaderEpochCache.decode(cache.encode()).entries == cache.entries
    assert LeaderEpochCache.decode(b"garbage\n").entries == []
    assert LeaderEpochCache.decode(cache.encode()[:-6]).entries == []
