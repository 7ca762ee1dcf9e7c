"""Tests of the library (src/onlinegp/ outside experiments/), one folder per subpackage."""
