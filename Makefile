# The two commands a fresh machine needs: `make demo` and `make test`.
# Both create .venv and install the project (and what its tests need) on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
COMPILED_STAMP := $(VENV)/.installed-compiled
DEMO_OUT ?= runs/demo

.PHONY: demo test test-fast test-deep bench bench-spark install compiled zookeeper kcat chromium lossyfs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

# What only the tests need (pytest, hypothesis, real Kafka clients): the `test` extra.
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

install: $(STAMP)

# Optional and separate from `make demo` (compiling takes one to two minutes): broker_core
# and the simulation's hot modules compiled with mypyc into build/mypyc (docs/compiled.md).
# `isrlab run` uses the build while it matches the sources. A failure never stops make:
# everything then runs interpreted, with the same traces.
$(COMPILED_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[compiled]'
	touch $(COMPILED_STAMP)

compiled: $(STAMP)
	@$(MAKE) --no-print-directory $(COMPILED_STAMP) || echo "isrlab: could not install mypyc; everything runs interpreted"
	@$(PY) -m isrlab build || echo "isrlab: compiling failed (above); everything runs interpreted"

# The real-I/O tests start a local ZooKeeper from Debian's package (and java, which it
# pulls in). Installed when missing; CI runs as root, elsewhere sudo is used if present.
SUDO := $(shell [ "$$(id -u)" = 0 ] || command -v sudo)
zookeeper:
	@if dpkg -s zookeeper >/dev/null 2>&1 && command -v java >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "installing Debian's zookeeper package (the real-I/O tests run it)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q zookeeper; \
	else \
		echo "no apt-get here: install ZooKeeper by hand; the ZooKeeper tests skip without it"; \
	fi

# kcat (Debian's package) is one of the real clients the broker's tests use.
kcat:
	@if command -v kcat >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "installing Debian's kcat package (the real-I/O tests run it)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q kcat; \
	else \
		echo "no apt-get here: install kcat by hand; the kcat tests skip without it"; \
	fi

# The HTML report's test opens it in headless Chromium (Debian's chromium package).
chromium:
	@if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium package (the HTML report's test runs it headless)"; \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; \
	else \
		echo "no apt-get here: install Chromium by hand; the HTML report's test skips without it"; \
	fi

# Power loss on real files (real_io/lossy_fs.py) is a FUSE file system in Python: fusepy
# (a project dependency, ctypes only: nothing to compile) loads Debian's libfuse 2, named
# libfuse2t64 from Debian 13 on. Installed when missing. Without it (or without /dev/fuse)
# power loss on a real cluster is refused with the reason, and its tests skip naming it.
lossyfs:
	@if $(PYTHON) -c "import ctypes.util, sys; sys.exit(ctypes.util.find_library('fuse') is None)"; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "installing Debian's libfuse 2 (the power-loss tests mount a FUSE file system)"; \
		$(SUDO) apt-get update -q && { DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q libfuse2t64 \
			|| DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q libfuse2; }; \
	else \
		echo "no apt-get here: install libfuse 2 by hand; power loss on real files is refused without it"; \
	fi

# A known Kafka data-loss bug and the configuration that prevents it, side by side:
# one file, two variants, one table (exit 0: each variant meets its own expectations).
# Then the same bug with its second failure left to a random nemesis, whose outcome
# depends on the seed, over 24 seeds as Spark tasks: the report estimates how often
# the unsafe configuration loses acknowledged writes (exit 1 of the sweep, some seeds
# failing, is expected).
demo: $(STAMP)
	$(VENV)/bin/isrlab run scenarios/library/jepsen-2013.yaml --seed 1 --out $(DEMO_OUT)/jepsen-2013
	@echo
	@echo "The bug (Kafka 0.8 defaults) and its fix (min.insync.replicas=2, no unclean election):"
	@echo "  pictures: $(DEMO_OUT)/jepsen-2013/unclean/timeline-t-0.png"
	@echo "            $(DEMO_OUT)/jepsen-2013/safe/timeline-t-0.png"
	@echo "  verdicts: $(DEMO_OUT)/jepsen-2013/unclean/verdict.json, $(DEMO_OUT)/jepsen-2013/safe/verdict.json"
	@echo
	@echo "The same bug when a random nemesis (crash, pause, isolate) brings the second failure:"
	@echo "whether it hits the lone leader depends on the seed. Both variants over 24 seeds each,"
	@echo "as Spark tasks, then the Spark report (the unsafe variant fails on some seeds):"
	$(VENV)/bin/isrlab sweep scenarios/library/jepsen-2013-nemesis.yaml --seeds 1-24 --out $(DEMO_OUT)/sweep || [ $$? -eq 1 ]
	$(VENV)/bin/isrlab report $(DEMO_OUT)/sweep
	@echo
	@echo "  HTML report (open it in a browser): $(DEMO_OUT)/sweep/report/report.html"

# The suite tests the interpreted code; tests/test_compiled.py compares it with the
# compiled build, which `compiled` makes first (or the test compiles one itself).
#
# It runs on TEST_WORKERS pytest-xdist workers (TEST_WORKERS=0: in make's own pytest
# process, one test after another). Most of its time is spent waiting on brokers,
# ZooKeeper, Spark and clients in other processes, not on the CPU, so more workers than
# the machine's 2 cores pay: 4 was the fastest of 2, 3 and 4 measured on it
# (docs/testing.md). --dist loadgroup hands each test to whichever worker is free, as
# --dist load does, but keeps each xdist group on one worker: tests/conftest.py groups
# the users of the Spark session (one JVM, one sweep) and the tests of a file that share
# a module-scoped fixture (a served broker, the compiled build), so these start once.
# --dist load would start them on every worker; --dist loadfile would also tie every
# long file to one worker; --dist worksteal knows no groups. A failing test fails the
# run as it does without xdist (no reruns).
TEST_WORKERS ?= 4
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadgroup

test: $(TEST_STAMP) compiled zookeeper kcat chromium lossyfs
	$(PY) -m pytest -q $(PYTEST_PARALLEL)

# Everything but the tests marked slow (still part of `make test` and CI), in parallel too.
test-fast: $(TEST_STAMP) compiled zookeeper kcat chromium lossyfs
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not slow"

# The property tests (hypothesis) with many more examples than `make test` draws:
# ISRLAB_DEEP=1 raises every one's count (tests/properties/depth.py, docs/testing.md).
PROPERTY_TESTS := tests/properties tests/broker_core/test_cleaner_properties.py tests/broker_core/test_quota_properties.py tests/broker_core/test_replication_machine.py
test-deep: $(TEST_STAMP)
	ISRLAB_DEEP=1 $(PY) -m pytest -q $(PYTEST_PARALLEL) $(PROPERTY_TESTS)

# sim_speed runs the simulation interpreted and, with the build, compiled too.
bench: $(STAMP) compiled
	$(PY) bench/sim_speed.py --write docs/benchmarks.md

# Spark sweeps against isrlab run --jobs N and one process, compiled and interpreted, and the report against DuckDB (docs/benchmarks.md).
bench-spark: $(STAMP) compiled
	$(PY) -m pip install --quiet duckdb
	$(PY) bench/spark_sweep.py --seeds 200 --serial --write docs/benchmarks.md
	$(PY) bench/spark_report.py

clean:
	rm -rf $(VENV) runs build .pytest_cache .hypothesis
