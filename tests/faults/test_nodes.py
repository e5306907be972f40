"""faults/nodes.py: broker node names, built and read back in one place."""
from faults.nodes import broker_id_of, broker_node


def test_a_broker_node_name_gives_back_its_id():
    assert broker_node(3) == "broker-3"
    assert broker_id_of(broker_node(12)) == 12


def test_other_nodes_have_no_broker_id():
    for node in ("zk", "producer-0", "consumer-1", "reader", "broker-", "broker-x", "broker--1"):
        assert broker_id_of(node) is None, node
