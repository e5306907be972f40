"""A broker that left and registered again between two reads of /brokers/ids: a bounce
that only a controller comparing sessions (KIP-380) sees."""
import pytest

from broker_core import coordination as coord
from broker_core.inputs import CoordWatchFired, MessageReceived
from broker_core.messages import LeaderAndIsrRequest
from tests.harness import ZK, Cluster


def _bounce_unseen(profile: str) -> tuple[Cluster, list, int]:
    """Broker 3 crashes and its session expires while the controller (1) does not hear
    of it (the watch notification is held); 3 starts again and registers with a new
    session; only then does the notification arrive and the controller read the
    children, which list 3 as before."""
    cluster = Cluster(profile=profile)
    cluster.start_all()
    assert cluster.wait_for(cluster.settled, 10000)
    cluster.run_for(200)
    assert cluster.controller() == 1
    received = []
    deliver = cluster._deliver

    def recording(broker, event):
        deliver(broker, event)
        if isinstance(event, MessageReceived):
            received.append((cluster.now, broker, event.message))
    cluster._deliver = recording
    cluster.block(ZK, 1, both=False)  # the watch notification to 1 is held back
    session = cluster.sessions[3]
    cluster.crash(3)
    cluster.store.expire(session, reason="test")
    cluster.start(3)
    assert cluster.wait_for(lambda: len([b for _, b, _ in cluster.traced("broker_registered") if b == 3]) == 2,
                            30000)
    since = cluster.now
    cluster.heal()
    cluster._push(cluster.now + 1, 1, CoordWatchFired(coord.BROKER_IDS_PATH, "children"))
    cluster.run_for(2000)
    return cluster, received, since


def test_a_27_controller_handles_a_changed_registration_as_a_failure_and_a_start():
    """2.7.0 core/src/main/scala/kafka/controller/KafkaController.scala processBrokerChange:
    bouncedBrokerIds (same id, newer broker epoch) go through onBrokerFailure, then
    onBrokerStartup: the restarted broker gets LeaderAndIsr for its partitions."""
    cluster, received, since = _bounce_unseen("kafka-2.7")
    changes = [f for t, b, f in cluster.traced("brokers_changed") if t >= since]
    assert changes and changes[0]["bounced"] == [3] and changes[0]["started"] == [3]
    assert any(b == 3 and type(m) is LeaderAndIsrRequest for t, b, m in received if t >= since)
    assert cluster.partition(3) is not None


def test_a_08_controller_does_not_see_a_broker_that_came_back_between_two_reads():
    """0.8.2.2 core/src/main/scala/kafka/controller/ReplicaStateMachine.scala
    BrokerChangeListener.handleChildChange compares broker ids only: 3 is neither dead nor
    new, so neither onBrokerFailure nor onBrokerStartup runs and the restarted broker is
    never told its partitions (KAFKA-1120, fixed by KIP-380 in 2.2)."""
    cluster, received, since = _bounce_unseen("kafka-0.8")
    assert not [f for t, b, f in cluster.traced("brokers_changed") if t >= since]
    assert not any(b == 3 and type(m) is LeaderAndIsrRequest for t, b, m in received)
    assert cluster.partition(3) is None
    assert 3 in cluster.nodes[1].controller.live


@pytest.mark.parametrize("profile,detects", [("kafka-0.8", False), ("kafka-2.7", True), ("kafka-3.0", True)])
def test_bounce_detection_is_the_profiles_default_and_can_be_set(profile, detects):
    from broker_core.config import broker_config
    assert broker_config(profile).controller_detects_bounce is detects
    assert broker_config(profile, {"controller_detects_bounce": not detects}).controller_detects_bounce is not detects
