"""faults/links.py: which directed links each network fault cuts, and the same fault
read back from its fault_started fields (what the leadership checker replays)."""
import pytest

from faults import model as fm
from faults.links import cut_from_fields, cut_links, reset_links

NODES = ["a", "b", "c", "zk"]


def test_isolate_cuts_its_nodes_from_the_rest_and_keeps_loopbacks():
    assert cut_links(fm.Isolate(("a",)), NODES) == {("a", n) for n in "bc"} | {(n, "a") for n in "bc"} | {
        ("a", "zk"), ("zk", "a")}


def test_split_cuts_between_groups_and_spares_nodes_in_no_group():
    cuts = cut_links(fm.Split((("a", "b"), ("c",))), NODES)
    assert cuts == {("a", "c"), ("c", "a"), ("b", "c"), ("c", "b")}


def test_bridge_keeps_the_bridge_node_connected_to_both_halves():
    assert cut_links(fm.Bridge((("a", "b"), ("b", "c")), "b"), NODES) == {("a", "c"), ("c", "a")}


def test_cut_is_one_way_and_only_between_known_nodes():
    assert cut_links(fm.Cut(("a", "b"), ("b", "nowhere")), NODES) == {("a", "b")}


def test_a_reset_takes_both_directions_between_the_sides_and_no_loopback():
    links = reset_links(fm.Reset((("a", "b"), ("b", "zk", "nowhere"))), NODES)
    assert links == {("a", "b"), ("b", "a"), ("a", "zk"), ("zk", "a"), ("b", "zk"), ("zk", "b")}
    assert reset_links(fm.Reset((("a",), ("a",))), NODES) == set()


def test_a_fault_that_cuts_nothing_by_nature_is_refused():
    with pytest.raises(TypeError):
        cut_links(fm.Heal(), NODES)  # type: ignore[arg-type]


def test_fields_give_back_the_fault_as_it_resolved():
    assert cut_from_fields({"fault": "isolate", "nodes": ["controller"], "targets": ["b"]}) == fm.Isolate(("b",))
    assert cut_from_fields({"fault": "random_halves", "groups": [["a", "zk"], ["b"]]}) == fm.Split(
        (("a", "zk"), ("b",)))
    assert cut_from_fields({"fault": "cut", "targets": [["a"], ["b"]]}) == fm.Cut(("a",), ("b",))
    assert cut_from_fields({"fault": "bridge", "targets": [["a", "b"], ["b", "c"]], "via": "b"}) == fm.Bridge(
        (("a", "b"), ("b", "c")), "b")


def test_fields_of_older_traces_name_targets_by_the_faults_own_fields():
    assert cut_from_fields({"fault": "cut", "sources": ["a"], "destinations": ["b"]}) == fm.Cut(("a",), ("b",))
    assert cut_from_fields({"fault": "bridge", "halves": [["a"], ["c"]], "via": "b"}) == fm.Bridge(
        (("a",), ("c",)), "b")


def test_no_cut_for_a_fault_that_changed_nothing_or_cuts_no_link():
    assert cut_from_fields({"fault": "isolate", "targets": ["a"], "no_effect": "role resolved to nothing"}) is None
    assert cut_from_fields({"fault": "link", "targets": [["a"], ["b"]], "latency_ms": 50}) is None
    assert cut_from_fields({"fault": "crash", "targets": [1]}) is None


def test_a_bridge_through_a_role_bridges_through_the_broker_it_resolved_to():
    fields = {"fault": "bridge", "targets": [["broker-1", "broker-2"], ["broker-3", "broker-2"]],
              "via": "controller", "roles": {"controller": 2}}
    bridge = cut_from_fields(fields)
    assert bridge == fm.Bridge((("broker-1", "broker-2"), ("broker-3", "broker-2")), "broker-2")
    assert cut_links(bridge, ["broker-1", "broker-2", "broker-3"]) == {("broker-1", "broker-3"),
                                                                       ("broker-3", "broker-1")}
