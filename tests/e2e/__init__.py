"""End-to-end tests: the README, docs, quick start and examples as written, the install, missions through the
command line, the benchmark scripts, and sweeps killed and resumed across processes."""
