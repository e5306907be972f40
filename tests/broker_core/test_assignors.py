"""The assignors (broker_core/assignors.py, sticky_assignor.py) on the examples of the
seed document 003 and of Kafka 2.7.0's own class documentation:
clients/src/main/java/org/apache/kafka/clients/consumer/RangeAssignor.java (class doc),
RoundRobinAssignor.java (class doc), StickyAssignor.java (class doc, Examples 1 and 2),
with the rules of internals/AbstractStickyAssignor.java (assign, constrainedAssign,
generalAssign) and internals/AbstractPartitionAssignor.java (MemberInfo.compareTo)."""
from __future__ import annotations

import pytest

from broker_core.assignors import (RANGE, ROUND_ROBIN, STICKY, STRATEGIES, Subscription, UnknownAssignor, assign,
                                   member_order)
from broker_core.types import TopicPartition


def tps(text: str) -> list[TopicPartition]:
    """'t0p0 t1p2' -> [TopicPartition('t0', 0), TopicPartition('t1', 2)] (Kafka's doc notation)."""
    out = []
    for word in text.split():
        topic, _, partition = word.rpartition("p")
        out.append(TopicPartition(topic, int(partition)))
    return out


def same_topics(members: list[str], topics: list[str]) -> dict[str, Subscription]:
    return {m: Subscription.of(topics) for m in members}


def rejoin(subscriptions: dict[str, Subscription], previous: dict[str, list[TopicPartition]],
           generation: int) -> dict[str, Subscription]:
    """The members' next JoinGroup: the same topics, their last assignment as user data."""
    return {m: Subscription.of(s.topics, previous.get(m, ()), generation if m in previous else None)
            for m, s in subscriptions.items()}


def test_range_assignor_class_doc_example():
    """RangeAssignor.java: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2] (the seed's
    'two topics of 3 partitions each' imbalance: C0 has twice C1's partitions)."""
    result = assign(RANGE, same_topics(["C0", "C1"], ["t0", "t1"]), {"t0": 3, "t1": 3})
    assert result == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t1p2")}


def test_range_over_two_topics_of_four_partitions_is_even():
    """Seed 003: two topics of four partitions over two consumers come out even."""
    result = assign(RANGE, same_topics(["C0", "C1"], ["t0", "t1"]), {"t0": 4, "t1": 4})
    assert result == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t0p3 t1p2 t1p3")}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_seven_partitions_consumers_joining_one_by_one_the_eighth_gets_nothing(strategy):
    """Seed 003: a topic of 7 partitions; C0 alone owns all 7, partitions spread to C1..C6
    as they join, and the eighth consumer C7 gets none. Range and round robin give the
    first 7 % m of the m consumers one extra. Sticky rejoins with each member's last
    assignment as its user data and keeps what balance allows."""
    subscriptions: dict[str, Subscription] = {}
    previous: dict[str, list[TopicPartition]] = {}
    for joined in range(1, 9):
        subscriptions = rejoin({f"C{i}": Subscription.of(["t"]) for i in range(joined)}, previous, joined - 1)
        result = assign(strategy, subscriptions, {"t": 7})
        counts = [len(result[f"C{i}"]) for i in range(joined)]
        per, extra = divmod(7, joined)
        if strategy == STICKY:  # balanced, but a share follows what members kept, not their order
            counts.sort(reverse=True)
        assert counts == [per + 1] * extra + [per] * (joined - extra), (joined, result)
        assert sorted(tp.partition for owned in result.values() for tp in owned) == list(range(7))
        if strategy == STICKY:  # each survivor keeps as many of its partitions as its new share
            for member, owned in previous.items():
                assert len(set(owned) & set(result[member])) == min(len(owned), len(result[member]))
        previous = result
    assert previous["C7"] == []
    if strategy == RANGE:
        assert previous == {f"C{i}": [TopicPartition("t", i)] for i in range(7)} | {"C7": []}


def test_round_robin_class_doc_examples():
    """RoundRobinAssignor.java: identical subscriptions deal t0p0..t1p2 alternately;
    differing subscriptions (C0: t0; C1: t0, t1; C2: t0, t1, t2) skip members that do
    not subscribe, which leaves C2 with four (the seed's imbalance example)."""
    result = assign(ROUND_ROBIN, same_topics(["C0", "C1"], ["t0", "t1"]), {"t0": 3, "t1": 3})
    assert result == {"C0": tps("t0p0 t0p2 t1p1"), "C1": tps("t0p1 t1p0 t1p2")}
    mixed = {"C0": Subscription.of(["t0"]), "C1": Subscription.of(["t0", "t1"]),
             "C2": Subscription.of(["t0", "t1", "t2"])}
    result = assign(ROUND_ROBIN, mixed, {"t0": 1, "t1": 2, "t2": 3})
    assert result == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1 t2p0 t2p1 t2p2")}
    del mixed["C0"]  # StickyAssignor.java Example 2: round robin after C0 leaves
    assert assign(ROUND_ROBIN, mixed, {"t0": 1, "t1": 2, "t2": 3}) == {"C1": tps("t0p0 t1p1"),
                                                                        "C2": tps("t1p0 t2p0 t2p1 t2p2")}


def test_sticky_example_1_keeps_every_prior_partition_when_a_member_leaves():
    """StickyAssignor.java Example 1: three consumers, four topics of two partitions. The
    first assignment is the round robin one; after C1 leaves, round robin reshuffles
    while sticky keeps all of C0's and C2's partitions and shares C1's. (The class doc's
    exact lists predate 2.7.0's constrainedAssign, which gives C0 t0p1 rather than t2p0;
    the kept partitions and the balance are the same.)"""
    topics = ["t0", "t1", "t2", "t3"]
    counts = {t: 2 for t in topics}
    first = assign(STICKY, same_topics(["C0", "C1", "C2"], topics), counts)
    assert first == {"C0": tps("t0p0 t1p1 t3p0"), "C1": tps("t0p1 t2p0 t3p1"), "C2": tps("t1p0 t2p1")}
    assert first == assign(ROUND_ROBIN, same_topics(["C0", "C1", "C2"], topics), counts)
    survivors = rejoin(same_topics(["C0", "C2"], topics), {m: first[m] for m in ("C0", "C2")}, 1)
    second = assign(STICKY, survivors, counts)
    assert second == {"C0": tps("t0p0 t1p1 t3p0 t0p1"), "C2": tps("t1p0 t2p1 t2p0 t3p1")}
    assert assign(ROUND_ROBIN, survivors, counts) == {"C0": tps("t0p0 t1p0 t2p0 t3p0"),
                                                       "C2": tps("t0p1 t1p1 t2p1 t3p1")}


def test_sticky_example_2_balances_where_round_robin_does_not_and_keeps_five():
    """StickyAssignor.java Example 2 (generalAssign: subscriptions differ): C0 [t0p0],
    C1 [t1p0, t1p1], C2 [t2p0, t2p1, t2p2]; after C0 leaves, C1 [t1p0, t1p1, t0p0] and C2
    unchanged (5 partitions kept where round robin keeps 3)."""
    mixed = {"C0": Subscription.of(["t0"]), "C1": Subscription.of(["t0", "t1"]),
             "C2": Subscription.of(["t0", "t1", "t2"])}
    counts = {"t0": 1, "t1": 2, "t2": 3}
    first = assign(STICKY, mixed, counts)
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}
    survivors = rejoin({m: mixed[m] for m in ("C1", "C2")}, first, 1)
    assert assign(STICKY, survivors, counts) == {"C1": tps("t1p0 t1p1 t0p0"), "C2": tps("t2p0 t2p1 t2p2")}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_members_are_ordered_as_java_strings_so_c10_comes_before_c2(strategy):
    """Member ids sort as strings (MemberInfo.compareTo, String.compareTo): C1 < C10 < C2,
    so with four partitions over three members C1 and C10 take the first two ranges."""
    result = assign(strategy, same_topics(["C2", "C10", "C1"], ["t"]), {"t": 4})
    assert list(result) == ["C1", "C10", "C2"]
    if strategy == RANGE:
        assert result == {"C1": tps("tp0 tp1"), "C10": tps("tp2"), "C2": tps("tp3")}
    else:  # round robin and a fresh sticky assignment deal in member order
        assert result == {"C1": tps("tp0 tp3"), "C10": tps("tp1"), "C2": tps("tp2")}


def test_member_order_is_java_utf16_order_and_static_members_come_first():
    """Java compares UTF-16 code units: a character beyond the BMP (a surrogate pair,
    0xD800...) sorts before U+FFFF, where Python's code point order puts it after.
    Members with a group.instance.id come first, ordered by it (MemberInfo.compareTo)."""
    subs = {"\uffff": Subscription.of(["t"]), "\U00010000": Subscription.of(["t"])}
    assert member_order(subs) == ["\U00010000", "\uffff"]
    subs = {"A": Subscription.of(["t"]), "B": Subscription.of(["t"], group_instance_id="z"),
            "C": Subscription.of(["t"], group_instance_id="y")}
    assert member_order(subs) == ["C", "B", "A"]
    assert assign(RANGE, subs, {"t": 3}) == {"C": tps("tp0"), "B": tps("tp1"), "A": tps("tp2")}


def test_an_unknown_strategy_is_a_value_error_naming_it():
    with pytest.raises(UnknownAssignor) as raised:
        assign("cooperative-sticky", same_topics(["C0"], ["t"]), {"t": 1})
    assert isinstance(raised.value, ValueError) and raised.value.strategy == "cooperative-sticky"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_topics_without_partitions_or_subscribers_are_left_out(strategy):
    """AbstractPartitionAssignor.assign: a subscribed topic the metadata does not know
    (or with no partitions) is skipped; a topic nobody subscribes to is not handed out;
    a member with nothing to take still appears, with an empty list."""
    subs = {"C0": Subscription.of(["t", "missing"]), "C1": Subscription.of(["empty"])}
    result = assign(strategy, subs, {"t": 2, "empty": 0, "other": 5})
    assert result == {"C0": tps("tp0 tp1"), "C1": []}
    assert assign(strategy, {}, {"t": 2}) == {}


