"""Conditions on a group member's state (faults/triggers.py, ``member:``), judged on
hand-made views: what holds, what does not, and a member the view does not show."""
from faults.triggers import Comparison, Condition, cluster_view, member_view, parse_comparison


def view(**members: dict) -> dict:
    return cluster_view(1, {}, [], {name.replace("_", "-"): state for name, state in members.items()})


def processing(member: str = "group-0-0", value: bool = True, **more) -> Condition:
    return Condition(None, None, (("processing", value),) + tuple(more.items()), member=member)


def test_processing_holds_only_within_a_batch():
    busy = member_view(alive=True, processing=True, consumed=40, generation=2)
    idle = member_view(alive=True, processing=False, consumed=40, generation=2)
    assert processing().holds(view(group_0_0=busy))
    assert not processing().holds(view(group_0_0=idle))
    assert processing(value=False).holds(view(group_0_0=idle))
    # another member's batch is not this one's
    assert not processing().holds(view(group_0_0=idle, group_0_1=busy))
    assert processing("group-0-1").holds(view(group_0_0=idle, group_0_1=busy))


def test_a_dead_member_is_in_no_batch_and_no_generation():
    dead = member_view(alive=False, processing=True, consumed=40, generation=2)
    assert dead == {"processing": False, "consumed": 40, "generation": None}
    assert not processing().holds(view(group_0_0=dead))
    assert member_view(True, False, 0, -1)["generation"] is None  # NO_GENERATION: not joined


def test_consumed_and_generation_compare():
    state = member_view(alive=True, processing=False, consumed=40, generation=3)
    at_least = lambda field, text: Condition(None, None, ((field, parse_comparison(text)),), member="group-0-0")
    assert at_least("consumed", ">=40").holds(view(group_0_0=state))
    assert not at_least("consumed", ">=41").holds(view(group_0_0=state))
    assert at_least("generation", ">=1").holds(view(group_0_0=state))
    unjoined = member_view(alive=True, processing=False, consumed=0, generation=None)
    assert not at_least("generation", ">=0").holds(view(group_0_0=unjoined))  # none matches no comparison
    # all tests must hold
    both = processing(consumed=Comparison(">=", 40))
    assert not both.holds(view(group_0_0=state))
    assert both.holds(view(group_0_0=member_view(True, True, 40, 3)))


def test_a_member_the_view_does_not_show_never_matches():
    assert not processing().holds(view())
    assert not processing().holds({"controller": None, "partitions": {}})  # a view without members


def test_the_controller_and_a_member_together():
    busy = member_view(True, True, 1, 1)
    condition = Condition(None, None, (("processing", True),), controller=2, member="group-0-0")
    assert not condition.holds(view(group_0_0=busy))  # controller 1
    assert condition.holds(cluster_view(2, {}, [], {"group-0-0": busy}))
    assert condition.describe() == {"controller": 2, "member": "group-0-0", "processing": True}
