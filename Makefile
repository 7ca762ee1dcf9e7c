# onlinegp: `make mission` runs the default active-mapping mission, `make test` the test suite.
# Both create .venv and install the pinned dependencies on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install extras lint test test-fast test-foreign mission serve bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

# optional extras into make's .venv, editable as the install above (a plain `pip install ".[x]"` would replace it):
# make extras EXTRAS=geotiff,bo
extras: $(STAMP)
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples docs/hooks.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples docs/hooks.py

# tests/experiments/service/test_browser.py drives Debian's chromium (skipped without it): installed here where
# apt-get can, never failing the build where it cannot
test: lint
	command -v chromium >/dev/null || (command -v apt-get >/dev/null && apt-get install -y -q chromium >/dev/null 2>&1) || true
	OMP_NUM_THREADS=1 MPLBACKEND=Agg $(PY) -m pytest -q -n 2 --dist loadfile

# the tests that pin numbers (marker `pinned`) again, under CPU dispatches no current x86-64 machine picks by
# itself: what another CPU would see (.ci/run runs it after `make test`)
FOREIGN_DISPATCH := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONLINEGP_NATIVE=0 OPENBLAS_CORETYPE=Sandybridge
test-foreign: $(STAMP)
	$(FOREIGN_DISPATCH) OMP_NUM_THREADS=1 MPLBACKEND=Agg $(PY) -m pytest -q -m pinned

test-fast: $(STAMP)
	MPLBACKEND=Agg $(PY) -m pytest -q -x -m "not slow"

# onlinegp picks the OpenMP thread count itself (src/onlinegp/threads.py); `make mission OMP_NUM_THREADS=2` overrides.
mission: $(STAMP)
	MPLBACKEND=Agg $(VENV)/bin/onlinegp mission --out runs/make-mission --force

# the live mapping service on a bundled terrain with two simulated vehicles: open http://127.0.0.1:8000/
serve: $(STAMP)
	MPLBACKEND=Agg $(VENV)/bin/onlinegp serve demo

bench: $(STAMP)
	MPLBACKEND=Agg $(PY) benchmarks/perf/run.py

# the API reference, generated from the docstrings (mkdocs-material + mkdocstrings), into site/
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .pytest_cache