def test_sticky_drops_prior_partitions_that_no_longer_exist_or_two_members_claim():
    """Prior assignments 2.7.0 would pass through into its result (allSubscriptionsEqual
    filters only by topic): a partition beyond the topic's count is dropped, and one that
    two members claim in the same generation is kept by neither (3.1.0's rule), so each
    partition still has exactly one owner."""
    subs = {"C0": Subscription.of(["t"], tps("tp0 tp1 tp9"), 3), "C1": Subscription.of(["t"], tps("tp1 tp2"), 3)}
    result = assign(STICKY, subs, {"t": 4})
    owned = sorted(tp for tps_ in result.values() for tp in tps_)
    assert owned == tps("tp0 tp1 tp2 tp3")
    assert TopicPartition("t", 0) in result["C0"] and TopicPartition("t", 2) in result["C1"]


def test_sticky_prior_assignments_of_older_generations_do_not_count():
    """allSubscriptionsEqual: only members of the highest generation keep their prior
    partitions; C1's claim from generation 2 loses to C0's at generation 5."""
    subs = {"C0": Subscription.of(["t"], tps("tp2 tp3"), 5), "C1": Subscription.of(["t"], tps("tp0 tp1 tp2"), 2)}
    result = assign(STICKY, subs, {"t": 4})
    assert result == {"C0": tps("tp2 tp3"), "C1": tps("tp0 tp1")}


def test_sticky_general_case_does_not_give_a_partition_back_to_a_member_that_unsubscribed():
    """generalAssign with a subscription change: C1 owned t1p0 in generation 1 and C0 in
    generation 2, so C1 is t1p0's previous owner; C1 now subscribes only to t0 and C2
    (new) to t1. performReassignments in 2.7.0 would hand t1p0 back to its previous
    owner C1, which does not subscribe to t1; here it goes to C2."""
    subs = {"C0": Subscription.of(["t0", "t1"], tps("t1p0 t1p1 t1p2 t0p0"), 2),
            "C1": Subscription.of(["t0"], tps("t1p0"), 1), "C2": Subscription.of(["t1"])}
    result = assign(STICKY, subs, {"t0": 1, "t1": 3})
    assert result["C1"] == tps("t0p0")
    assert TopicPartition("t1", 0) in result["C2"]
    assert sorted(tp for owned in result.values() for tp in owned) == tps("t0p0 t1p0 t1p1 t1p2")


def test_sticky_moves_back_the_partition_that_moved_rather_than_swap_two():
    """AbstractStickyAssignor.PartitionMovements.getTheActualPartitionToBeMoved: while
    balancing, a partition of topic c moves from C2 to C0 and later one of c's must go
    from C0 to C2; the one that goes is the one that came, not another, so C2 keeps both
    of its prior c partitions (without the rule c3 and c0 swap owners and C2 loses c3).
    Found by comparing the assignor with and without the rule over random groups."""
    subs = {"C0": Subscription.of(["c"], (), 1), "C1": Subscription.of(["b"], (), 1),
            "C2": Subscription.of(["a", "d", "b", "c"], tps("bp3 cp3 cp4 dp0"), 1),
            "C3": Subscription.of(["b"], (), 1), "C4": Subscription.of(["d"], (), 1)}
    result = assign(STICKY, subs, {"a": 2, "b": 4, "c": 6, "d": 1})
    assert result == {"C0": tps("cp0 cp1 cp2 cp5"), "C1": tps("bp0 bp2"), "C2": tps("cp4 ap0 ap1 cp3"),
                      "C3": tps("bp1 bp3"), "C4": tps("dp0")}


def test_sticky_members_without_topics_do_not_make_subscriptions_look_equal():
    """2.7.0's allSubscriptionsEqual restarts its comparison after an empty subscription,
    so C0 [], C1 [], C2 [t] counted as equal and constrainedAssign handed t's partition
    to C0, which does not subscribe to t (found by the property tests)."""
    subs = {"C0": Subscription.of([]), "C1": Subscription.of([]), "C2": Subscription.of(["t"])}
    assert assign(STICKY, subs, {"t": 1}) == {"C0": [], "C1": [], "C2": tps("tp0")}


def test_sticky_compares_subscriptions_as_sets_of_topics():
    """2.7.0's allSubscriptionsEqual compares list lengths and containment, so C0 [t0, t1]
    and C1 [t1, t1] (a repeated topic, from a member's own bytes) counted as equal and C1
    got a partition of t0 (found by the property tests)."""
    subs = {"C0": Subscription.of(["t0", "t1"]), "C1": Subscription.of(["t1", "t1"])}
    assert assign(STICKY, subs, {"t0": 2}) == {"C0": tps("t0p0 t0p1"), "C1": []}
