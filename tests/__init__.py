"""onlinegp's tests, laid out as the source tree (tests/library/ mirrors src/onlinegp/, tests/experiments/ mirrors
src/onlinegp/experiments/) with the end-to-end tests apart in tests/e2e/.

Every test directory is a package (this file and one ``__init__.py`` in each folder), so test files may share a
basename (``library/models/test_poam.py``, ``experiments/bench/test_poam.py``); pytest puts the repository root on
``sys.path``, and shared helpers import as ``tests.reference`` and ``tests.conftest``.
"""
