"""Tests of onlinegp.data: bundled datasets, splits and stream orders."""
