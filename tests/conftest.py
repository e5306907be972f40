"""The suite tests the interpreted code: every `isrlab run` it starts, in this process or
in a child, leaves `make compiled`'s build alone (isrlab/compiled.py). Only
tests/test_compiled.py runs the compiled build, in children it sets up itself.

`make test` runs the suite on several pytest-xdist workers with `--dist loadgroup`: a
test goes to whichever worker is free, except that the tests of one xdist group all run
on one worker, in their file's order. Here each test gets its group, so that what is
expensive to set up is set up once and what tests share stays shared:
- a test using a module-scoped fixture (a served broker, a compiled build, a simulated
  run that several tests read) is grouped with the other such tests of its file: the
  fixture then starts once, not once per worker, and tests that build on what an earlier
  one left in it still find it;
- a test using a session-scoped fixture named in SHARED_SESSIONS (the Spark session and
  the sweep computed on it) is in that fixture's group: one JVM for the whole run.
Everything else (the session-scoped ZooKeeper is cheap: one per worker) spreads freely.
Without xdist (plain `pytest`) the groups change nothing.

xdist hands out the groups first, largest first, then the other tests in the order they
were collected. On workers the tests marked slow (measured: more than about 5 s) that are
in no group are moved to the front of that order, so that no long test starts last and
keeps one worker busy while the others have finished."""
import os

import pytest

os.environ["ISRLAB_COMPILED"] = "0"

from broker_core import mutants  # noqa: E402

# ISRLAB_MUTANT for the tests that drive cores without a binding (tests/harness.py): the
# core reads no environment, its bindings and this file hand it over (docs/mutants.md)
mutants.activate_from(os.environ)

# Session-scoped fixtures too costly to start on every worker -> the group of their users.
SHARED_SESSIONS = {"spark": "spark"}


def xdist_group_of(item: pytest.Item) -> str | None:
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is None:  # not a Python test function (a doctest, say)
        return None
    for name, group in SHARED_SESSIONS.items():
        if name in fixtures.names_closure:
            return group
    scopes = {definitions[-1].scope for definitions in fixtures.name2fixturedefs.values() if definitions}
    if "module" in scopes or "class" in scopes:
        return item.nodeid.split("::")[0]  # the file
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist appends the groups to the test ids
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (group := xdist_group_of(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if "PYTEST_XDIST_WORKER" in os.environ:  # every worker collects, and orders, alike
        early = [item.get_closest_marker("slow") is not None and item.get_closest_marker("xdist_group") is None
                 for item in items]
        items[:] = [item for item, first in zip(items, early) if first] + \
                   [item for item, first in zip(items, early) if not first]
