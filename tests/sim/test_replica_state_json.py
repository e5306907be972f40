"""The sampler's replica_state lines (sim.world.replica_states_json): written by one
%-format per replica, the very bytes the trace's encoder writes for the snapshot."""
import io

from hypothesis import given, strategies as st

from analysis.trace import TraceWriter
from sim.world import _REPLICA_STATE_KEYS, replica_states_json
from tests.harness import Cluster


def line(fields: dict) -> str:
    out = io.StringIO()
    TraceWriter(out, "run", 3, "sim").write(100, "broker-1", "replica_state", fields)
    return out.getvalue()


def assert_written_as_encoded(snapshot: dict) -> None:
    out = io.StringIO()
    TraceWriter(out, "run", 3, "sim").write_json(100, "broker-1", "replica_state",
                                                 '{"partitions":%s}' % replica_states_json(snapshot))
    assert out.getvalue() == line({"partitions": snapshot})


offsets = st.integers(-1, 10**15)
states = st.fixed_dictionaries({
    "role": st.sampled_from(["leader", "follower", "offline"]), "leader": st.integers(-1, 5),
    "leader_epoch": st.integers(-1, 10**6), "isr": st.lists(st.integers(0, 1000), max_size=5),
    "log_end_offset": offsets, "high_watermark": offsets, "log_start_offset": offsets, "durable_offset": offsets})
# names the encoder sorts differently from TopicPartition ("t-10" before "t-2"), and
# names it must escape
names = st.builds(lambda topic, p: f"{topic}-{p}", st.sampled_from(["t", "a.b_c", 'q"\u00e9\n']), st.integers(0, 12))


@given(st.dictionaries(names, states, max_size=14))
def test_snapshots_are_written_as_the_encoder_writes_them(snapshot):
    assert_written_as_encoded(snapshot)


@given(st.dictionaries(names, states, min_size=1, max_size=4), st.data())
def test_a_state_of_another_shape_is_encoded(snapshot, data):
    name = data.draw(st.sampled_from(sorted(snapshot)))
    changed = dict(snapshot[name])
    if data.draw(st.booleans()):
        changed["new_field"] = data.draw(st.integers() | st.text(max_size=3) | st.none())
    else:
        del changed[data.draw(st.sampled_from(sorted(changed)))]
    assert_written_as_encoded({**snapshot, name: changed})


def test_the_brokers_snapshots_have_the_shape_the_fast_path_writes():
    # were Partition.snapshot to gain or lose a field, every line would silently take the
    # slow path: this says so instead
    cluster = Cluster(partitions=12)
    cluster.start_all()
    assert cluster.wait_for(lambda: all(cluster.leader(p) is not None for p in range(12)))
    cluster.produce_and_wait(cluster.leader(0), ["a", "b"])
    for broker, node in cluster.nodes.items():
        snapshot = node.snapshot()
        assert len(snapshot) == 12 and all(state.keys() == _REPLICA_STATE_KEYS for state in snapshot.values())
        assert_written_as_encoded(snapshot)
