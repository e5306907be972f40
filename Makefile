# The two commands a fresh machine needs: `make demo` and `make test`.
# Both create .venv and install the project (and what its tests need) on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_OUT ?= runs/demo

.PHONY: demo test test-fast bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/isrlab run scenarios/library/leader-crash.yaml --seed 1 --out $(DEMO_OUT)/leader-crash

test: $(STAMP)
	$(PY) -m pytest -q

# Everything but the suites marked slow (still part of `make test` and CI).
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) bench/sim_speed.py --write docs/benchmarks.md

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
