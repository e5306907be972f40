"""faults/nemesis.py: the nemesis's draw of a reset."""
import random

from faults import model as fm
from faults.nemesis import nemesis_fault
from scenarios.model import NemesisSpec


def test_a_drawn_reset_takes_the_targets_links_to_the_other_brokers_and_zk():
    spec = NemesisSpec(("reset",), 1000, 1000, (1, 2, 3), 0, 10000)
    fault = nemesis_fault(random.Random(4), spec)
    assert isinstance(fault, fm.Reset)
    (drawn,), others = fault.between
    assert drawn in ("broker-1", "broker-2", "broker-3")
    assert sorted(others) == sorted({"broker-1", "broker-2", "broker-3", "zk"} - {drawn})
