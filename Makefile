# onlinegp: `make mission` runs the default active-mapping mission, `make test` the test suite.
# Both create .venv and install the pinned dependencies on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-fast mission bench clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

test: $(STAMP)
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(PY) -m pytest -q -n 2 --dist loadfile

test-fast: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -x -m "not slow"

# One thread: POAM's per-step matrices (500 x 500) are too small to gain from a second thread on a 2-core machine
# (the default mission took 87 s with one thread and 162 s with two); set OMP_NUM_THREADS to override.
OMP_NUM_THREADS ?= 1
mission: $(STAMP)
	OMP_NUM_THREADS=$(OMP_NUM_THREADS) MPLBACKEND=Agg $(VENV)/bin/onlinegp mission --out runs/mission

bench: $(STAMP)
	MPLBACKEND=Agg $(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache
