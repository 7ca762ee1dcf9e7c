"""Tests of onlinegp.experiments.bench: the sweep runner, the paper benches, their tables and reports."""
