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
    assert cache.end_offset_for(9, 40) == (5, 40)


def test_an_epoch_below_every_entry_is_undefined():
    cache = LeaderEpochCache()
    cache.assign(3, 7)
    assert cache.end_offset_for(1, 10) == (UNDEFINED, UNDEFINED)
    assert LeaderEpochCache().end_offset_for(0, 0) == (UNDEFINED, UNDEFINED)


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
